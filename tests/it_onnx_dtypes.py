#!/usr/bin/python3
"""it_onnx_dtypes: an ONNX model whose inputs and outputs are float16,
bfloat16, uint16, int8 and double, built here with onnx's helper, imported
with `dcmserve import-onnx` and served: TF Serving Predict over gRPC (typed
fields) and REST (JSON), KServe ModelInfer over gRPC (raw contents).

    yh = h + h            (float16)
    yb = Cast(h, BFLOAT16)
    yu = u * u            (uint16, wraps)
    y8 = i8 + i8          (int8, wraps)
    yd = Cast(u, DOUBLE)
    ys = Sqrt(h)          (float16; computed in float, rounded once)

Expected values come from numpy (float16 arithmetic, integer wrapping) and a
bfloat16 rounding written here (round to nearest even on the float32 bits).
"""
import json
import http.client
import os
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, Daemon, free_port, gen_protos  # noqa: E402

FAILS = []

H = np.array([1.0, 2.5, 0.1], dtype=np.float16)
U = np.array([300, 7], dtype=np.uint16)
I8 = np.array([100, -3], dtype=np.int8)


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def bf16_bits(f32):
    """float32 -> bfloat16 bits, round to nearest even (no NaN here)."""
    u = np.asarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def expected():
    return {
        "yh": (H + H).astype(np.float16),
        "yb": bf16_bits(H.astype(np.float32)),  # bits
        "yu": (U * U).astype(np.uint16),
        "y8": (I8 + I8).astype(np.int8),
        "yd": U.astype(np.float64),
        "ys": np.sqrt(H.astype(np.float32)).astype(np.float16),
    }


