#!/usr/bin/python3
"""it_onnx_serve: a version folder holding model.onnx (Triton's layout) served directly.

Builds small ONNX models with onnx's Python helper (random weights, fixed
seed) into <base>/<version>/model.onnx and checks, against a numpy
implementation of the same graph written here:
1. `dcmserve show`, `check` and `run` read the folder (and its base folder)
   as they read a SavedModel: signature serving_default keyed by the graph's
   input and output names.
2. The daemon serves it: TF Serving Predict over gRPC and REST, KServe v2
   ModelInfer over gRPC and REST, GetModelMetadata; batch 1 and 3.
3. External data: the same model with its weights in weights.bin beside
   model.onnx serves the same answers; weights.bin as a link to a file outside
   the version folder is refused (the ms_file rule: nothing outside the
   folder is read).
4. A model the importer cannot take fails to load with one message listing
   every unsupported node (three ops, four nodes), in the daemon's model
   status and in `dcmserve check`.
5. A folder holding both saved_model.pb and model.onnx serves the SavedModel
   and logs that model.onnx is ignored (docs/serving.md).
6. Hot reload: version 2 (model.onnx with other weights) written while the
   daemon runs replaces version 1; a version that failed is retried when the
   external data file beside model.onnx changes; a base folder that is itself
   a model.onnx folder is named as such.
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, free_port, gen_protos, run_in_tmpdir  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
FAILS = []
POLL = 1  # --file_system_poll_wait_seconds


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def cli(*args):
    return subprocess.run([DCMSERVE] + list(args), capture_output=True, text=True, timeout=300)


# ---- the model: Conv 3x3 -> Relu -> GlobalAveragePool -> Flatten -> Gemm,
# outputs "logits" and "probs" (Softmax); dynamic batch ----

def weights(seed):
    rng = np.random.default_rng(seed)
    return {"conv_w": rng.standard_normal((4, 1, 3, 3)).astype(np.float32),
            "conv_b": rng.standard_normal(4).astype(np.float32) * 0.1,
            "fc_w": rng.standard_normal((3, 4)).astype(np.float32),
            "fc_b": rng.standard_normal(3).astype(np.float32)}


def make_model(w, opset=18):
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["c"], name="conv",
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    g = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="it_onnx_serve")
    onnx.checker.check_model(m)
    return m


def reference(w, x):
    """numpy: the same graph, written out independently of the importer."""
    n = x.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # N,1,8,8,3,3
    c = np.einsum("nchwij,ocij->nohw", win, w["conv_w"]) + w["conv_b"][None, :, None, None]
    p = np.maximum(c, 0).mean(axis=(2, 3)).reshape(n, 4)
    logits = p @ w["fc_w"].T + w["fc_b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, e / e.sum(axis=1, keepdims=True)


def save(m, folder, external=False):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    if external:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="weights.bin", size_threshold=0)
    else:
        onnx.save_model(m, path)
    return path


def refused_model():
    """Three ops the importer cannot take, on four nodes (one unnamed), among
    supported ones."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok_relu"),
        helper.make_node("NoSuchOp", ["a"], ["b"], name="bad_first"),
        helper.make_node("FusedThing", ["b"], ["c"], name="vendor_op", domain="com.example"),
        helper.make_node("NoSuchOp", ["c"], ["d"], name="bad_second"),
        helper.make_node("AlsoNotAnOp", ["d"], ["y"]),  # no name: listed by index
    ]
    g = helper.make_graph(nodes, "bad", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18),
                                               helper.make_opsetid("com.example", 1)])


# ---- talking to the daemon ----

def rest(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def status(d, name):
    pb = gen_protos()
    try:
        st = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(
            model_spec=pb.tfs.ModelSpec(name=name)), timeout=5)
    except Exception as e:  # noqa: BLE001 - not known yet
        return {"error": str(e)}
    return {s.version: s for s in st.model_version_status}


