"""it_multi_inference: TF Serving's MultiInference gRPC API on the daemon
(127.0.0.1, --port=0) with half_plus_two's tf.Example signatures
(classify_x_to_y, regress_x_to_y, regress_x_to_y2). The reference for every
task is the daemon's own Classify / Regress answer for the same Input, and
y2 = 0.5 x + 3 (the model's definition) checks that both are right. Covers
example_list and example_list_with_context, the results' order and
model_spec, and TF Serving's errors: no task, an empty or a different model
name, a different version, a duplicate signature, an unknown signature, an
unknown method_name (UNIMPLEMENTED), a predict signature, an empty Input,
bytes that do not parse; the daemon keeps serving afterwards."""
import os
import sys

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, gen_protos  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HP2_BASE = os.path.join(SRC, "tests", "data", "savedmodels", "saved_model_half_plus_two_cpu")
pb = gen_protos()
XS = [1.0, 3.0, -7.5, 0.25]
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"


def example(**feats):
    e = pb.tfs.Example()
    for k, v in feats.items():
        e.features.feature[k].float_list.value.extend(v)
    return e


def task(req, sig, method, name="hpt"):
    t = req.tasks.add()
    t.model_spec.name = name
    if sig is not None:
        t.model_spec.signature_name = sig
    t.method_name = method
    return t


def expect_error(fn, req, code, needle, d):
    try:
        fn(req, timeout=10)
    except grpc.RpcError as e:
        check(e.code() == code, "expected %s, got %s: %s" % (code, e.code(), e.details()), d)
        check(needle in e.details(), "message %r lacks %r" % (e.details(), needle), d)
        return
    check(False, "expected %s, the call succeeded" % code, d)


def fill_input(inp, with_context):
    if with_context:
        # Example 1 has no x: it takes the context's; the others keep their own.
        inp.example_list_with_context.context.CopyFrom(example(x=[10.0]))
        inp.example_list_with_context.examples.extend(
            [example(x=[v]) if i != 1 else example() for i, v in enumerate(XS)])
    else:
        inp.example_list.examples.extend([example(x=[v]) for v in XS])