def build(path):
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("Add", ["h", "h"], ["yh"], name="add_h"),
         helper.make_node("Cast", ["h"], ["yb"], name="to_bf16", to=TensorProto.BFLOAT16),
         helper.make_node("Mul", ["u", "u"], ["yu"], name="mul_u"),
         helper.make_node("Add", ["i8", "i8"], ["y8"], name="add_i8"),
         helper.make_node("Cast", ["u"], ["yd"], name="to_double", to=TensorProto.DOUBLE),
         helper.make_node("Sqrt", ["h"], ["ys"], name="sqrt_h")],
        "dtypes",
        [vi("h", TensorProto.FLOAT16, [3]), vi("u", TensorProto.UINT16, [2]),
         vi("i8", TensorProto.INT8, [2])],
        [vi("yh", TensorProto.FLOAT16, [3]), vi("yb", TensorProto.BFLOAT16, [3]),
         vi("yu", TensorProto.UINT16, [2]), vi("y8", TensorProto.INT8, [2]),
         vi("yd", TensorProto.DOUBLE, [2]), vi("ys", TensorProto.FLOAT16, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


def from_tensor_proto(pb, tp):
    """numpy array of a TensorProto (tensor_content or the typed field); bfloat16 as bits."""
    fw = pb.fw
    np_of = {fw.DT_HALF: np.float16, fw.DT_BFLOAT16: np.uint16, fw.DT_UINT16: np.uint16,
             fw.DT_INT8: np.int8, fw.DT_DOUBLE: np.float64}
    dt = np_of[tp.dtype]
    shape = [d.size for d in tp.tensor_shape.dim]
    if tp.tensor_content:
        return np.frombuffer(tp.tensor_content, dtype=np.dtype(dt).newbyteorder("<")).reshape(shape)
    if tp.dtype in (fw.DT_HALF, fw.DT_BFLOAT16):
        return np.array(tp.half_val, dtype=np.uint16).view(dt).reshape(shape)
    if tp.dtype == fw.DT_DOUBLE:
        return np.array(tp.double_val, dtype=dt).reshape(shape)
    return np.array(tp.int_val, dtype=np.int64).astype(dt).reshape(shape)


def grpc_predict(d, pb, want):
    fw = pb.fw
    req = pb.tfs.PredictRequest()
    req.model_spec.name = "dt"
    h = fw.TensorProto(dtype=fw.DT_HALF, half_val=H.view(np.uint16).tolist())
    h.tensor_shape.dim.add(size=3)
    u = fw.TensorProto(dtype=fw.DT_UINT16, int_val=U.tolist())
    u.tensor_shape.dim.add(size=2)
    i8 = fw.TensorProto(dtype=fw.DT_INT8, int_val=I8.tolist())
    i8.tensor_shape.dim.add(size=2)
    req.inputs["h"].CopyFrom(h)
    req.inputs["u"].CopyFrom(u)
    req.inputs["i8"].CopyFrom(i8)
    resp = d.stub.Predict(req, timeout=30)
    types = {"yh": fw.DT_HALF, "yb": fw.DT_BFLOAT16, "yu": fw.DT_UINT16, "y8": fw.DT_INT8,
             "yd": fw.DT_DOUBLE, "ys": fw.DT_HALF}
    for k, w in want.items():
        tp = resp.outputs[k]
        got = from_tensor_proto(pb, tp)
        check(tp.dtype == types[k] and got.shape == w.shape and
              np.array_equal(got.view(np.uint8), w.view(np.uint8)),
              "gRPC Predict %s: %s %s, want %s" % (k, fw.DataType.Name(tp.dtype), got.tolist(),
                                                   w.tolist()))


def rest_predict(port, want):
    body = json.dumps({"inputs": {"h": [float(x) for x in H], "u": U.tolist(),
                                  "i8": I8.tolist()}}).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/v1/models/dt:predict", body=body,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    check(r.status == 200, "REST predict: status %d (%s)" % (r.status, data[:200]))
    if r.status != 200:
        return
    outs = json.loads(data)["outputs"]
    as_float = {"yb": (want["yb"].astype(np.uint32) << 16).view(np.float32)}
    for k, w in want.items():
        w = as_float.get(k, w)
        got = np.array(outs.get(k), dtype=np.float64)
        check(got.shape == w.shape and np.array_equal(got, w.astype(np.float64)),
              "REST predict %s: %s, want %s" % (k, got.tolist(), w.tolist()))


def kserve_infer(d, pb, want):
    req = pb.ks.ModelInferRequest(model_name="dt")
    for name, dt, a in (("h", "FP16", H), ("u", "UINT16", U), ("i8", "INT8", I8)):
        req.inputs.add(name=name, datatype=dt, shape=list(a.shape))
        req.raw_input_contents.append(a.astype(a.dtype.newbyteorder("<")).tobytes())
    resp = d.stub.ModelInfer(req, timeout=30)
    types = {"yh": ("FP16", np.float16), "yb": ("BF16", np.uint16), "yu": ("UINT16", np.uint16),
             "y8": ("INT8", np.int8), "yd": ("FP64", np.float64), "ys": ("FP16", np.float16)}
    check(len(resp.raw_output_contents) == len(resp.outputs),
          "ModelInfer: raw contents for every output (%d of %d)"
          % (len(resp.raw_output_contents), len(resp.outputs)))
    for i, o in enumerate(resp.outputs):
        if o.name not in want or i >= len(resp.raw_output_contents):
            continue
        dtn, npt = types[o.name]
        got = np.frombuffer(resp.raw_output_contents[i], dtype=np.dtype(npt).newbyteorder("<"))
        w = want[o.name]
        check(o.datatype == dtn and list(o.shape) == list(w.shape) and
              np.array_equal(got.view(np.uint8), w.view(np.uint8)),
              "ModelInfer %s: %s %s, want %s %s" % (o.name, o.datatype, got.tolist(), dtn,
                                                    w.tolist()))


def main():
    pb = gen_protos()
    want = expected()
    with tempfile.TemporaryDirectory(prefix="it_onnx_dtypes_") as tmp:
        path = os.path.join(tmp, "dtypes.onnx")
        build(path)
        base = os.path.join(tmp, "dt")
        import subprocess
        r = subprocess.run([DCMSERVE, "import-onnx", path, "--output_dir", os.path.join(base, "1")],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "import-onnx exits 0 (%s)" % r.stderr.strip())
        if r.returncode != 0:
            return 1
        rest = free_port()
        d = Daemon(["--model_name=dt", "--model_base_path=" + base, "--rest_api_port=%d" % rest])
        try:
            d.wait_health(1)
            grpc_predict(d, pb, want)
            rest_predict(rest, want)
            kserve_infer(d, pb, want)
        finally:
            d.stop()
            d.close()
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