def wait_version(d, name, version, want_state, timeout=60):
    """Waits until version `version` of `name` reaches want_state (a
    ModelVersionStatus.State); returns its status."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        last = status(d, name)
        v = last.get(version)
        if v is not None and v.state == want_state:
            return v
        if d.proc.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("%s version %d never reached state %d: %s\n%s"
                         % (name, version, want_state, last, d.log_tail()))


def predict_grpc(d, name, x, version=None):
    pb = gen_protos()
    r = pb.tfs.PredictRequest()
    r.model_spec.name = name
    if version is not None:
        r.model_spec.version.value = version
    t = r.inputs["image"]
    t.dtype = pb.fw.DT_FLOAT
    for s in x.shape:
        t.tensor_shape.dim.add(size=s)
    t.tensor_content = x.astype("<f4").tobytes()
    resp = d.stub.Predict(r, timeout=30)
    out = {}
    for k, tp in resp.outputs.items():
        shape = [dd.size for dd in tp.tensor_shape.dim]
        vals = (np.frombuffer(tp.tensor_content, "<f4") if tp.tensor_content
                else np.array(tp.float_val, np.float32))
        out[k] = vals.reshape(shape)
    return out, resp.model_spec.version.value


def close(got, want):
    return got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-4,
                                                                       atol=1e-5)


def check_serves(d, rest_port, name, w, what):
    rng = np.random.default_rng(7)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 1, 8, 8)).astype(np.float32)
        logits, probs = reference(w, x)
        out, _ = predict_grpc(d, name, x)
        check(set(out) == {"logits", "probs"}, "%s gRPC Predict batch %d: output keys %s"
              % (what, batch, sorted(out)))
        check(close(out.get("logits"), logits) and close(out.get("probs"), probs),
              "%s gRPC Predict batch %d matches numpy" % (what, batch))
        code, r = rest(rest_port, "POST", "/v1/models/%s:predict" % name,
                       {"inputs": {"image": x.tolist()}})
        ok = code == 200 and "outputs" in r
        check(ok and close(np.array(r["outputs"].get("logits"), np.float32), logits) and
              close(np.array(r["outputs"].get("probs"), np.float32), probs),
              "%s REST :predict batch %d (%d)" % (what, batch, code))
        code, r = rest(rest_port, "POST", "/v1/models/%s:predict" % name,
                       {"instances": [{"image": xi.tolist()} for xi in x]})
        ok = code == 200 and "predictions" in r
        got = np.array([p["probs"] for p in r["predictions"]], np.float32) if ok else None
        check(close(got, probs), "%s REST :predict instances batch %d (%d)" % (what, batch, code))
        # KServe v2
        pb = gen_protos()
        req = pb.ks.ModelInferRequest(model_name=name)
        t = req.inputs.add(name="image", datatype="FP32", shape=list(x.shape))
        t.contents.fp32_contents.extend(x.ravel().tolist())
        resp = d.stub.ModelInfer(req, timeout=30)
        got = {o.name: np.array(o.contents.fp32_contents, np.float32).reshape(list(o.shape))
               for o in resp.outputs}
        check(close(got.get("logits"), logits) and close(got.get("probs"), probs),
              "%s KServe ModelInfer batch %d" % (what, batch))
        code, r = rest(rest_port, "POST", "/v2/models/%s/infer" % name,
                       {"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                                    "data": x.ravel().tolist()}]})
        got = {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"])
               for o in r.get("outputs", [])} if code == 200 else {}
        check(close(got.get("logits"), logits) and close(got.get("probs"), probs),
              "%s REST /v2/models/%s/infer batch %d (%d)" % (what, name, batch, code))


def main():
    return run_in_tmpdir("it_onnx_serve_", run_all, FAILS)


def run_all(tmp):
    w1, w2 = weights(1), weights(2)
    cnn = os.path.join(tmp, "cnn")
    save(make_model(w1), os.path.join(cnn, "1"))
    ext = os.path.join(tmp, "ext")
    save(make_model(w1), os.path.join(ext, "1"), external=True)
    check(os.path.exists(os.path.join(ext, "1", "weights.bin")) and
          os.path.getsize(os.path.join(ext, "1", "model.onnx")) < 1000,
          "the external-data model keeps its weights in weights.bin")
    bad = os.path.join(tmp, "bad")
    save(refused_model(), os.path.join(bad, "1"))
    # a graph with no inputs (legal ONNX): a signature without inputs
    noin = os.path.join(tmp, "noin")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    g = helper.make_graph([helper.make_node("Constant", [], ["y"], value=helper.make_tensor(
        "c", TensorProto.FLOAT, [3], [1.5, -2.0, 4.0]))], "noin", [], [y])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]),
         os.path.join(noin, "1"))
    both = os.path.join(tmp, "both")
    shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(both, "1"))
    save(make_model(w1), os.path.join(both, "1"))
    # weights.bin a link to a file outside the version folder
    leak = os.path.join(tmp, "leak")
    save(make_model(w1), os.path.join(leak, "1"), external=True)
    outside = os.path.join(tmp, "outside.bin")
    shutil.move(os.path.join(leak, "1", "weights.bin"), outside)
    os.symlink(outside, os.path.join(leak, "1", "weights.bin"))

    # ---- 1. show / check / run ----
    for d in (cnn, os.path.join(cnn, "1")):
        r = cli("show", "--dir", d, "--tag_set", "serve", "--signature_def", "serving_default")
        check(r.returncode == 0 and "inputs['image']" in r.stdout and
              "outputs['logits']" in r.stdout and "outputs['probs']" in r.stdout and
              "shape: (-1, 1, 8, 8)" in r.stdout,
              "show --dir %s: serving_default by the graph's names\n%s%s"
              % (os.path.relpath(d, tmp), r.stdout, r.stderr))
    r = cli("check", cnn)
    check(r.returncode == 0 and "verdict: serves" in r.stdout and
          "format: model.onnx, converted at load" in r.stdout,
          "check cnn serves\n" + r.stdout + r.stderr)
    r = cli("check", cnn, "--json")
    try:
        j = json.loads(r.stdout)
    except ValueError:
        j = {}
    check(j.get("format") == "onnx" and j.get("serves") is True, "check --json: %s" % r.stdout)
    x = np.random.default_rng(3).standard_normal((2, 1, 8, 8)).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    outdir = os.path.join(tmp, "out")
    for base in (cnn, ext):
        r = cli("run", "--dir", base, "--inputs", "image=" + os.path.join(tmp, "x.npy"),
                "--outdir", outdir, "--overwrite")
        logits, probs = reference(w1, x)
        got = [np.load(os.path.join(outdir, k + ".npy")) if r.returncode == 0 else None
               for k in ("logits", "probs")]
        check(r.returncode == 0 and close(got[0], logits) and close(got[1], probs),
              "run --dir %s matches numpy\n%s" % (os.path.basename(base), r.stderr))
    # Output names with '/' (common in exported graphs) are subfolders of --outdir, as
    # saved_model_cli joins them; one that would leave --outdir is refused before the run.
    for outs, ok in ((["scores/raw", "scores/sub/copy"], True), (["../escaped"], False)):
        vdir = os.path.join(tmp, "slash_%d" % ok, "1")
        os.makedirs(vdir)
        g = helper.make_graph([helper.make_node("Identity", ["x"], [o]) for o in outs], "slash",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2])
                               for o in outs])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]),
                  os.path.join(vdir, "model.onnx"))
        np.save(os.path.join(tmp, "v.npy"), np.array([1.5, -2.0], np.float32))
        sub = os.path.join(tmp, "slash_out_%d" % ok, "o")
        r = cli("run", "--dir", vdir, "--inputs", "x=" + os.path.join(tmp, "v.npy"),
                "--outdir", sub)
        if ok:
            got = [np.load(os.path.join(sub, o + ".npy")) if r.returncode == 0 else None
                   for o in outs]
            check(r.returncode == 0 and all(close(v, np.array([1.5, -2.0], np.float32)) for v in got),
                  "run --outdir with output keys holding '/': DIR/scores/raw.npy ...\n" + r.stderr)
        else:
            check(r.returncode == 1 and '"../escaped" names no file below --outdir' in r.stderr
                  and not os.path.exists(os.path.join(tmp, "slash_out_0", "escaped.npy")),
                  "run --outdir refuses an output key with '..' before running\n" + r.stderr)
    r = cli("check", bad)
    msg = r.stdout + r.stderr
    check(r.returncode == 1 and all(s in msg for s in (
        "NoSuchOp 'bad_first', 'bad_second'", "com.example.FusedThing 'vendor_op'",
        "AlsoNotAnOp #4", "4 nodes")),
        "check lists every unsupported node at once\n" + msg)
    r = cli("check", leak)
    msg = r.stdout + r.stderr
    check(r.returncode == 1 and "weights.bin" in msg and "outside" in msg,
          "external data through a link leaving the folder is refused\n" + msg)
    r = cli("benchmark", "--dir", cnn, "--iterations", "3", "--warmup", "1", "--batch", "2",
            "--json")
    ok = r.returncode == 0
    try:
        ok = ok and json.loads(r.stdout.strip().splitlines()[-1])["median_ms"] > 0
    except (ValueError, KeyError, IndexError):
        ok = False
    check(ok, "benchmark --dir cnn\n" + r.stdout + r.stderr)

    # a base folder that is itself an ONNX model folder
    r = cli("serve", "--check_config", "--model_name=m",
            "--model_base_path=" + os.path.join(cnn, "1"))
    check(r.returncode != 0 and "is itself an ONNX model (model.onnx)" in r.stderr,
          "serve names a base path that is itself a model.onnx folder\n" + r.stderr)

    # ---- 2-6. the daemon ----
    cfg = os.path.join(tmp, "models.pbtxt")
    with open(cfg, "w") as f:
        f.write("model_config_list {\n")
        for name, base in (("cnn", cnn), ("ext", ext), ("bad", bad), ("both", both),
                           ("leak", leak), ("noin", noin)):
            f.write('  config { name: "%s" base_path: "%s" }\n' % (name, base))
        f.write("}\n")
    rest_port = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest_port,
                "--file_system_poll_wait_seconds=%d" % POLL])
    try:
        pb = gen_protos()
        AVAIL, END = pb.tfs.ModelVersionStatus.AVAILABLE, pb.tfs.ModelVersionStatus.END
        for name in ("cnn", "ext", "both"):
            wait_version(d, name, 1, AVAIL)
        check_serves(d, rest_port, "cnn", w1, "cnn")
        check_serves(d, rest_port, "ext", w1, "ext (external data)")

        # the load generator against the served model.onnx (Predict, then KServe)
        bench = os.path.join(os.environ.get("DCM_BIN", os.path.dirname(DCMSERVE)),
                             "dcmserve-bench")
        xb = os.path.join(tmp, "bench_x.npy")
        np.save(xb, np.random.default_rng(4).standard_normal((2, 1, 8, 8)).astype(np.float32))
        for api in ("predict", "infer"):
            p = subprocess.run([bench, "--target=127.0.0.1:%d" % d.port, "--model=cnn",
                                "--api=" + api, "--input=image", "--npy=" + xb,
                                "--duration=0.5", "--warmup=0.1", "--json"],
                               capture_output=True, text=True, timeout=60)
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {}
            check(p.returncode == 0 and r.get("calls", 0) > 0 and r.get("ok") == r.get("calls"),
                  "dcmserve-bench --api=%s on cnn: %s %s" % (api, r, p.stderr[-300:]))

        mr = pb.tfs.GetModelMetadataRequest(metadata_field=["signature_def"])
        mr.model_spec.name = "cnn"
        sdm = pb.tfs.SignatureDefMap.FromString(
            d.stub.GetModelMetadata(mr, timeout=10).metadata["signature_def"].value)
        sd = sdm.signature_def["serving_default"]
        check(list(sd.inputs) == ["image"] and sorted(sd.outputs) == ["logits", "probs"],
              "GetModelMetadata: serving_default keyed by the graph's names")
        code, r = rest(rest_port, "GET", "/v2/models/cnn")
        check(code == 200 and [i["name"] for i in r.get("inputs", [])] == ["image"] and
              r["inputs"][0].get("shape") == [-1, 1, 8, 8] and
              r.get("platform") == "onnxruntime_onnx",
              "KServe v2 model metadata (platform onnxruntime_onnx, as Triton names an ONNX "
              "model) %d %s" % (code, r))
        code, r = rest(rest_port, "GET", "/v2/models/cnn/config")
        check(code == 200 and r.get("platform") == "onnxruntime_onnx",
              "Triton model config: platform onnxruntime_onnx %d %s" % (code, r))

        wait_version(d, "noin", 1, AVAIL)
        r = pb.tfs.PredictRequest()
        r.model_spec.name = "noin"
        resp = d.stub.Predict(r, timeout=30)
        check(list(resp.outputs["y"].float_val) == [1.5, -2.0, 4.0],
              "noin: a graph without inputs serves its constant: %s" % resp.outputs["y"])
        code, r = rest(rest_port, "POST", "/v1/models/noin:predict", {"inputs": {}})
        check(code == 200 and r.get("outputs") == [1.5, -2.0, 4.0],
              "noin: REST :predict with no inputs (%d) %s" % (code, r))

        v = wait_version(d, "bad", 1, END)
        m = v.status.error_message
        check(v.status.error_code != 0 and all(s in m for s in (
            "NoSuchOp 'bad_first', 'bad_second'", "com.example.FusedThing 'vendor_op'",
            "AlsoNotAnOp #4")), "bad: the load error lists every unsupported node: " + m)
        v = wait_version(d, "leak", 1, END)
        check(v.status.error_code != 0 and "outside" in v.status.error_message,
              "leak: refused: " + v.status.error_message)

        # both: the SavedModel (half_plus_two: y = 0.5 x + 2) is what serves
        r = pb.tfs.PredictRequest()
        r.model_spec.name = "both"
        t = r.inputs["x"]
        t.dtype = pb.fw.DT_FLOAT
        t.tensor_shape.dim.add(size=2)
        t.tensor_shape.dim.add(size=1)
        t.float_val.extend([1.0, 4.0])
        resp = d.stub.Predict(r, timeout=30)
        check(list(resp.outputs["y"].float_val) == [2.5, 4.0],
              "both: saved_model.pb wins over model.onnx: %s" % resp.outputs["y"])
        check("holds both saved_model.pb and model.onnx; reading saved_model.pb" in d.log(),
              "both: the ignored model.onnx is logged")

        # hot reload: version 2 of cnn, written as a tool would (temp name, rename)
        stage = os.path.join(tmp, "stage2")
        save(make_model(w2), stage)
        os.rename(stage, os.path.join(cnn, "2"))
        wait_version(d, "cnn", 2, AVAIL)
        wait_version(d, "cnn", 1, END)
        x = np.random.default_rng(9).standard_normal((2, 1, 8, 8)).astype(np.float32)
        out, ver = predict_grpc(d, "cnn", x)
        check(ver == 2 and close(out.get("probs"), reference(w2, x)[1]),
              "cnn version 2 serves its own weights after the reload (version %d)" % ver)
        # a failed version is retried when a file beside model.onnx changes:
        # the link to outside replaced by the weights themselves
        wb = os.path.join(leak, "1", "weights.bin")
        shutil.copyfile(outside, wb + ".tmp")
        os.rename(wb + ".tmp", wb)
        wait_version(d, "leak", 1, AVAIL)
        out, _ = predict_grpc(d, "leak", x)
        check(close(out.get("probs"), reference(w1, x)[1]),
              "leak: loads and serves once weights.bin is a file in the folder")
        check(d.proc.poll() is None, "daemon still running")
    finally:
        d.stop()
        d.close()


if __name__ == "__main__":
    sys.exit(main())
