"""it_classify: TF Serving's Classify and Regress gRPC APIs on the daemon
(127.0.0.1, --port=0) with half_plus_two's tf.Example signatures:
classify_x_to_y (scores), regress_x_to_y, regress_x_to_y2. The reference for
y is the same model's Predict on serving_default (x -> y); y2 = 0.5 x + 3 is
the model's definition. Covers example_list, example_list_with_context (an
example's own feature wins over the context's, the context fills a missing
one), and TF Serving's errors: empty input, a predict signature, a missing
required feature; the daemon keeps serving afterwards."""
import os
import sys

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HP2_BASE = os.path.join(SRC, "tests", "data", "savedmodels", "saved_model_half_plus_two_cpu")
pb = gen_protos()
XS = [1.0, 3.0, -7.5]


def example(**feats):
    e = pb.tfs.Example()
    for k, v in feats.items():
        e.features.feature[k].float_list.value.extend(v)
    return e


def expect_error(fn, req, code, needle, d):
    try:
        fn(req, timeout=10)
    except grpc.RpcError as e:
        check(e.code() == code, "expected %s, got %s: %s" % (code, e.code(), e.details()), d)
        check(needle in e.details(), "message %r lacks %r" % (e.details(), needle), d)
        return
    check(False, "expected %s, the call succeeded" % code, d)


d = Daemon(["--model_name=hpt", "--model_base_path=" + HP2_BASE])
try:
    d.wait_health()
    s = d.stub
    pr = pb.tfs.PredictRequest()
    pr.model_spec.name = "hpt"
    pr.inputs["x"].CopyFrom(float_tensor(XS, [len(XS), 1]))
    ref = np.asarray(tensor_values(s.Predict(pr, timeout=10).outputs["y"]), dtype=np.float64).ravel()

    def spec(req, sig):
        req.model_spec.name = "hpt"
        req.model_spec.signature_name = sig
        return req

    req = spec(pb.tfs.ClassificationRequest(), "classify_x_to_y")
    req.input.example_list.examples.extend([example(x=[v]) for v in XS])
    resp = s.Classify(req, timeout=10)
    got = [[(c.label, c.score) for c in cl.classes] for cl in resp.result.classifications]
    check(len(got) == len(XS) and all(len(r) == 1 and r[0][0] == "" for r in got),
          "Classify shape/labels: %r" % got, d)
    check(np.allclose([r[0][1] for r in got], ref, rtol=1e-6), "Classify scores %r vs %r" % (got, ref), d)
    check(resp.model_spec.name == "hpt" and resp.model_spec.signature_name == "classify_x_to_y"
          and resp.model_spec.version.value == 123, "Classify model_spec: %r" % resp.model_spec, d)
    print("Classify: %r" % [r[0][1] for r in got], flush=True)

    for sig, want in (("regress_x_to_y", ref), ("regress_x_to_y2", 0.5 * np.asarray(XS) + 3)):
        rr = spec(pb.tfs.RegressionRequest(), sig)
        rr.input.example_list.examples.extend([example(x=[v]) for v in XS])
        vals = [r.value for r in s.Regress(rr, timeout=10).result.regressions]
        check(np.allclose(vals, want, rtol=1e-6), "Regress %s: %r vs %r" % (sig, vals, want), d)
        print("Regress %s: %r" % (sig, vals), flush=True)

    # Context: example 0 has its own x (wins), example 1 has none (the context's).
    rc = spec(pb.tfs.RegressionRequest(), "regress_x_to_y")
    rc.input.example_list_with_context.context.CopyFrom(example(x=[10.0]))
    rc.input.example_list_with_context.examples.extend([example(x=[1.0]), example()])
    vals = [r.value for r in s.Regress(rc, timeout=10).result.regressions]
    check(np.allclose(vals, [ref[0], 0.5 * 10 + 2], rtol=1e-6), "Regress with context: %r" % vals, d)

    expect_error(s.Classify, spec(pb.tfs.ClassificationRequest(), "classify_x_to_y"),
                 grpc.StatusCode.INVALID_ARGUMENT, "Input is empty", d)
    bad = spec(pb.tfs.ClassificationRequest(), "serving_default")
    bad.input.example_list.examples.append(example(x=[1.0]))
    expect_error(s.Classify, bad, grpc.StatusCode.INVALID_ARGUMENT,
                 "Expected classification signature method_name to be tensorflow/serving/classify", d)
    bad = spec(pb.tfs.RegressionRequest(), "regress_x_to_y")
    bad.input.example_list.examples.append(example(z=[1.0]))
    expect_error(s.Regress, bad, grpc.StatusCode.INVALID_ARGUMENT,
                 "Feature: x (data type: float) is required but could not be found", d)
    bad = spec(pb.tfs.ClassificationRequest(), "nope")
    bad.input.example_list.examples.append(example(x=[1.0]))
    expect_error(s.Classify, bad, grpc.StatusCode.FAILED_PRECONDITION, "nope", d)
    again = np.asarray(tensor_values(s.Predict(pr, timeout=10).outputs["y"])).ravel()
    check(np.allclose(again, ref), "still serving after errors", d)
finally:
    d.stop()
    d.close()
# dcmserve run --input_examples (saved_model_cli's flag; JSON here): the same
# examples through regress_x_to_y give the same values; 3 (an int) makes an
# int64_list, which the float feature x refuses by name.
import subprocess  # noqa: E402
import tempfile  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
with tempfile.TemporaryDirectory() as out:
    js = "[" + ",".join('{"x":[%r],"note":["a,b"]}' % float(v) for v in XS) + "]"
    p = subprocess.run([DCMSERVE, "run", "--dir", os.path.join(HP2_BASE, "00000123"),
                        "--signature_def", "regress_x_to_y", "--outdir", out,
                        "--input_examples", "inputs=" + js],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0, "run --input_examples: %s" % p.stderr)
    if p.returncode == 0:
        got = np.load(os.path.join(out, "outputs.npy")).ravel()
        check(np.allclose(got, ref, rtol=1e-6), "run --input_examples: %r vs %r" % (got, ref))
    p = subprocess.run([DCMSERVE, "run", "--dir", os.path.join(HP2_BASE, "00000123"),
                        "--signature_def", "regress_x_to_y", "--input_examples", 'inputs=[{"x":[3]}]'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode != 0 and "Key: x" in p.stderr and "Expected type: float" in p.stderr,
          "int feature for a float key: rc %d %s" % (p.returncode, p.stderr))
    p = subprocess.run([DCMSERVE, "run", "--dir", os.path.join(HP2_BASE, "00000123"),
                        "--signature_def", "regress_x_to_y", "--input_examples", 'inputs={"x":1}'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode != 0 and "JSON list of objects" in p.stderr, "not a list: %s" % p.stderr)
print("it_classify: ok")
