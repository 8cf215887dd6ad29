"""it_serve_rest_v2: KServe v2 / Open Inference Protocol over HTTP on
--rest_api_port, the request log and the log format, against the real daemon
on 127.0.0.1 with Python's http.client.

1. GET /v2 and GET /v2/models/{m}[/versions/{v}] equal gRPC's ServerMetadata /
   ModelMetadata answers.
2. POST .../infer in JSON (flat and nested data, id echoed, output filter) on
   half_plus_two: y = 0.5 x + 2 computed here with numpy; the same with the
   binary tensor data extension (input and output binary, mixed); the DICOM
   demo model with the file as binary BYTES and as base64 JSON, each equal to
   gRPC ModelInfer's answer for the same file.
3. Errors: malformed JSON 400, unknown datatype 400 listing the KServe names,
   wrong datatype 400 in KServe names (no DT_...), value count 400, integer
   check, binary framing 400s, unknown model 404 listing the models, body over
   --max_message_bytes 413; the daemon keeps serving.
4. --request_log=all with --log_format=json: every stderr line is one JSON
   object; exactly one "request" line per request (gRPC and REST) with the
   fields; a model name carrying a newline and an ANSI escape (over gRPC and
   in a REST URL) cannot start a line of its own or reach the terminal raw.
5. /metrics: the KServe counters (REST and gRPC), the phase histograms and
   the model load counter move / exist, parsed by prometheus_client.
"""
import base64
import http.client
import json
import os
import struct
import sys
import time
import urllib.parse

import numpy as np
import pydicom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_serve_rest import DEMO, free_port, metrics, sample  # noqa: E402
from serve_client import WAIT, HPT, Daemon, check, gen_protos  # noqa: E402

CT = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files", "CT_small.dcm")


