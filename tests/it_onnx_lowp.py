#!/usr/bin/python3
"""it_onnx_lowp: ONNX models with the 8-, 4- and 2-bit types (ONNX 17-26),
built here with onnx's helper, imported with `dcmserve import-onnx` and
served; what each wire does with them (docs/onnx.md, "The 8-, 4- and 2-bit
types"):

  model lp:  x (float [4]) -> y8 = Cast(x, FLOAT8E4M3FN), y4 = Cast(x, INT4);
             yw = DequantizeLinear(w, 0.5) of an INT4 initializer w packed two
             per byte in raw_data (5 elements: the last byte half padding),
             yc = Cast(c, FLOAT) of a FLOAT8E4M3FN Constant c
  model lq:  q (INT4 [3])  -> yq = Cast(q, FLOAT), yi = Identity(q)

  TF Serving gRPC Predict: tensor_content, one byte per element, dtypes
      DT_FLOAT8_E4M3FN (25) and DT_INT4 (29); an int4 byte with bits beyond
      the sign-extended nibble is refused naming its index.
  TF Serving REST: outputs as their values (JSON numbers); an INT4 input
      given in JSON is refused naming the input.
  KServe v2 ModelInfer: no datatype for them: an output is refused by name.

Expected float8 codes are worked out by hand below (E4M3FN: bias 7, 3
mantissa bits, max 448 = 0x7E, NaN 0x7F).
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile

import grpc
import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, Daemon, free_port, gen_protos  # noqa: E402

FAILS = []
FLOAT8E4M3FN, INT4 = 17, 22  # ONNX data types (the onnx package here may predate them)

X = np.array([0.3, 1e6, -2.0, np.nan], dtype=np.float32)
# 0.3 = 1.2 * 2^-2: exponent field 5 (0x28), mantissa 0.2 * 8 = 1.6 -> 2: 0x2A (0.3125);
# 1e6 saturates to 448 (0x7E); -2 = 1.0 * 2^1: sign, field 8: 0xC0; NaN: 0x7F
Y8 = bytes([0x2A, 0x7E, 0xC0, 0x7F])
Y8_REST = [0.3125, 448.0, -2.0, 0.0]  # the values for x with 0 for NaN (JSON input has no NaN)
# int4: truncation, then modulo 16: 0, 1000000 = 0xF4240 -> 0, -2, NaN -> 0
Y4 = [0, 0, -2, 0]
Q = [-8, 7, -1]
# w = [-8, 7, -1, 3, 0] packed: element 0 in the low nibble: 0x78, 0x3F, 0x00
W_PACKED, YW = bytes([0x78, 0x3F, 0x00]), [-4.0, 3.5, -0.5, 1.5, 0.0]
# c: E4M3FN 0x38 = 1.0 (field 7), 0xC4 = -(1.5 * 2^1) = -3.0
C_BITS, YC = bytes([0x38, 0xC4]), [1.0, -3.0]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def build(path, which):
    vi = helper.make_tensor_value_info
    if which == "lp":
        c = TensorProto(name="c_value", data_type=FLOAT8E4M3FN, dims=[2], raw_data=C_BITS)
        nodes = [helper.make_node("Cast", ["x"], ["y8"], name="to_f8", to=FLOAT8E4M3FN),
                 helper.make_node("Cast", ["x"], ["y4"], name="to_i4", to=INT4),
                 helper.make_node("DequantizeLinear", ["w", "s"], ["yw"], name="deq"),
                 helper.make_node("Constant", [], ["c"], name="c", value=c),
                 helper.make_node("Cast", ["c"], ["yc"], name="c_to_f", to=TensorProto.FLOAT)]
        ins = [vi("x", TensorProto.FLOAT, [4])]
        outs = [vi("y8", FLOAT8E4M3FN, [4]), vi("y4", INT4, [4]),
                vi("yw", TensorProto.FLOAT, [5]), vi("yc", TensorProto.FLOAT, [2])]
        inits = [TensorProto(name="w", data_type=INT4, dims=[5], raw_data=W_PACKED),
                 helper.make_tensor("s", TensorProto.FLOAT, [], [0.5])]
    else:
        nodes = [helper.make_node("Cast", ["q"], ["yq"], name="to_f", to=TensorProto.FLOAT),
                 helper.make_node("Identity", ["q"], ["yi"], name="same")]
        ins = [vi("q", INT4, [3])]
        outs = [vi("yq", TensorProto.FLOAT, [3]), vi("yi", INT4, [3])]
        inits = []
    m = helper.make_model(helper.make_graph(nodes, which, ins, outs, initializer=inits),
                          opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, path)


def serve(tmp, which):
    path = os.path.join(tmp, which + ".onnx")
    build(path, which)
    base = os.path.join(tmp, which)
    r = subprocess.run([DCMSERVE, "import-onnx", path, "--output_dir", os.path.join(base, "1")],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "%s: import-onnx exits 0 (%s)" % (which, r.stderr.strip()))
    if r.returncode != 0:
        return None, None
    rest = free_port()
    d = Daemon(["--model_name=" + which, "--model_base_path=" + base,
                "--rest_api_port=%d" % rest])
    d.wait_health(1)
    return d, rest


def rest_post(port, model, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/models/%s:predict" % model, body=json.dumps(body).encode(),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, data


def check_lp(d, rest, pb):
    fw = pb.fw
    req = pb.tfs.PredictRequest()
    req.model_spec.name = "lp"
    x = fw.TensorProto(dtype=fw.DT_FLOAT, float_val=X.tolist())
    x.tensor_shape.dim.add(size=4)
    req.inputs["x"].CopyFrom(x)
    resp = d.stub.Predict(req, timeout=30)
    y8, y4 = resp.outputs["y8"], resp.outputs["y4"]
    dims8 = [s.size for s in y8.tensor_shape.dim]
    check(y8.dtype == 25 and y8.tensor_content == Y8 and dims8 == [4],
          "gRPC y8: dtype %d, content %s, want 25 and %s" % (y8.dtype, y8.tensor_content.hex(),
                                                            Y8.hex()))
    got4 = np.frombuffer(y4.tensor_content, dtype=np.int8).tolist()
    check(y4.dtype == 29 and got4 == Y4,
          "gRPC y4: dtype %d, elements %s, want 29 and %s" % (y4.dtype, got4, Y4))
    yw, yc = list(resp.outputs["yw"].float_val), list(resp.outputs["yc"].float_val)
    check(yw == YW, "packed INT4 initializer dequantized: %s, want %s" % (yw, YW))
    check(yc == YC, "FLOAT8E4M3FN Constant cast to float: %s, want %s" % (yc, YC))
    st, data = rest_post(rest, "lp", {"inputs": {"x": [0.3, 1e6, -2.0, 0.0]}})
    if st == 200:
        outs = json.loads(data)["outputs"]
        check(outs.get("y8") == Y8_REST and outs.get("y4") == Y4 and outs.get("yw") == YW,
              "REST outputs as values: %s, want y8 %s, y4 %s" % (outs, Y8_REST, Y4))
    else:
        check(False, "REST predict: status %d (%s)" % (st, data[:200]))
    ks = pb.ks.ModelInferRequest(model_name="lp")
    ks.inputs.add(name="x", datatype="FP32", shape=[4])
    ks.raw_input_contents.append(X.astype("<f4").tobytes())
    try:
        d.stub.ModelInfer(ks, timeout=30)
        check(False, "KServe ModelInfer of a float8 output is refused")
    except grpc.RpcError as e:
        check(('"y8"' in e.details() or '"y4"' in e.details()) and
              "has no KServe datatype" in e.details(),
              "KServe ModelInfer refuses the float8 / int4 output by name: %s %s" % (e.code(),
                                                                             e.details()))


def check_lq(d, rest, pb):
    fw = pb.fw

    def predict(content):
        req = pb.tfs.PredictRequest()
        req.model_spec.name = "lq"
        q = fw.TensorProto(dtype=29, tensor_content=content)
        q.tensor_shape.dim.add(size=len(content))
        req.inputs["q"].CopyFrom(q)
        return d.stub.Predict(req, timeout=30)

    resp = predict(np.array(Q, dtype=np.int8).tobytes())
    yq = list(resp.outputs["yq"].float_val) or \
        np.frombuffer(resp.outputs["yq"].tensor_content, dtype="<f4").tolist()
    yi = resp.outputs["yi"]
    check(yq == [float(v) for v in Q], "gRPC int4 -> float: %s, want %s" % (yq, Q))
    check(yi.dtype == 29 and np.frombuffer(yi.tensor_content, dtype=np.int8).tolist() == Q,
          "gRPC int4 Identity: dtype %d, %s" % (yi.dtype, yi.tensor_content.hex()))
    try:
        predict(bytes([0x01, 0x08, 0x00]))
        check(False, "an int4 byte 0x08 is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "byte 1 (0x08)" in e.details(),
              "an int4 byte 0x08 is refused naming it: %s %s" % (e.code(), e.details()))
    st, data = rest_post(rest, "lq", {"inputs": {"q": Q}})
    err = json.loads(data).get("error", "") if st == 400 else ""
    check('"q"' in err and "DT_INT4" in err and "JSON" in err,
          "REST: an INT4 input in JSON is refused by name: %d %s" % (st, data[:200]))


def main():
    pb = gen_protos()
    with tempfile.TemporaryDirectory(prefix="it_onnx_lowp_") as tmp:
        for which, fn in (("lp", check_lp), ("lq", check_lq)):
            d, rest = serve(tmp, which)
            if d is None:
                return 1
            try:
                fn(d, rest, pb)
            finally:
                d.stop()
                d.close()
    print("%d check(s) failed" % len(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
