"""it_triton_api: Triton's extensions of the KServe v2 API (model
configuration, statistics, model repository) over gRPC and REST, against the
real daemon on 127.0.0.1.

1. Wire shapes: ModelConfigResponse, ModelStatisticsResponse and
   RepositoryIndexResponse are decoded here field number by field number
   (a small protobuf wire reader, not our generated classes) and checked
   against the numbers of Triton's grpc_service.proto / model_config.proto.
2. ModelConfig: names, data types (TYPE_FP32, TYPE_STRING) and dims (-1 kept)
   equal the SavedModel signature read by GetModelMetadata; version_policy
   from the model config (latest 1, all); GET /v2/models/{m}/config is the
   same in Triton's JSON; an unknown model is NOT_FOUND / 404.
3. Statistics: after N inferences (KServe ModelInfer over gRPC and REST, TF
   Serving Predict and Classify) success, compute_input /
   compute_infer / compute_output counts and execution_count grow by exactly
   N, inference_count by the rows sent, fail by one per failed inference,
   last_inference lies in the test's window; metadata and config calls count
   nothing; REST /v2/models/stats and /v2/models/{m}[/versions/{v}]/stats
   say the same as gRPC; unknown model NOT_FOUND / 404.
4. Repository index: every model and version with state READY, ready=true
   filter, gRPC equals REST. A model whose base path has no version yet is
   listed UNAVAILABLE with the reason and keeps the server unready; its load
   fails FAILED_PRECONDITION; unloading it makes the server ready; once a
   version folder is there, a load serves it.
5. Load / unload round trip (gRPC and REST) with the gate open: unload makes
   the model unready, listed UNAVAILABLE "unloaded", its inferences NOT_FOUND
   saying so, the server stays ready; load brings it back with statistics
   from zero; unknown model NOT_FOUND / 404; an unsupported parameter is
   refused. Gate closed (no --enable_reload_config_rpc): PERMISSION_DENIED /
   403 naming the flag, and the model keeps serving.
6. ServerMetadata lists the extensions over gRPC and REST.
7. With --enable_batching, N concurrent calls: success and inference_count
   grow by exactly N and the rows, execution_count by 1..N (a batch runs
   once; how many calls meet in one depends on timing, not asserted).
"""
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (HPT, SRC, TWO_VERSIONS, WAIT, Daemon, check, float_tensor,  # noqa: E402
                          free_port, gen_protos)

DEMO = os.path.join(SRC, "models", "demo_ct")
SVC = "/inference.GRPCInferenceService/"


# ---- a protobuf wire reader: {field number: [values]} ----------------------

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """Field number -> list of values (int for varints, bytes for length-delimited)."""
    out, i = {}, 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise AssertionError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def packed_int64(b):
    vals, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        vals.append(v - (1 << 64) if v >= 1 << 63 else v)
    return vals


def one(f, num, default=None):
    return f.get(num, [default])[0]


# ---- helpers ----------------------------------------------------------------

def raw_call(d, method, req):
    """The raw response bytes of a unary call (no response class)."""
    fn = d.channel.unary_unary(SVC + method, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=lambda b: b)
    return fn(req, timeout=30)


def call(d, method, req, resp_cls):
    return resp_cls.FromString(raw_call(d, method, req))


def expect_code(fn, code, *needles, d=None):
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "wanted %s, got %s: %s" % (code, e.code(), e.details()), d)
        for n in needles:
            check(n in e.details(), "%r not in %r" % (n, e.details()), d)
        return
    raise AssertionError("wanted %s, the call succeeded" % code)


def rest(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, (json.loads(raw) if raw else None)


def hpt_infer(pb, rows):
    x = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    return pb.ks.ModelInferRequest(
        model_name="hpt", inputs=[pb.ks.ModelInferRequest.InferInputTensor(
            name="x", datatype="FP32", shape=[rows, 1], contents=pb.ks.InferTensorContents(
                fp32_contents=x.ravel().tolist()))])


def stats_of(d, pb, name, version=""):
    r = call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(name=name, version=version),
             pb.ks.ModelStatisticsResponse)
    check(len(r.model_stats) == 1, "one entry for %s: %s" % (name, r), d)
    return r.model_stats[0]


