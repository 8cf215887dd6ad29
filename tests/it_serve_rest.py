"""it_serve_rest: TF Serving's REST API on --rest_api_port, spoken to with
Python's http.client against the real daemon on 127.0.0.1: half_plus_two
(y = 0.5 * x + 2, computed here with numpy) in row and columnar form, by
version and label; status; metadata; the DICOM demo model with {"b64": ...}
giving the same numbers as gRPC Predict; errors 400 / 404 / 413 with their
messages; CORS header."""
import base64
import http.client
import json
import os
import re
import sys
import tempfile
import time
import urllib.parse

import numpy as np
import pydicom
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, gen_protos, tensor_values, free_port  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEMO = os.path.join(SRC, "models", "demo_ct")
CT = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files", "CT_small.dcm")


# Set to an ssl.SSLContext to talk HTTPS to "localhost" (a daemon with
# --ssl_config_file, as it_serve_flags starts it).
HTTPS_CONTEXT = None


def _conn(port):
    if HTTPS_CONTEXT is not None:
        return http.client.HTTPSConnection("localhost", port, context=HTTPS_CONTEXT, timeout=30)
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def call(port, method, path, body=None):
    c = _conn(port)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    hdrs = dict(r.getheaders())
    c.close()
    return r.status, json.loads(data), hdrs


