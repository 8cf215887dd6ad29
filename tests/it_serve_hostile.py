"""it_serve_hostile: requests built to crash the daemon, sent as raw bytes.

Finding 1 of the hostile-clients issue: a PredictRequest whose TensorProto
nests thousands of levels through variant_val (TensorProto.variant_val = 15 ->
VariantTensorDataProto.tensors = 3 -> TensorProto ...) used to overflow the
stack inside protobuf-c's recursive unpack on a worker thread (SIGSEGV). Every
request is now pre-scanned (common/ms_wire.c) and refused with
INVALID_ARGUMENT; the daemon keeps answering. The same bomb goes to the
KServe ModelInfer, GetModelMetadata and health Check methods, and a
truncated message is refused too."""
import os
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

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


def main():
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
        print("it_serve_hostile: nesting bombs on 4 methods and a truncated message refused, "
              "daemon still serving")
    finally:
        d.close()
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