def stats_json(m):
    """gRPC ModelStatistics -> the REST JSON Triton documents."""
    s = m.inference_stats
    dur = {k: {"count": getattr(s, k).count, "ns": getattr(s, k).ns}
           for k in ("success", "fail", "queue", "compute_input", "compute_infer", "compute_output",
                     "cache_hit", "cache_miss")}
    return {"name": m.name, "version": m.version, "last_inference": m.last_inference,
            "inference_count": m.inference_count, "execution_count": m.execution_count,
            "inference_stats": dur, "batch_stats": []}


TRITON_TYPES = {"BOOL": 1, "UINT8": 2, "UINT16": 3, "UINT32": 4, "UINT64": 5, "INT8": 6, "INT16": 7,
                "INT32": 8, "INT64": 9, "FP16": 10, "FP32": 11, "FP64": 12, "BYTES": 13, "BF16": 14}


# ---- 1 + 2: ModelConfig ----------------------------------------------------

def check_config(d, pb, rport, name, policy):
    meta = d.stub.ModelMetadata(pb.ks.ModelMetadataRequest(name=name), timeout=10)
    raw = raw_call(d, "ModelConfig", pb.ks.ModelConfigRequest(name=name))
    cfg = fields(one(fields(raw), 1))  # ModelConfigResponse.config = 1
    check(one(cfg, 1) == name.encode(), "config.name (1) %r" % cfg, d)
    check(one(cfg, 2) == b"tensorflow_savedmodel", "config.platform (2) %r" % cfg, d)
    check(one(cfg, 4, 0) == 0, "config.max_batch_size (4) %r" % cfg, d)
    vp = fields(one(cfg, 3))  # version_policy: latest = 1, all = 2, specific = 3
    if policy == "all":
        check(list(vp) == [2], "version_policy all %r" % vp, d)
    else:
        check(list(vp) == [1] and one(fields(one(vp, 1)), 1) == 1, "version_policy latest 1 %r" % vp, d)
    for num, want in ((5, meta.inputs), (6, meta.outputs)):
        got = [fields(t) for t in cfg.get(num, [])]
        check(len(got) == len(want), "%d tensors in field %d, want %d" % (len(got), num, len(want)), d)
        for g, w in zip(got, want):
            dims_field = 4 if num == 5 else 3  # ModelInput.dims = 4, ModelOutput.dims = 3
            dims = packed_int64(one(g, dims_field, b""))
            check(one(g, 1) == w.name.encode() and one(g, 2) == TRITON_TYPES[w.datatype]
                  and dims == list(w.shape),
                  "tensor %r vs metadata %s/%s/%s" % (g, w.name, w.datatype, list(w.shape)), d)
    check(any(-1 in list(t.shape) for t in meta.inputs), "a dynamic dimension to check", d)
    # the same through the generated classes, and REST's JSON
    mc = call(d, "ModelConfig", pb.ks.ModelConfigRequest(name=name), pb.ks.ModelConfigResponse).config
    code, j = rest(rport, "GET", "/v2/models/%s/config" % name)
    check(code == 200, "REST config %d %s" % (code, j), d)
    check(j["name"] == name and j["platform"] == "tensorflow_savedmodel" and j["max_batch_size"] == 0,
          "REST config %s" % j, d)
    want_in = [{"name": t.name, "data_type": "TYPE_" + ("STRING" if t.datatype == "BYTES" else t.datatype),
                "format": "FORMAT_NONE", "dims": list(t.shape), "is_shape_tensor": False,
                "allow_ragged_batch": False, "optional": False} for t in meta.inputs]
    check(j["input"] == want_in, "REST config inputs %s want %s" % (j["input"], want_in), d)
    check([(o["name"], o["dims"]) for o in j["output"]] == [(t.name, list(t.shape)) for t in meta.outputs],
          "REST config outputs %s" % j["output"], d)
    check(j["version_policy"] == ({"all": {}} if policy == "all" else {"latest": {"num_versions": 1}}),
          "REST version_policy %s" % j["version_policy"], d)
    check(len(mc.input) == len(meta.inputs), "generated classes read the config", d)
    code, j = rest(rport, "GET", "/v2/models/%s/versions/%s/config" % (name, meta.versions[-1]))
    check(code == 200 and j["name"] == name, "REST versioned config %d %s" % (code, j), d)


def wait_models(d, pb, names, timeout=WAIT):
    end = time.monotonic() + timeout
    while not all(d.stub.ModelReady(pb.ks.ModelReadyRequest(name=n), timeout=5).ready for n in names):
        check(time.monotonic() < end and d.proc.poll() is None, "models %s not ready" % names, d)
        time.sleep(0.05)


