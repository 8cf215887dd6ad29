"""it_serve_hostile: requests built to crash the daemon, sent as raw bytes.

Finding 1 of the hostile-clients issue: a PredictRequest whose TensorProto
nests thousands of levels through variant_val (TensorProto.variant_val = 15 ->
VariantTensorDataProto.tensors = 3 -> TensorProto ...) used to overflow the
stack inside protobuf-c's recursive unpack on a worker thread (SIGSEGV). Every
request is now pre-scanned (common/ms_wire.c) and refused with
INVALID_ARGUMENT; the daemon keeps answering. The same bomb goes to the
KServe ModelInfer, GetModelMetadata and health Check methods, and a
truncated message is refused too. Files are pre-scanned as well: a nested
saved_model.pb fails `dcmserve show` and the daemon's load with a message,
a nested ONNX model fails `import-onnx`."""
import os
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, WAIT, Daemon, check, float_tensor,  # noqa: E402
                          gen_protos, tensor_values)

pb = gen_protos()


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field."""
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def nested_tensor(depth):
    t = b""
    for _ in range(depth):
        t = field(15, field(3, t))  # TensorProto.variant_val -> VariantTensorDataProto.tensors
    return t


def predict_bomb(depth):
    spec = field(1, b"hpt")                                   # ModelSpec.name
    entry = field(1, b"x") + field(2, nested_tensor(depth))   # map<string, TensorProto> entry
    return field(1, spec) + field(2, entry)                   # PredictRequest.model_spec, inputs


def raw(d, path):
    return d.channel.unary_unary(path, request_serializer=None, response_deserializer=None)


def expect_invalid(d, path, payload, what):
    try:
        raw(d, path)(payload, timeout=20)
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT,
              "%s: want INVALID_ARGUMENT, got %s %s" % (what, e.code(), e.details()), d)
        return e.details()
    check(False, "%s: accepted" % what, d)


def still_serves(d):
    req = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    req.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))
    r = d.stub.Predict(req, timeout=20)
    got = tensor_values(r.outputs["y"])
    check(got == [2.5, 3.0, 4.5], "after a hostile request: Predict gave %s" % got, d)
    check(d.proc.poll() is None, "the daemon exited (rc=%s)" % d.proc.returncode, d)


def files():
    """Nesting bombs in files we read: saved_model.pb (a Const's tensor attr nesting
    through variant_val) and an ONNX model (graph -> node -> attribute -> graph ...).
    Each must be refused with a message naming the nesting, not crash the CLI."""
    attr = field(1, b"value") + field(2, field(8, nested_tensor(20000)))   # AttrValue.tensor
    node = field(1, b"c") + field(2, b"Const") + field(5, attr)           # NodeDef name, op, attr
    sm = field(2, field(2, field(1, node)))                               # SavedModel.meta_graphs.graph_def.node
    g = b""
    for _ in range(20000):                                                # GraphProto.node.attribute.g
        g = field(1, field(5, field(1, b"body") + field(6, g)))
    onnx = field(7, g)                                                    # ModelProto.graph
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "m", "1"))
        with open(os.path.join(t, "m", "1", "saved_model.pb"), "wb") as f:
            f.write(sm)
        with open(os.path.join(t, "bomb.onnx"), "wb") as f:
            f.write(onnx)
        for what, cmd in (("saved_model.pb", [DCMSERVE, "show", "--dir", os.path.join(t, "m", "1"), "--all"]),
                          ("ONNX", [DCMSERVE, "import-onnx", os.path.join(t, "bomb.onnx"),
                                    "--output_dir", os.path.join(t, "out", "1")])):
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            check(p.returncode > 0 and "nesting deeper than 100" in p.stderr,
                  "%s nesting bomb: rc=%d stderr=%r" % (what, p.returncode, p.stderr[-300:]))
        d = Daemon(["--model_name=bomb", "--model_base_path=" + os.path.join(t, "m")])
        try:
            end = time.monotonic() + WAIT
            while "nesting deeper than 100" not in d.log() and time.monotonic() < end:
                time.sleep(0.1)
            check("nesting deeper than 100" in d.log(), "the daemon's load error should name the nesting", d)
            d.wait_health(want=2)
            check(d.proc.poll() is None, "the daemon exited on a nested saved_model.pb", d)
        finally:
            d.close()


def main():
    files()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT])
    try:
        d.wait_health()
        still_serves(d)
        bomb = predict_bomb(6000)
        msg = expect_invalid(d, "/tensorflow.serving.PredictionService/Predict", bomb,
                             "Predict nesting 6000 levels (%d bytes)" % len(bomb))
        check("nest" in msg and "100" in msg, "the message should name the nesting limit: %r" % msg, d)
        still_serves(d)
        for path in ("/inference.GRPCInferenceService/ModelInfer",
                     "/tensorflow.serving.PredictionService/GetModelMetadata",
                     "/grpc.health.v1.Health/Check"):
            expect_invalid(d, path, field(1, nested_tensor(6000)), path + " nesting 6000 levels")
            still_serves(d)
        # Well-formed nesting well within the limit is still parsed (and refused
        # for what it is, not for its shape on the wire).
        try:
            raw(d, "/tensorflow.serving.PredictionService/Predict")(predict_bomb(10), timeout=20)
        except grpc.RpcError as e:
            check("nest" not in (e.details() or ""), "10 levels refused as too deep: %s" % e.details(), d)
        expect_invalid(d, "/tensorflow.serving.PredictionService/Predict", predict_bomb(3)[:-2],
                       "a truncated PredictRequest")
        still_serves(d)
        print("it_serve_hostile: nesting bombs in saved_model.pb, ONNX and on 4 methods and a "
              "truncated message refused, daemon still serving")
    finally:
        d.close()
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