def post(port, path, body, headers=None):
    """(status, headers, raw body) of one POST."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    c.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    h = dict(r.getheaders())
    c.close()
    return r.status, h, data


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def infer(port, path, body):
    code, _, data = post(port, path, body)
    return code, json.loads(data)


def binary_body(header, blobs):
    hdr = json.dumps(header).encode()
    return hdr + b"".join(blobs), {"Inference-Header-Content-Length": str(len(hdr)),
                                   "Content-Type": "application/octet-stream"}


def split_binary(h, data):
    n = int(h["Inference-Header-Content-Length"])
    return json.loads(data[:n]), data[n:]


def request_lines(d):
    out = []
    for line in d.log().splitlines():
        obj = json.loads(line)  # every line must be JSON
        if obj.get("msg") == "request":
            out.append(obj)
    return out


def wait_lines(d, n, timeout=WAIT):
    """The request lines once there are at least n (log lines follow the reply)."""
    end = time.monotonic() + timeout
    while True:
        lines = request_lines(d)
        if len(lines) >= n or time.monotonic() > end:
            return lines
        time.sleep(0.02)


def grpc_meta_json(pb, resp):
    return {"name": resp.name, "versions": list(resp.versions), "platform": resp.platform,
            "inputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in resp.inputs],
            "outputs": [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in resp.outputs]}


def grpc_outputs(resp):
    """name -> float32 array from a ModelInferResponse (raw contents)."""
    out = {}
    for i, o in enumerate(resp.outputs):
        assert o.datatype == "FP32", o.datatype
        out[o.name] = np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(list(o.shape))
    return out


def main():
    pb = gen_protos()
    cfg = os.path.join(os.environ.get("TMPDIR", "/tmp"), "dcm_v2_%d.pbtxt" % os.getpid())
    with open(cfg, "w") as f:
        f.write('model_config_list { config { name: "hpt" base_path: "%s" model_platform: "tensorflow" } '
                'config { name: "demo_ct" base_path: "%s" model_platform: "tensorflow" } }\n' % (HPT, DEMO))
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest, "--max_message_bytes=1000000",
                "--request_log=all", "--log_format=json"])
    try:
        d.wait_health(1)
        x = np.array([[1.0], [2.0], [5.0]], dtype=np.float32)
        want = 0.5 * x + 2.0

        # 1. Metadata, against gRPC's answers.
        code, r = get(rest, "/v2")
        g = d.stub.ServerMetadata(pb.ks.ServerMetadataRequest(), timeout=10)
        check(code == 200 and r["name"] == g.name and r["version"] == g.version
              and "binary_tensor_data" in r["extensions"], "/v2 %d %s" % (code, r), d)
        for path, ver in (("/v2/models/hpt", ""), ("/v2/models/hpt/versions/123", "123"),
                          ("/v2/models/demo_ct", "")):
            code, r = get(rest, path)
            name = path.split("/")[3]
            g = d.stub.ModelMetadata(pb.ks.ModelMetadataRequest(name=name, version=ver), timeout=10)
            check(code == 200 and r == grpc_meta_json(pb, g), "%s: %d %s vs %s" % (path, code, r, g), d)

        # 2. JSON infer: flat and nested data, id echoed.
        for data in (x.ravel().tolist(), x.tolist()):
            code, r = infer(rest, "/v2/models/hpt/infer",
                            {"id": "r1", "inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32", "data": data}]})
            check(code == 200 and r["id"] == "r1" and r["model_name"] == "hpt" and r["model_version"] == "123",
                  "infer header %d %s" % (code, r), d)
            y = r["outputs"][0]
            check(y["name"] == "y" and y["datatype"] == "FP32" and y["shape"] == [3, 1]
                  and np.allclose(np.array(y["data"]).reshape(3, 1), want), "infer y %s" % r, d)
        code, r = infer(rest, "/v2/models/hpt/versions/123/infer",
                        {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [4]}],
                         "outputs": [{"name": "y"}], "parameters": {"signature_name": "serving_default"}})
        check(code == 200 and r["outputs"][0]["data"] == [4.0], "versioned infer %d %s" % (code, r), d)

        # Binary in, binary out; binary in, JSON out; JSON in, binary out.
        body, hdrs = binary_body({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32",
                                              "parameters": {"binary_data_size": 12}}],
                                  "outputs": [{"name": "y", "parameters": {"binary_data": True}}]},
                                 [x.astype("<f4").tobytes()])
        code, h, data = post(rest, "/v2/models/hpt/infer", body, hdrs)
        check(code == 200 and "Inference-Header-Content-Length" in h, "binary infer %d %s %r" % (code, h, data[:200]), d)
        head, blob = split_binary(h, data)
        y = head["outputs"][0]
        check(y["parameters"]["binary_data_size"] == 12 and "data" not in y and len(blob) == 12
              and np.allclose(np.frombuffer(blob, "<f4").reshape(3, 1), want), "binary y %s %r" % (head, blob), d)
        body, hdrs = binary_body({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32",
                                              "parameters": {"binary_data_size": 12}}]},
                                 [x.astype("<f4").tobytes()])
        code, h, data = post(rest, "/v2/models/hpt/infer", body, hdrs)
        r = json.loads(data)
        check(code == 200 and "Inference-Header-Content-Length" not in h
              and np.allclose(np.array(r["outputs"][0]["data"]).reshape(3, 1), want), "binary in, JSON out %s" % r, d)
        code, h, data = post(rest, "/v2/models/hpt/infer",
                             {"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32", "data": x.ravel().tolist()}],
                              "parameters": {"binary_data_output": True}})
        head, blob = split_binary(h, data)
        check(code == 200 and np.allclose(np.frombuffer(blob, "<f4").reshape(3, 1), want),
              "binary_data_output %s" % head, d)

        # An empty batch, binary out: a zero-length output has no data to copy (found by
        # fuzz_rest_predict under UBSan: memcpy from a null pointer; the ASan build's daemon stops).
        code, h, data = post(rest, "/v2/models/hpt/infer",
                             {"inputs": [{"name": "x", "shape": [0, 1], "datatype": "FP32", "data": []}],
                              "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
        check(code == 200, "empty batch, binary out %d %r" % (code, data[:200]), d)
        head, blob = split_binary(h, data)
        check(head["outputs"][0]["parameters"]["binary_data_size"] == 0 and blob == b"",
              "empty batch, binary out %s %r" % (head, blob), d)

        # DICOM bytes: binary BYTES (4-byte length + file) and base64 JSON, vs gRPC.
        with open(CT, "rb") as f:
            blob = f.read()
        ma = metrics(rest)
        raw = struct.pack("<I", len(blob)) + blob
        g = pb.ks.ModelInferRequest(model_name="demo_ct")
        g.inputs.add(name="dicom", datatype="BYTES", shape=[1])
        g.raw_input_contents.append(raw)
        gref = grpc_outputs(d.stub.ModelInfer(g, timeout=30))
        body, hdrs = binary_body({"inputs": [{"name": "dicom", "shape": [1], "datatype": "BYTES",
                                              "parameters": {"binary_data_size": len(raw)}}]}, [raw])
        code, h, data = post(rest, "/v2/models/demo_ct/infer", body, hdrs)
        r = json.loads(data)
        check(code == 200, "DICOM binary %d %s" % (code, r), d)
        got = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in r["outputs"]}
        check(sorted(got) == sorted(gref) and all(np.array_equal(got[k], gref[k]) for k in gref),
              "DICOM REST %s gRPC %s" % (got, gref), d)
        code, r = infer(rest, "/v2/models/demo_ct/infer",
                        {"inputs": [{"name": "dicom", "shape": [1], "datatype": "BYTES",
                                     "parameters": {"content_type": "base64"},
                                     "data": [base64.b64encode(blob).decode()]}]})
        got = {o["name"]: np.array(o["data"], dtype=np.float32).reshape(o["shape"]) for o in r["outputs"]}
        check(code == 200 and all(np.array_equal(got[k], gref[k]) for k in gref), "DICOM base64 %s" % r, d)
        junk = b"\x89PNG\r\n\x1a\n" + b"\0" * 200
        code, r = infer(rest, "/v2/models/demo_ct/infer",
                        {"inputs": [{"name": "dicom", "shape": [1], "datatype": "BYTES",
                                     "parameters": {"content_type": "base64"},
                                     "data": [base64.b64encode(junk).decode()]}]})
        check(code == 400 and "DICOM" in r["error"], "not DICOM %d %s" % (code, r), d)
        mb = metrics(rest)
        frames = pydicom.dcmread(CT).get("NumberOfFrames", 1)
        for name, delta in (("dcmserve_dicom_files_total", 4), ("dcmserve_dicom_bytes_total", 3 * len(blob) + len(junk)),
                            ("dcmserve_dicom_frames_total", 3 * int(frames))):
            check(sample(mb, name) - sample(ma, name) == delta, "%s moved by %s, want %d"
                  % (name, sample(mb, name) - sample(ma, name), delta), d)
        check(sample(mb, "dcmserve_dicom_decode_errors_total", reason="invalid")
              - sample(ma, "dcmserve_dicom_decode_errors_total", reason="invalid") == 1, "decode error counted", d)

        # 3. Errors.
        xin = {"name": "x", "shape": [3, 1], "datatype": "FP32", "data": [1, 2, 5]}
        xbin = {"name": "x", "shape": [3, 1], "datatype": "FP32", "parameters": {"binary_data_size": 12}}
        cases = [
            (b'{"inputs": [', 400, "JSON"),
            ({"inputs": [dict(xin, datatype="FLOAT")]}, 400, "FP32, FP64"),
            ({"inputs": [dict(xin, datatype="FP64")]}, 400, "FP32"),
            ({"inputs": [dict(xin, data=[1, 2])]}, 400, "3 values"),
            ({"inputs": [dict(xin, datatype="INT32", data=[1, 2.5, 3])]}, 400, "not an integer"),
            ({"inputs": [xbin]}, 400, "Inference-Header-Content-Length"),
            ({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]}, 400, "shape"),
            # 2^40 x 2^40 overflowed int64 (found by fuzz_rest_predict under UBSan; the
            # product wrapped to 0 and the request went on to the data check)
            ({"inputs": [dict(xin, shape=[2 ** 40, 2 ** 40])]}, 400, "shape too large"),
            ({"nothing": 1}, 400, "inputs"),
        ]
        for body, want_code, text in cases:
            code, _, data = post(rest, "/v2/models/hpt/infer", body)
            r = json.loads(data)
            check(code == want_code and text in r["error"] and "DT_" not in r["error"],
                  "%s: %d %s" % (body, code, r), d)
        body, hdrs = binary_body({"inputs": [xbin]},
                                 [b"\0" * 8])
        code, _, data = post(rest, "/v2/models/hpt/infer", body, hdrs)
        check(code == 400 and "binary_data_size" in json.loads(data)["error"], "short binary %d %s" % (code, data), d)
        body, hdrs = binary_body({"inputs": [xbin]},
                                 [b"\0" * 16])
        code, _, data = post(rest, "/v2/models/hpt/infer", body, hdrs)
        check(code == 400 and "not claimed" in json.loads(data)["error"], "extra binary %d %s" % (code, data), d)
        code, _, data = post(rest, "/v2/models/hpt/infer", b"{}", {"Inference-Header-Content-Length": "99"})
        check(code == 400 and "Inference-Header-Content-Length" in json.loads(data)["error"],
              "header past the body %d %s" % (code, data), d)
        code, _, data = post(rest, "/v2/models/nope/infer", {"inputs": [xin]})
        check(code == 404 and "hpt" in json.loads(data)["error"] and "demo_ct" in json.loads(data)["error"],
              "unknown model %d %s" % (code, data), d)
        code, r = get(rest, "/v2/models/nope")
        check(code == 404 and "hpt" in r["error"], "unknown model metadata %d %s" % (code, r), d)
        big = {"inputs": [{"name": "x", "shape": [300000, 1], "datatype": "FP32", "data": [1.0] * 300000}]}
        code, _, data = post(rest, "/v2/models/hpt/infer", big)
        check(code == 413 and "1000000" in json.loads(data)["error"], "oversize %d %s" % (code, data[:200]), d)
        code, r = infer(rest, "/v2/models/hpt/infer", {"inputs": [xin]})
        check(code == 200, "still serving %d %s" % (code, r), d)

        # 4. The request log: one JSON line per request, client strings escaped.
        n0 = len(wait_lines(d, 0))
        evil = "evil\n2026-01-01T00:00:00.000Z INFO  forged\x1b[31mred"
        code, _ = get(rest, "/v2/models/%s" % urllib.parse.quote(evil))
        check(code == 404, "evil REST %d" % code, d)
        try:
            d.stub.ModelInfer(pb.ks.ModelInferRequest(model_name=evil), timeout=10)
            check(False, "evil gRPC call succeeded", d)
        except Exception as e:  # noqa: BLE001 - grpc.RpcError: NOT_FOUND
            check("NOT_FOUND" in str(e) or "not found" in str(e).lower(), "evil gRPC %s" % e, d)
        infer(rest, "/v2/models/hpt/infer", {"inputs": [xin]})
        g = pb.ks.ModelInferRequest(model_name="hpt")
        g.inputs.add(name="x", datatype="FP32", shape=[3, 1])
        g.raw_input_contents.append(x.astype("<f4").tobytes())
        d.stub.ModelInfer(g, timeout=10)
        lines = wait_lines(d, n0 + 4)
        time.sleep(0.3)
        lines = request_lines(d)
        check(len(lines) == n0 + 4, "request lines %d, want %d: %s" % (len(lines), n0 + 4, lines[n0:]), d)
        new = lines[n0:]
        apis = [ln["api"] for ln in new]
        check(apis == ["rest_kserve_metadata", "grpc_kserve_infer", "rest_kserve_infer", "grpc_kserve_infer"],
              "request apis %s" % apis, d)
        for ln in new:
            for k in ("time", "peer", "api", "model", "version", "signature", "code", "latency_ms",
                      "bytes_in", "bytes_out", "batch"):
                check(k in ln, "request line lacks %s: %s" % (k, ln), d)
        check(new[0]["code"] == "NOT_FOUND" and new[0]["model"].startswith("evil\\x0a")
              and "\\x1b[31m" in new[0]["model"], "escaped REST model %r" % new[0], d)
        check(new[1]["model"] == new[0]["model"], "escaped gRPC model %r" % new[1], d)
        check(new[3]["code"] == "OK" and new[3]["batch"] == 3 and new[3]["version"] == 123
              and new[3]["bytes_in"] > 0 and new[3]["bytes_out"] > 0 and new[3]["peer"].startswith("ipv"),
              "gRPC infer line %s" % new[3], d)
        # request_lines parsed every line as JSON: no line was forged.
        check("\x1b" not in d.log(), "an ANSI escape reached the log raw", d)

        # 5. Metrics.
        m = metrics(rest)
        for api in ("rest_kserve_infer", "grpc_kserve_infer"):
            check(sample(m, "dcmserve_requests_total", model="hpt", version="123", signature="serving_default",
                         api=api, code="OK") >= 1, "%s counter" % api, d)
        check(sample(m, "dcmserve_request_latency_seconds_count", model="hpt", version="123",
                     signature="serving_default", api="rest_kserve_infer", code="OK", phase="compute") >= 1,
              "compute phase histogram", d)
        check(sample(m, "dcmserve_model_loads_total", model="hpt", result="ok") == 1, "load counter", d)
        for name, ver in (("hpt", "123"), ("demo_ct", "1")):
            key = ("dcmserve_model_pool_free_bytes",
                   tuple(sorted(dict(model=name, version=ver, device="host").items())))
            check(key in m and m[key] >= 0, "pool bytes of %s missing" % name, d)
        check(sample(m, "dcmserve_model_load_seconds_count", model="demo_ct") == 1, "load latency", d)
        check(d.stop() == 0, "daemon exit code after SIGTERM", d)
    finally:
        d.close()
        os.unlink(cfg)
    print("it_serve_rest_v2: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
