"""it_serve_rest_classify: TF Serving's REST :classify and :regress on the
daemon (127.0.0.1, --port=0, --rest_api_port) with half_plus_two's tf.Example
signatures (classify_x_to_y, regress_x_to_y, regress_x_to_y2). The reference
is the same daemon's gRPC Classify / Regress for the same examples (the REST
body becomes the same ClassificationRequest / RegressionRequest). Covers a
context, the version in the URL, a JSON integer (int64_list, which the float
feature x refuses), bad bodies (400), an unknown model (404), and that the
daemon keeps serving afterwards."""
import http.client
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, gen_protos, free_port  # noqa: E402

pb = gen_protos()
XS = [1.0, 3.0, -7.5]


def call(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=body if isinstance(body, str) else json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def example(**feats):
    e = pb.tfs.Example()
    for k, v in feats.items():
        e.features.feature[k].float_list.value.extend(v)
    return e


def grpc_req(kind, sig, xs, ctx=None):
    req = pb.tfs.ClassificationRequest() if kind == "classify" else pb.tfs.RegressionRequest()
    req.model_spec.name = "hpt"
    req.model_spec.signature_name = sig
    exs = [example(x=[v]) if v is not None else example() for v in xs]
    if ctx is None:
        req.input.example_list.examples.extend(exs)
    else:
        req.input.example_list_with_context.context.CopyFrom(example(x=[ctx]))
        req.input.example_list_with_context.examples.extend(exs)
    return req


rest = free_port()
d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest])
try:
    d.wait_health()
    s = d.stub

    # classify: [[[label, score], ...], ...] with the gRPC answer's labels and scores.
    code, r = call(rest, "/v1/models/hpt:classify",
                   {"signature_name": "classify_x_to_y", "examples": [{"x": v} for v in XS]})
    g = s.Classify(grpc_req("classify", "classify_x_to_y", XS), timeout=10)
    want = [[[c.label, c.score] for c in cl.classes] for cl in g.result.classifications]
    check(code == 200, "classify %d %s" % (code, r), d)
    got = r.get("results", [])
    check(len(got) == len(want) and all(len(a) == len(b) for a, b in zip(got, want)),
          "classify shape %r vs %r" % (got, want), d)
    check(all(p[0] == q[0] and np.isclose(p[1], q[1], rtol=1e-6)
              for a, b in zip(got, want) for p, q in zip(a, b)), "classify %r vs %r" % (got, want), d)
    print("classify: %r" % got, flush=True)

    # regress, by name, by version; lists of one value and plain values.
    for sig, path in (("regress_x_to_y", "/v1/models/hpt:regress"),
                      ("regress_x_to_y2", "/v1/models/hpt/versions/123:regress")):
        code, r = call(rest, path, {"signature_name": sig, "examples": [{"x": [v]} for v in XS]})
        want = [x.value for x in s.Regress(grpc_req("regress", sig, XS), timeout=10).result.regressions]
        check(code == 200 and np.allclose(r["results"], want, rtol=1e-6),
              "regress %s %d %r vs %r" % (sig, code, r, want), d)
        print("regress %s: %r" % (sig, r["results"]), flush=True)

    # context: an example's own x wins, a missing x comes from the context.
    code, r = call(rest, "/v1/models/hpt:regress",
                   {"signature_name": "regress_x_to_y", "context": {"x": 10.0},
                    "examples": [{"x": 1.0}, {}]})
    want = [x.value for x in s.Regress(grpc_req("regress", "regress_x_to_y", [1.0, None], 10.0),
                                       timeout=10).result.regressions]
    check(code == 200 and np.allclose(r["results"], want, rtol=1e-6),
          "regress with context %d %r vs %r" % (code, r, want), d)

    # A JSON integer is an int64_list (TF Serving's rule): the float feature x refuses it.
    code, r = call(rest, "/v1/models/hpt:regress",
                   {"signature_name": "regress_x_to_y", "examples": [{"x": 3}]})
    check(code == 400 and "x" in r.get("error", ""), "int feature %d %r" % (code, r), d)

    # Bad bodies -> 400; unknown model -> 404; wrong signature kind -> 400.
    for body, needle in (("{\"examples\": [{\"x\": 1.0}", "JSON"),
                         ({"instances": [1.0]}, "examples"),
                         ({"examples": [1.0]}, "object"),
                         ({"examples": [{"x": [1.0, "a"]}]}, "mixed"),
                         ({"examples": [{"x": [[1.0]]}]}, "x"),
                         ({"examples": [{"x": {"b64": 5}}]}, "x"),
                         ({"examples": [{"x": {"b64": "!!"}}]}, "base64"),
                         ({"examples": []}, "empty"),
                         ({"signature_name": 7, "examples": [{"x": 1.0}]}, "signature_name"),
                         ({"signature_name": "serving_default", "examples": [{"x": 1.0}]},
                          "method_name")):
        for verb in ("classify", "regress"):
            b = body
            if isinstance(b, dict) and "signature_name" not in b:
                b = dict(b, signature_name=verb + "_x_to_y")
            code, r = call(rest, "/v1/models/hpt:" + verb, b)
            check(code == 400 and needle in r.get("error", ""),
                  ":%s %r -> %d %r (want 400 with %r)" % (verb, body, code, r, needle), d)
    for verb in ("classify", "regress"):
        code, r = call(rest, "/v1/models/nope:" + verb, {"examples": [{"x": 1.0}]})
        check(code == 404 and "hpt" in r.get("error", ""), ":%s unknown model %d %r" % (verb, code, r), d)

    code, r = call(rest, "/v1/models/hpt:regress",
                   {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})
    check(code == 200 and len(r["results"]) == 1, "still serving %d %r" % (code, r), d)
finally:
    d.stop()
    d.close()
print("it_serve_rest_classify: ok")