def main():
    pb = gen_protos()
    tmp = tempfile.mkdtemp(prefix="dcm_triton_")
    empty = os.path.join(tmp, "empty")  # a model whose version comes later
    os.mkdir(empty)
    cfg = os.path.join(tmp, "models.pbtxt")
    with open(cfg, "w") as f:
        f.write('model_config_list {\n'
                ' config { name: "hpt" base_path: "%s" model_platform: "tensorflow" }\n'
                ' config { name: "demo_ct" base_path: "%s" model_platform: "tensorflow" }\n'
                ' config { name: "two" base_path: "%s" model_platform: "tensorflow"\n'
                '          model_version_policy { all {} } }\n'
                ' config { name: "empty" base_path: "%s" model_platform: "tensorflow" }\n}\n'
                % (HPT, DEMO, TWO_VERSIONS, empty))
    rport = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rport,
                "--enable_reload_config_rpc"])
    try:
        wait_models(d, pb, ["hpt", "demo_ct", "two"])
        s = d.stub
        # ---- 6: extensions ----
        ext = list(s.ServerMetadata(pb.ks.ServerMetadataRequest(), timeout=5).extensions)
        for e in ("model_repository", "model_configuration", "statistics"):
            check(e in ext, "gRPC extensions %s lack %s" % (ext, e), d)
        code, j = rest(rport, "GET", "/v2")
        check(code == 200 and set(ext) <= set(j["extensions"]), "REST extensions %s" % j, d)

        # ---- 1 + 2: config ----
        check_config(d, pb, rport, "hpt", "latest")
        check_config(d, pb, rport, "demo_ct", "latest")
        check_config(d, pb, rport, "two", "all")
        expect_code(lambda: raw_call(d, "ModelConfig", pb.ks.ModelConfigRequest(name="nope")),
                    grpc.StatusCode.NOT_FOUND, "nope", d=d)
        code, j = rest(rport, "GET", "/v2/models/nope/config")
        check(code == 404 and "nope" in j["error"], "REST config of unknown %d %s" % (code, j), d)
        code, j = rest(rport, "POST", "/v2/models/hpt/config")
        check(code == 405, "POST config %d" % code, d)

        # ---- 3: statistics ----
        before = stats_of(d, pb, "hpt")
        check(before.name == "hpt" and before.version == "123", "stats entry %s" % before, d)
        t0 = int(time.time() * 1000)
        n_grpc, rows = 5, 0
        for i in range(n_grpc):
            r = d.stub.ModelInfer(hpt_infer(pb, i + 1), timeout=10)
            rows += i + 1
            check(np.allclose(r.outputs[0].contents.fp32_contents,
                              0.5 * np.arange(i + 1, dtype=np.float32) + 2), "hpt answer", d)
        n_rest = 3
        for i in range(n_rest):
            code, j = rest(rport, "POST", "/v2/models/hpt/infer",
                           {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 1], "data": [1, 2]}]})
            check(code == 200, "REST infer %d %s" % (code, j), d)
            rows += 2
        # TF Serving's Predict and Classify count too (rows: first dimension / examples)
        pr = pb.tfs.PredictRequest()
        pr.model_spec.name = "hpt"
        pr.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 3.0, 4.0], [4, 1]))
        d.stub.Predict(pr, timeout=10)
        cr = pb.tfs.ClassificationRequest()
        cr.model_spec.name = "hpt"
        cr.model_spec.signature_name = "classify_x_to_y"
        for v in (1.0, 2.0, 3.0):
            cr.input.example_list.examples.add().features.feature["x"].float_list.value.append(v)
        d.stub.Classify(cr, timeout=10)
        n_rest += 2
        rows += 4 + 3
        # metadata, config and statistics calls are no inferences
        d.stub.ModelMetadata(pb.ks.ModelMetadataRequest(name="hpt"), timeout=10)
        raw_call(d, "ModelConfig", pb.ks.ModelConfigRequest(name="hpt"))
        rest(rport, "GET", "/v2/models/hpt")
        # one failed inference: a datatype the signature does not take
        bad = pb.ks.ModelInferRequest(model_name="hpt", inputs=[pb.ks.ModelInferRequest.InferInputTensor(
            name="x", datatype="INT32", shape=[1, 1], contents=pb.ks.InferTensorContents(int_contents=[1]))])
        expect_code(lambda: d.stub.ModelInfer(bad, timeout=10), grpc.StatusCode.INVALID_ARGUMENT, d=d)
        t1 = int(time.time() * 1000)
        after = stats_of(d, pb, "hpt")
        n = n_grpc + n_rest
        a, b = after.inference_stats, before.inference_stats
        for k in ("success", "compute_input", "compute_infer", "compute_output"):
            check(getattr(a, k).count - getattr(b, k).count == n,
                  "%s.count grew by %d, want %d" % (k, getattr(a, k).count - getattr(b, k).count, n), d)
            check(getattr(a, k).ns > getattr(b, k).ns, "%s.ns grew" % k, d)
        check(a.fail.count - b.fail.count == 1, "fail grew by %d" % (a.fail.count - b.fail.count), d)
        check(after.execution_count - before.execution_count == n, "execution_count %d -> %d" % (
            before.execution_count, after.execution_count), d)
        check(after.inference_count - before.inference_count == rows, "inference_count %d -> %d, want +%d" % (
            before.inference_count, after.inference_count, rows), d)
        check(a.success.ns - b.success.ns >= a.compute_infer.ns - b.compute_infer.ns,
              "whole requests take at least their compute", d)
        check(t0 <= after.last_inference <= t1, "last_inference %d not in [%d, %d]" % (after.last_inference, t0, t1), d)
        check(a.cache_hit.count == 0 and a.cache_miss.count == 0, "no response cache", d)
        # the wire shape: ModelStatisticsResponse.model_stats = 1; ModelStatistics name 1,
        # version 2, last_inference 3, inference_count 4, execution_count 5, inference_stats 6
        # {success 1, fail 2, ... compute_infer 5}; StatisticDuration {count 1, ns 2}
        wire = fields(one(fields(raw_call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(name="hpt"))), 1))
        check(one(wire, 1) == b"hpt" and one(wire, 2) == b"123" and one(wire, 4) == after.inference_count
              and one(wire, 5) == after.execution_count and one(wire, 3) == after.last_inference,
              "ModelStatistics wire %r" % wire, d)
        inf = fields(one(wire, 6))
        check(one(fields(one(inf, 1)), 1) == a.success.count and one(fields(one(inf, 5)), 1) == a.compute_infer.count,
              "InferStatistics wire %r" % inf, d)
        # REST says the same (nothing ran in between)
        code, j = rest(rport, "GET", "/v2/models/hpt/stats")
        check(code == 200 and j == {"model_stats": [stats_json(after)]}, "REST stats %s\nvs %s" % (j, after), d)
        code, j = rest(rport, "GET", "/v2/models/hpt/versions/123/stats")
        check(code == 200 and j["model_stats"][0]["version"] == "123", "REST versioned stats %s" % j, d)
        code, j = rest(rport, "GET", "/v2/models/stats")
        got = sorted((m["name"], m["version"]) for m in j["model_stats"])
        check(code == 200 and got == [("demo_ct", "1"), ("hpt", "123"), ("two", "123"), ("two", "124")],
              "REST all stats %s" % got, d)
        every = call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(), pb.ks.ModelStatisticsResponse)
        check(sorted((m.name, m.version) for m in every.model_stats) == got, "gRPC all stats", d)
        expect_code(lambda: raw_call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(name="nope")),
                    grpc.StatusCode.NOT_FOUND, "nope", d=d)
        expect_code(lambda: raw_call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(name="hpt", version="7")),
                    grpc.StatusCode.NOT_FOUND, "7", d=d)
        code, j = rest(rport, "GET", "/v2/models/nope/stats")
        check(code == 404, "REST stats unknown %d %s" % (code, j), d)

        # ---- 4: repository index ----
        raw = raw_call(d, "RepositoryIndex", pb.ks.RepositoryIndexRequest())
        wire = [fields(m) for m in fields(raw).get(1, [])]  # models = 1 {name 1, version 2, state 3, reason 4}
        idx = sorted((one(m, 1).decode(), one(m, 2, b"").decode(), one(m, 3).decode()) for m in wire)
        ready = [("demo_ct", "1", "READY"), ("hpt", "123", "READY"), ("two", "123", "READY"), ("two", "124", "READY")]
        want = sorted(ready + [("empty", "", "UNAVAILABLE")])
        check(idx == want, "index %s" % idx, d)
        reason = [one(m, 4).decode() for m in wire if one(m, 1) == b"empty"]
        check(reason == ["no version found under the base path yet"], "reason %s" % reason, d)
        code, j = rest(rport, "POST", "/v2/repository/index")
        check(code == 200 and sorted((m["name"], m.get("version", ""), m["state"]) for m in j) == want,
              "REST index %d %s" % (code, j), d)
        code, j2 = rest(rport, "POST", "/v2/repository/index", {"ready": True})
        check(code == 200 and sorted((m["name"], m["version"], m["state"]) for m in j2) == ready,
              "REST index ready %s" % j2, d)
        ix = call(d, "RepositoryIndex", pb.ks.RepositoryIndexRequest(ready=True), pb.ks.RepositoryIndexResponse)
        check(sorted((m.name, m.version, m.state) for m in ix.models) == ready, "gRPC index ready %s" % ix, d)
        code, j = rest(rport, "POST", "/v2/repository/index", {"ready": "yes"})
        check(code == 400, "REST index bad body %d" % code, d)
        # the model without a version: keeps the server unready, cannot load; unloaded, it is
        # no longer waited for
        check(not s.ServerReady(pb.ks.ServerReadyRequest(), timeout=5).ready, "unready with 'empty'", d)
        expect_code(lambda: raw_call(d, "RepositoryModelLoad", pb.ks.RepositoryModelLoadRequest(model_name="empty")),
                    grpc.StatusCode.FAILED_PRECONDITION, "no complete version folder", empty, d=d)
        raw_call(d, "RepositoryModelUnload", pb.ks.RepositoryModelUnloadRequest(model_name="empty"))
        check(s.ServerReady(pb.ks.ServerReadyRequest(), timeout=5).ready, "ready once 'empty' is unloaded", d)
        ix = call(d, "RepositoryIndex", pb.ks.RepositoryIndexRequest(), pb.ks.RepositoryIndexResponse)
        e = [(m.version, m.state, m.reason) for m in ix.models if m.name == "empty"]
        check(e == [("", "UNAVAILABLE", "unloaded")], "index of unloaded 'empty' %s" % e, d)

        # ---- 5: unload / load (gate open, loopback) ----
        raw_call(d, "RepositoryModelUnload", pb.ks.RepositoryModelUnloadRequest(model_name="hpt"))
        check(not s.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "hpt unloaded", d)
        check(s.ServerReady(pb.ks.ServerReadyRequest(), timeout=5).ready, "server stays ready", d)
        check(s.ModelReady(pb.ks.ModelReadyRequest(name="demo_ct"), timeout=5).ready, "demo_ct untouched", d)
        expect_code(lambda: d.stub.ModelInfer(hpt_infer(pb, 1), timeout=10), grpc.StatusCode.NOT_FOUND,
                    "unloaded", d=d)
        expect_code(lambda: raw_call(d, "ModelStatistics", pb.ks.ModelStatisticsRequest(name="hpt")),
                    grpc.StatusCode.NOT_FOUND, d=d)
        ix = call(d, "RepositoryIndex", pb.ks.RepositoryIndexRequest(), pb.ks.RepositoryIndexResponse)
        h = [(m.version, m.state, m.reason) for m in ix.models if m.name == "hpt"]
        check(h == [("123", "UNAVAILABLE", "unloaded")], "index after unload %s" % h, d)
        ix = call(d, "RepositoryIndex", pb.ks.RepositoryIndexRequest(ready=True), pb.ks.RepositoryIndexResponse)
        check("hpt" not in [m.name for m in ix.models], "ready index without hpt", d)
        raw_call(d, "RepositoryModelLoad", pb.ks.RepositoryModelLoadRequest(model_name="hpt"))
        check(s.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "hpt loaded again", d)
        d.stub.ModelInfer(hpt_infer(pb, 1), timeout=10)
        fresh = stats_of(d, pb, "hpt")
        check(fresh.inference_stats.success.count == 1 and fresh.inference_count == 1,
              "statistics start from zero after a load: %s" % fresh, d)
        # REST round trip
        code, j = rest(rport, "POST", "/v2/repository/models/hpt/unload")
        check(code == 200 and j is None, "REST unload %d %s" % (code, j), d)
        check(not s.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "REST unloaded hpt", d)
        code, j = rest(rport, "POST", "/v2/repository/models/hpt/load", {})
        check(code == 200 and j is None, "REST load %d %s" % (code, j), d)
        check(s.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "REST loaded hpt", d)
        # errors
        expect_code(lambda: raw_call(d, "RepositoryModelLoad", pb.ks.RepositoryModelLoadRequest(model_name="nope")),
                    grpc.StatusCode.NOT_FOUND, "nope", "models served", d=d)
        expect_code(lambda: raw_call(d, "RepositoryModelUnload", pb.ks.RepositoryModelUnloadRequest(model_name="nope")),
                    grpc.StatusCode.NOT_FOUND, "nope", d=d)
        code, j = rest(rport, "POST", "/v2/repository/models/nope/load")
        check(code == 404 and "nope" in j["error"], "REST load unknown %d %s" % (code, j), d)
        cfgp = pb.ks.ModelRepositoryParameter(string_param="{}")
        expect_code(lambda: raw_call(d, "RepositoryModelLoad", pb.ks.RepositoryModelLoadRequest(
            model_name="hpt", parameters={"config": cfgp})), grpc.StatusCode.UNIMPLEMENTED, '"config"', d=d)
        code, j = rest(rport, "POST", "/v2/repository/models/hpt/load", {"parameters": {"config": "{}"}})
        check(code == 400 and "config" in j["error"], "REST load with config %d %s" % (code, j), d)
        code, j = rest(rport, "GET", "/v2/repository/models/hpt/load")
        check(code == 405, "GET load %d" % code, d)
        check(s.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "hpt still ready", d)
        # a version folder for 'empty' appears: while unloaded nothing loads it; a load does
        shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(empty, "5"))
        os.utime(os.path.join(empty, "5", "saved_model.pb"), (time.time() - 10, time.time() - 10))
        time.sleep(1.5)  # the poll (1 s) passes and leaves it alone
        check(not s.ModelReady(pb.ks.ModelReadyRequest(name="empty"), timeout=5).ready, "unloaded stays out", d)
        code, j = rest(rport, "POST", "/v2/repository/models/empty/load")
        check(code == 200, "REST load of 'empty' %d %s" % (code, j), d)
        check(s.ModelReady(pb.ks.ModelReadyRequest(name="empty", version="5"), timeout=5).ready, "empty v5", d)
        check(d.stop() == 0, "clean exit", d)
    finally:
        d.close()

    # ---- 5: gate closed; 7: batching ----
    rport = free_port()
    bp = os.path.join(tmp, "batching.pbtxt")
    with open(bp, "w") as f:
        f.write("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 50000 }\n"
                "num_batch_threads { value: 1 }\n")
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rport, "--enable_batching",
                "--batching_parameters_file=" + bp])
    try:
        d.wait_health(1)
        for method, req in (("RepositoryModelUnload", pb.ks.RepositoryModelUnloadRequest(model_name="hpt")),
                            ("RepositoryModelLoad", pb.ks.RepositoryModelLoadRequest(model_name="hpt"))):
            expect_code(lambda: raw_call(d, method, req), grpc.StatusCode.PERMISSION_DENIED, method,
                        "--enable_reload_config_rpc", d=d)
        code, j = rest(rport, "POST", "/v2/repository/models/hpt/unload")
        check(code == 403 and "--enable_reload_config_rpc" in j["error"], "REST gate %d %s" % (code, j), d)
        check(d.stub.ModelReady(pb.ks.ModelReadyRequest(name="hpt"), timeout=5).ready, "hpt kept serving", d)
        # what needs no gate still answers
        code, j = rest(rport, "POST", "/v2/repository/index")
        check(code == 200 and len(j) == 5, "index without the gate %s" % j, d)
        before = stats_of(d, pb, "hpt")
        n, errors = 8, []

        def one_call():
            try:
                d.stub.ModelInfer(hpt_infer(pb, 1), timeout=30)
            except grpc.RpcError as e:
                errors.append(e)
        threads = [threading.Thread(target=one_call) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(not errors, "batched calls failed: %s" % errors, d)
        after = stats_of(d, pb, "hpt")
        ex = after.execution_count - before.execution_count
        check(after.inference_stats.success.count - before.inference_stats.success.count == n
              and after.inference_count - before.inference_count == n,
              "batched success / inference_count %s -> %s" % (before, after), d)
        check(1 <= ex <= n, "execution_count grew by %d for %d calls" % (ex, n), d)
        print("batching: %d calls ran in %d graph runs" % (n, ex), flush=True)
        check(d.stop() == 0, "clean exit", d)
    finally:
        d.close()
    shutil.rmtree(tmp)
    print("it_triton_api: OK")


if __name__ == "__main__":
    main()