def metrics(port, path="/metrics"):
    c = _conn(port)
    c.request("GET", path)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    if r.status != 200:
        raise AssertionError("GET %s: %d %s" % (path, r.status, text))
    out = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            out[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return out


def listen_addrs(port):
    """The local addresses (hex, as /proc/net/tcp{,6} write them) listening on port."""
    out = set()
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            local, state = ln.split()[1], ln.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:  # LISTEN
                out.add(addr)
    return out


def sample(m, name, **labels):
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


def main():
    mon = tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False)
    mon.write('prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n')
    mon.close()
    cfg = tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False)
    cfg.write('model_config_list { config { name: "hpt" base_path: "%s" model_platform: "tensorflow" '
              'version_labels { key: "stable" value: 123 } } '
              'config { name: "demo_ct" base_path: "%s" model_platform: "tensorflow" } }\n' % (HPT, DEMO))
    cfg.close()
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg.name, "--rest_api_port=%d" % rest,
                "--rest_api_num_threads=2", "--rest_api_enable_cors_support=true",
                "--max_message_bytes=1000000", "--monitoring_config_file=" + mon.name])
    try:
        d.wait_health(1)
        x = np.array([1.0, 2.0, 5.0], dtype=np.float32)
        want = (0.5 * x + 2.0).tolist()

        # TF Serving's own example: scalars for x of shape (-1, 1); the left-out
        # unit dimension is left out of the answer too (docs/serving.md).
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": x.tolist()})
        check(code == 200 and r == {"predictions": want}, "instances example %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"inputs": x.tolist()})
        check(code == 200 and r == {"outputs": want}, "columnar scalars %d %s" % (code, r), d)
        # Row format: one [1] row per instance (the signature's x is (-1, 1)).
        code, r, h = call(rest, "POST", "/v1/models/hpt:predict",
                          {"instances": [[v] for v in x.tolist()]})
        check(code == 200, "row predict %d %s" % (code, r), d)
        check(np.allclose(np.array(r["predictions"]).ravel(), want), "predictions %s" % r, d)
        check(h.get("Access-Control-Allow-Origin") == "*", "CORS header missing: %s" % h, d)
        # Rows as objects, by version and by label.
        for path in ("/v1/models/hpt/versions/123:predict", "/v1/models/hpt/labels/stable:predict"):
            code, r, _ = call(rest, "POST", path, {"instances": [{"x": [v]} for v in x.tolist()]})
            check(code == 200 and np.allclose(np.array(r["predictions"]).ravel(), want),
                  "%s: %d %s" % (path, code, r), d)
        # Columnar, named and unnamed, another signature.
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict",
                          {"inputs": {"x": [[v] for v in x.tolist()]}})
        check(code == 200 and np.allclose(np.array(r["outputs"]).ravel(), want), "columnar %s" % r, d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict",
                          {"signature_name": "serving_default", "inputs": [[v] for v in x.tolist()]})
        check(code == 200 and np.allclose(np.array(r["outputs"]).ravel(), want), "signature_name %s" % r, d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict",
                          {"signature_name": "nosuch", "inputs": [[1.0]]})
        check(code == 400 and "nosuch" in r["error"] and "serving_default" in r["error"],
              "unknown signature %d %s" % (code, r), d)

        # Status and metadata.
        code, r, _ = call(rest, "GET", "/v1/models/hpt")
        check(code == 200 and r["model_version_status"][0]["version"] == "123"
              and r["model_version_status"][0]["state"] == "AVAILABLE"
              and r["model_version_status"][0]["status"]["error_code"] == "OK", "status %s" % r, d)
        code, r, _ = call(rest, "GET", "/v1/models/hpt/labels/stable")
        check(code == 200 and r["model_version_status"][0]["version"] == "123", "label status %s" % r, d)
        code, r, _ = call(rest, "GET", "/v1/models/hpt/metadata")
        sd = r["metadata"]["signature_def"]["signature_def"]
        check(code == 200 and r["model_spec"]["version"] == "123" and "serving_default" in sd,
              "metadata %s" % r, d)
        xi = sd["serving_default"]["inputs"]["x"]
        check(xi["dtype"] == "DT_FLOAT" and [dd["size"] for dd in xi["tensor_shape"]["dim"]] == ["-1", "1"],
              "metadata x %s" % xi, d)

        # DICOM as b64, against gRPC's answer for the same file.
        with open(CT, "rb") as f:
            blob = f.read()
        code, r, _ = call(rest, "POST", "/v1/models/demo_ct:predict",
                          {"instances": [{"b64": base64.b64encode(blob).decode()}]})
        check(code == 200, "b64 predict %d %s" % (code, r), d)
        pb = gen_protos()
        g = pb.tfs.PredictRequest()
        g.model_spec.name = "demo_ct"
        t = g.inputs["dicom"]
        t.dtype = pb.fw.DT_STRING
        t.tensor_shape.dim.add(size=1)
        t.string_val.append(blob)
        gr = d.stub.Predict(g, timeout=30)
        row = r["predictions"][0]
        for k in ("mean_hu", "tissue_fraction"):
            check(np.allclose(np.array(row[k], dtype=np.float32).ravel(),
                              np.array(tensor_values(gr.outputs[k]), dtype=np.float32)),
                  "%s REST %s gRPC %s" % (k, row[k], tensor_values(gr.outputs[k])), d)

        # KServe v2 health over REST.
        for path, key, want_code in (("/v2/health/live", "live", 200), ("/v2/health/ready", "ready", 200),
                                     ("/v2/models/hpt/ready", "ready", 200),
                                     ("/v2/models/hpt/versions/123/ready", "ready", 200),
                                     ("/v2/models/hpt/versions/7/ready", "ready", 400),
                                     ("/v2/models/nope/ready", "ready", 400)):
            code, r, _ = call(rest, "GET", path)
            check(code == want_code and r == {key: want_code == 200}, "%s: %d %s" % (path, code, r), d)

        # Errors.
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", "{\"instances\": [1.0,")
        check(code == 400 and "JSON" in r["error"], "malformed %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [["a"]]})
        check(code == 400 and "expected a number" in r["error"], "string for float %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [[1.0, 2.0]]})
        check(code == 400 and "x" in r["error"], "shape mismatch %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [[[1.0]]]})
        check(code == 400 and "x" in r["error"], "rank mismatch %d %s" % (code, r), d)
        # Rows of objects whose keys do not line up (fuzz_rest_predict found the
        # message of the first read freed memory; the second shifted rows).
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [{"x": [1.0]}, {}]})
        check(code == 400 and 'key "x" is in 1 of 2 rows' in r["error"], "key missing from a row %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict",
                          '{"instances": [{"x": [1.0], "x": [2.0]}, {"x": [5.0]}]}')
        check(code == 400 and 'key "x" appears twice in row 0' in r["error"], "key twice in a row %d %s" % (code, r), d)
        # A number float32 cannot hold is refused, not cast (the cast was
        # undefined behaviour; KServe v2 REST refused it already).
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", '{"instances": [[1.0], [1e39]]}')
        check(code == 400 and "element 1 (1e+39) is out of the range of DT_FLOAT" in r["error"],
              "float out of range %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"instances": [{"x": [1.0]}, {"x": [5.0]}]})
        check(code == 200 and r == {"predictions": [[2.5], [4.5]]}, "rows after the refusals %d %s" % (code, r), d)
        # :classify / :regress (it_serve_rest_classify tests them in full).
        for verb in ("classify", "regress"):
            code, r, _ = call(rest, "POST", "/v1/models/nope:" + verb, {"examples": [{"x": 1.0}]})
            check(code == 404 and "hpt" in r["error"], ":%s unknown model %d %s" % (verb, code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/nope:predict", {"instances": [[1.0]]})
        check(code == 404 and "hpt" in r["error"] and "demo_ct" in r["error"], "unknown model %d %s" % (code, r), d)
        code, r, _ = call(rest, "GET", "/v1/models/hpt/versions/7")
        check(code == 404, "unknown version %d %s" % (code, r), d)
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", "{\"instances\": [%s]}" % ("[1.0]," * 300000 + "[1.0]"))
        check(code == 413 and "1000000" in r["error"], "oversize %d %s" % (code, r), d)
        code, r, _ = call(rest, "GET", "/v1/nothing")
        check(code == 404 and "/v1/models/" in r["error"], "bad path %d %s" % (code, r), d)
        # Text log (default --request_log=errors): a model name with a newline and
        # an ANSI escape stays inside its one request line, escaped.
        evil = "evil\n2026-01-01T00.000Z INFO  forged\x1b[31m"  # no ':' (it ends a name in a URL)
        code, r, _ = call(rest, "POST", "/v1/models/%s:predict" % urllib.parse.quote(evil), {"inputs": [[1.0]]})
        check(code == 404, "evil model %d %s" % (code, r), d)
        end = time.monotonic() + 5
        while "evil\\x0a2026" not in d.log() and time.monotonic() < end:
            time.sleep(0.02)
        log = d.log()
        check("\x1b" not in log and not any(ln.startswith("2026-01-01") for ln in log.splitlines())
              and re.search(r'WARN  request peer="ipv4:127\.0\.0\.1:\d+" api="rest_predict" model="evil\\x0a2026-01-01'
                            r'T00\.000Z INFO  forged\\x1b\[31m" .*code="NOT_FOUND"', log),
              "request log line for the evil name", d)
        # Still serving after all that.
        code, r, _ = call(rest, "POST", "/v1/models/hpt:predict", {"inputs": [[2.0]]})
        check(code == 200 and np.allclose(r["outputs"], [[3.0]]), "after errors %s" % r, d)

        # /metrics (Prometheus text, parsed by prometheus_client): counters move
        # with REST and gRPC requests; the configured path answers too.
        m0 = metrics(rest)
        ok_rest = ("dcmserve_requests_total", dict(model="hpt", version="123", signature="serving_default",
                                                  api="rest_predict", code="OK"))
        ok_grpc = ("dcmserve_requests_total", dict(model="demo_ct", version="1", signature="serving_default",
                                                  api="grpc_predict", code="OK"))
        # prometheus_client names counter samples <family>_total.
        tfs = (":tensorflow:serving:request_count_total", dict(model_name="hpt", status="OK"))
        for _ in range(3):
            call(rest, "POST", "/v1/models/hpt:predict", {"inputs": [[2.0]]})
        d.stub.Predict(g, timeout=30)
        call(rest, "POST", "/v1/models/nope:predict", {"instances": [[1.0]]})
        m1 = metrics(rest, "/monitoring/prometheus/metrics")
        check(sample(m1, ok_rest[0], **ok_rest[1]) == sample(m0, ok_rest[0], **ok_rest[1]) + 3,
              "rest OK counter %s -> %s" % (sample(m0, ok_rest[0], **ok_rest[1]),
                                            sample(m1, ok_rest[0], **ok_rest[1])), d)
        check(sample(m1, ok_grpc[0], **ok_grpc[1]) == sample(m0, ok_grpc[0], **ok_grpc[1]) + 1,
              "grpc OK counter", d)
        check(sample(m1, tfs[0], **tfs[1]) == sample(m0, tfs[0], **tfs[1]) + 3, "tfs request_count", d)
        check(sample(m1, "dcmserve_requests_total", model="nope", version="0", signature="serving_default",
                     api="rest_predict", code="NOT_FOUND") >= 2, "NOT_FOUND counted", d)
        check(sample(m1, "dcmserve_loaded_versions") == 2, "loaded_versions %s" % m1, d)
        # The scrape itself is the one request in flight.
        check(sample(m1, "dcmserve_requests_in_flight") == 1, "in flight", d)
        # --bind_address=127.0.0.1 (Daemon passes it) holds for REST and /metrics too.
        check(listen_addrs(rest) == {"0100007F"}, "REST listens on %s, not 127.0.0.1 only"
              % listen_addrs(rest), d)
        # Prometheus' standard process metrics, read from /proc.
        check(sample(m1, "process_resident_memory_bytes") > 1e6, "rss", d)
        check(sample(m1, "process_cpu_seconds_total") > 0, "cpu seconds", d)
        check(sample(m1, "process_open_fds") >= 3 and sample(m1, "process_max_fds") > 0, "fds", d)
        start = sample(m1, "process_start_time_seconds")
        check(time.time() - 3600 < start <= time.time() + 1, "start time %s" % start, d)
        bi = [(dict(lab), v) for (n, lab), v in m1.items() if n == "dcmserve_build_info"]
        check(len(bi) == 1 and bi[0][1] == 1 and re.fullmatch(r"\d+\.\d+\.\d+", bi[0][0]["version"])
              and re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?|unknown", bi[0][0]["commit"])
              and bi[0][0]["cuda"] in ("on", "off"), "build_info %s" % bi, d)
        tl = dict(model_name="hpt", API="predict", entrypoint="REST")
        lat = sample(m1, ":tensorflow:serving:request_latency_count", **tl)
        inf = sample(m1, ":tensorflow:serving:request_latency_bucket", le="+Inf", **tl)
        check(lat >= 3 and inf == lat, "latency histogram count %s +Inf %s" % (lat, inf), d)
        # Buckets from 10 us (so sub-millisecond quantiles can be read) to 60 s.
        want = dict(model="hpt", phase="total", api="rest_predict", code="OK")
        les = sorted(float(dict(lab)["le"]) for (n, lab), _ in m1.items()
                     if n == "dcmserve_request_latency_seconds_bucket"
                     and all(dict(lab).get(k) == v for k, v in want.items()))
        check(les[0] == 1e-05 and les[-2] == 60 and len([x for x in les if x < 1e-3]) >= 5,
              "latency bucket bounds %s" % les, d)
        # TF Serving's runtime latency (the signature runs) and TF's graph_runs.
        rl = dict(model_name="hpt", API="predict", runtime="dcmserve")
        check(sample(m1, ":tensorflow:serving:runtime_latency_count", **rl) >= 3, "runtime_latency", d)
        g0, g1 = (sample(m, ":tensorflow:core:graph_runs_total") for m in (m0, m1))
        check(g1 >= g0 + 4, "graph_runs %s -> %s after 4 predicts" % (g0, g1), d)
        # Warm-up (on by default) ran for each model before it was AVAILABLE.
        for model in ("hpt", "demo_ct"):
            check(sample(m1, ":tensorflow:serving:model_warmup_latency_count", model_name=model) >= 1,
                  "warm-up latency of %s not recorded" % model, d)
        rc = d.stop()
        check(rc == 0, "daemon exit code %s after SIGTERM" % rc, d)
    finally:
        d.close()
        os.unlink(cfg.name)
        os.unlink(mon.name)
    print("it_serve_rest: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