d = Daemon(["--model_name=hpt", "--model_base_path=" + HP2_BASE])
try:
    d.wait_health()
    s = d.stub
    for with_context in (False, True):
        xs = np.asarray(XS)
        if with_context:
            xs[1] = 10.0
        # The single-task APIs' answers for the same Input.
        cr = pb.tfs.ClassificationRequest()
        cr.model_spec.name = "hpt"
        cr.model_spec.signature_name = "classify_x_to_y"
        fill_input(cr.input, with_context)
        ref_c = [[(c.label, c.score) for c in cl.classes]
                 for cl in s.Classify(cr, timeout=10).result.classifications]
        ref_r = {}
        for sig in ("regress_x_to_y", "regress_x_to_y2"):
            rr = pb.tfs.RegressionRequest()
            rr.model_spec.name = "hpt"
            rr.model_spec.signature_name = sig
            fill_input(rr.input, with_context)
            ref_r[sig] = [r.value for r in s.Regress(rr, timeout=10).result.regressions]
        check(np.allclose(ref_r["regress_x_to_y2"], 0.5 * xs + 3, rtol=1e-6),
              "Regress y2 %r vs 0.5x+3" % ref_r["regress_x_to_y2"], d)
        check(np.allclose(ref_r["regress_x_to_y"], 0.5 * xs + 2, rtol=1e-6),
              "Regress y %r vs 0.5x+2" % ref_r["regress_x_to_y"], d)

        mi = pb.tfs.MultiInferenceRequest()
        task(mi, "regress_x_to_y2", REGRESS)
        task(mi, "classify_x_to_y", CLASSIFY)
        task(mi, "regress_x_to_y", REGRESS)
        fill_input(mi.input, with_context)
        resp = s.MultiInference(mi, timeout=10)
        check(len(resp.results) == 3, "3 results: %r" % resp, d)
        order = [r.model_spec.signature_name for r in resp.results]
        check(order == ["regress_x_to_y2", "classify_x_to_y", "regress_x_to_y"], "order %r" % order, d)
        for r in resp.results:
            check(r.model_spec.name == "hpt" and r.model_spec.version.value == 123,
                  "result model_spec %r" % r.model_spec, d)
        r0, r1, r2 = resp.results
        check(r0.WhichOneof("result") == "regression_result" and
              r1.WhichOneof("result") == "classification_result" and
              r2.WhichOneof("result") == "regression_result",
              "result kinds %r" % [r.WhichOneof("result") for r in resp.results], d)
        got_c = [[(c.label, c.score) for c in cl.classes]
                 for cl in r1.classification_result.classifications]
        check(got_c == ref_c, "classification %r vs Classify %r" % (got_c, ref_c), d)
        got2 = [x.value for x in r0.regression_result.regressions]
        got1 = [x.value for x in r2.regression_result.regressions]
        check(got2 == ref_r["regress_x_to_y2"] and got1 == ref_r["regress_x_to_y"],
              "regressions %r %r vs Regress %r" % (got2, got1, ref_r), d)
        print("MultiInference (context=%s): y2 %r, scores %r, y %r" %
              (with_context, got2, [c[0][1] for c in got_c], got1), flush=True)

    # One task, signature left empty: serving_default is a predict signature.
    def one(sig, method, **kw):
        mi = pb.tfs.MultiInferenceRequest()
        task(mi, sig, method, **kw)
        fill_input(mi.input, False)
        return mi

    IA = grpc.StatusCode.INVALID_ARGUMENT
    expect_error(s.MultiInference, one(None, CLASSIFY), IA,
                 "Expected classification signature method_name to be tensorflow/serving/classify", d)
    expect_error(s.MultiInference, one("classify_x_to_y", REGRESS), IA,
                 "Expected regression signature method_name to be tensorflow/serving/regress", d)
    expect_error(s.MultiInference, one("classify_x_to_y", "tensorflow/serving/predict"),
                 grpc.StatusCode.UNIMPLEMENTED, "Unsupported signature method_name: tensorflow/serving/predict", d)
    expect_error(s.MultiInference, one("nope", CLASSIFY), IA,
                 "Requested signature not found in model graph: nope", d)
    mi = one("regress_x_to_y", REGRESS)
    task(mi, "regress_x_to_y", REGRESS)
    expect_error(s.MultiInference, mi, IA, "Duplicate evaluation of signature: regress_x_to_y", d)
    mi = one("regress_x_to_y", REGRESS)
    task(mi, "regress_x_to_y2", REGRESS, name="other")
    expect_error(s.MultiInference, mi, IA,
                 "All ModelSpecs in a MultiInferenceRequest must access the same model name.", d)
    mi = one("regress_x_to_y", REGRESS)
    task(mi, "regress_x_to_y2", REGRESS, name="")
    expect_error(s.MultiInference, mi, IA, "Found ModelSpec with an empty model name.", d)
    mi = one("regress_x_to_y", REGRESS)
    task(mi, "regress_x_to_y2", REGRESS).model_spec.version.value = 123
    expect_error(s.MultiInference, mi, IA,
                 "All ModelSpecs in a MultiInferenceRequest must access the same model version.", d)
    mi = pb.tfs.MultiInferenceRequest()
    task(mi, "regress_x_to_y", REGRESS)
    expect_error(s.MultiInference, mi, IA, "Input is empty.", d)
    mi = pb.tfs.MultiInferenceRequest()
    fill_input(mi.input, False)
    expect_error(s.MultiInference, mi, IA, "model_spec.name must be set", d)
    mi = one("regress_x_to_y", REGRESS, name="absent")
    expect_error(s.MultiInference, mi, grpc.StatusCode.NOT_FOUND, "absent", d)
    # Bytes that are no MultiInferenceRequest: a clear INVALID_ARGUMENT.
    raw = d.channel.unary_unary("/tensorflow.serving.PredictionService/MultiInference")
    # a length past the end; a truncated Input; tasks (a message) sent as a varint
    for junk in (b"\x0a\xff\xff\xff\xff\x0f", b"\x12\x05\x0a\x03\x0a\x01", b"\x08\x01"):
        try:
            raw(junk, timeout=10)
            check(False, "junk %r was answered" % junk, d)
        except grpc.RpcError as e:
            print("junk %r: %s %s" % (junk, e.code(), e.details()), flush=True)
            check(e.code() == IA and ("not valid protobuf wire format" in e.details() or
                                      "cannot parse MultiInferenceRequest" in e.details()),
                  "junk %r: %s %s" % (junk, e.code(), e.details()), d)
    # A version named the same way in every task is fine.
    mi = one("regress_x_to_y", REGRESS)
    mi.tasks[0].model_spec.version.value = 123
    task(mi, "regress_x_to_y2", REGRESS).model_spec.version.value = 123
    vals = [x.value for x in s.MultiInference(mi, timeout=10).results[1].regression_result.regressions]
    check(np.allclose(vals, 0.5 * np.asarray(XS) + 3, rtol=1e-6), "after errors: %r" % vals, d)
finally:
    d.stop()
    d.close()
print("it_multi_inference: ok")
