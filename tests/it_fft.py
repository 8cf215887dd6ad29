"""it_fft: a SavedModel with the tf.signal FFT family and complex tensors,
written here with the protobuf classes of proto/ (there is no TensorFlow
here), served by the daemon over gRPC and REST and compared with numpy.fft.

The graph, on x float [B, 6, 16] and z complex64 [B, 8]:
  spec  = RFFT(x, [16])                  mag = ComplexAbs(spec)
  back  = IRFFT(spec, [16])              (= x)
  c     = Complex(x, Neg(x))             f2 = FFT2D(c): Real -> f2_re, Imag -> f2_im
  p3    = IFFT3D(f2 * Conj(f2)): Real -> p3 (its 3 dims include the batch)
  r2    = RFFT2D(x, [4, 20])             (outer dim cropped, inner padded; complex64 output)
  r2b   = IRFFT2D(r2, [4, 20])
  mag64 = ComplexAbs(Cast(spec, complex128)) (double)
  zf    = FFT(z) + z                     (complex64 input and output)
  ri    = Cast(zf, DT_FLOAT)             (the real part)
Complex tensors cross gRPC as TensorProto scomplex_val or tensor_content.
REST's JSON has no complex numbers (nor has TF Serving's): a request that
gives one, or whose signature answers one, is refused (400) naming the
tensor and its dtype.

A second model has FFT with Tcomplex = DT_COMPLEX128 (the FFT library,
Debian's KissFFT, is single precision): its load fails naming node, op and
attr, in the daemon's log and in `dcmserve check` (exit 1, "does not serve")."""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, free_port, gen_protos, serve_graph  # noqa: E402

pb = gen_protos()
fw = pb.fw
F, D, I32, C64, C128 = fw.DT_FLOAT, fw.DT_DOUBLE, fw.DT_INT32, fw.DT_COMPLEX64, fw.DT_COMPLEX128


def write_model(d, c128=False):
    sm, mg, node = serve_graph()

    def ph(name, dtype, dims):
        n = node(name, "Placeholder", dtype=dtype)
        for s in dims:
            n.attr["shape"].shape.dim.add(size=s)

    def lengths(name, vals):
        n = node(name, "Const", dtype=I32)
        t = n.attr["value"].tensor
        t.dtype = I32
        t.tensor_shape.dim.add(size=len(vals))
        t.tensor_content = np.asarray(vals, dtype="<i4").tobytes()

    ph("x", F, [-1, 6, 16])
    ph("z", C64, [-1, 8])
    lengths("l16", [16])
    lengths("l420", [4, 20])
    node("spec", "RFFT", ["x", "l16"], Treal=F, Tcomplex=C64)
    node("mag", "ComplexAbs", ["spec"], T=C64, Tout=F)
    node("back", "IRFFT", ["spec", "l16"], Treal=F, Tcomplex=C64)
    node("negx", "Neg", ["x"], T=F)
    node("c", "Complex", ["x", "negx"], T=F, Tout=C64)
    node("f2", "FFT2D", ["c"], Tcomplex=C64)
    node("f2_re", "Real", ["f2"], T=C64, Tout=F)
    node("f2_im", "Imag", ["f2"], T=C64, Tout=F)
    node("f2c", "Conj", ["f2"], T=C64)
    node("pw", "Mul", ["f2", "f2c"], T=C64)
    node("p3c", "IFFT3D", ["pw"], Tcomplex=C64)
    node("p3", "Real", ["p3c"], T=C64, Tout=F)
    node("r2", "RFFT2D", ["x", "l420"], Treal=F, Tcomplex=C64)
    node("r2b", "IRFFT2D", ["r2", "l420"], Treal=F, Tcomplex=C64)
    node("spec128", "Cast", ["spec"], SrcT=C64, DstT=C128)
    node("mag64", "ComplexAbs", ["spec128"], T=C128, Tout=D)
    node("fz", "FFT", ["z"], Tcomplex=C128 if c128 else C64)
    node("zf", "AddV2", ["fz", "z"], T=C64)
    node("ri", "Cast", ["zf"], SrcT=C64, DstT=F)
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    for k, dt in (("x", F), ("z", C64)):
        sig.inputs[k].name = k + ":0"
        sig.inputs[k].dtype = dt
    outs = {"mag": F, "back": F, "f2_re": F, "f2_im": F, "p3": F, "r2": C64, "r2b": F,
            "mag64": D, "zf": C64, "ri": F}
    for k, dt in outs.items():
        sig.outputs[k].name = k + ":0"
        sig.outputs[k].dtype = dt
    # A complex output without complex inputs, for REST's refusal.
    cs = mg.signature_def["spectrum"]
    cs.method_name = "tensorflow/serving/predict"
    cs.inputs["x"].name = "x:0"
    cs.inputs["x"].dtype = F
    cs.outputs["r2"].name = "r2:0"
    cs.outputs["r2"].dtype = C64
    # A signature of real tensors only, for REST.
    rs = mg.signature_def["real"]
    rs.method_name = "tensorflow/serving/predict"
    rs.inputs["x"].name = "x:0"
    rs.inputs["x"].dtype = F
    for k in ("mag", "back", "f2_re", "p3", "r2b"):
        rs.outputs[k].name = k + ":0"
        rs.outputs[k].dtype = F
    os.makedirs(d)
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def reference(x, z):
    x = x.astype(np.float64)
    z = z.astype(np.complex128)
    spec = np.fft.rfft(x, 16)
    f2 = np.fft.fft2(x - 1j * x)
    y = np.zeros((x.shape[0], 4, 20))
    y[:, :, :16] = x[:, :4, :]
    r2 = np.fft.rfft2(y)
    zf = np.fft.fft(z) + z
    return {"mag": np.abs(spec), "back": x, "f2_re": f2.real, "f2_im": f2.imag,
            "p3": np.fft.ifftn(f2 * np.conj(f2), axes=(-3, -2, -1)).real if x.size else f2.real,
            "r2": r2,
            "r2b": np.fft.irfft2(r2, s=(4, 20)), "mag64": np.abs(spec), "zf": zf, "ri": zf.real}


def to_proto(a, dtype, content):
    t = fw.TensorProto(dtype=dtype)
    for s in a.shape:
        t.tensor_shape.dim.add(size=s)
    if dtype == C64:
        a = np.asarray(a, dtype="<c8")
        if content:
            t.tensor_content = a.tobytes()
        else:
            t.scomplex_val.extend(a.view("<f4").ravel().tolist())
    else:
        a = np.asarray(a, dtype="<f4")
        if content:
            t.tensor_content = a.tobytes()
        else:
            t.float_val.extend(a.ravel().tolist())
    return t


def from_proto(t):
    shape = tuple(d.size for d in t.tensor_shape.dim)
    kinds = {F: ("<f4", "float_val"), D: ("<f8", "double_val"), C64: ("<c8", "scomplex_val"),
             C128: ("<c16", "dcomplex_val")}
    np_dt, field = kinds[t.dtype]
    if t.tensor_content:
        return np.frombuffer(t.tensor_content, dtype=np_dt).reshape(shape)
    vals = np.asarray(getattr(t, field))
    if t.dtype in (C64, C128):
        vals = vals[0::2] + 1j * vals[1::2]
    return vals.astype(np_dt).reshape(shape)


def close(got, want, what, d, tol=1e-4):
    want = np.asarray(want)
    err = np.max(np.abs(got - want)) if want.size else 0.0
    scale = 1 + (np.max(np.abs(want)) if want.size else 0.0)
    check(got.shape == want.shape and err <= tol * scale,
          "%s: shape %s (want %s), max error %g (scale %g)" % (what, got.shape, want.shape, err, scale),
          d)


def rest(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


def main():
    rng = np.random.default_rng(29)
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = os.path.join(tmp, "sig"), os.path.join(tmp, "bad")
        write_model(os.path.join(good, "1"))
        write_model(os.path.join(bad, "1"), c128=True)
        rport = free_port()
        d = Daemon(["--model_name=sig", "--model_base_path=" + good, "--rest_api_port=%d" % rport])
        try:
            d.wait_health()
            for b, content in ((2, False), (3, True), (0, True)):
                x = rng.uniform(-1, 1, size=(b, 6, 16)).astype(np.float32)
                z = (rng.uniform(-1, 1, size=(b, 8)) + 1j * rng.uniform(-1, 1, size=(b, 8))).astype(
                    np.complex64)
                req = pb.tfs.PredictRequest()
                req.model_spec.name = "sig"
                req.inputs["x"].CopyFrom(to_proto(x, F, content))
                req.inputs["z"].CopyFrom(to_proto(z, C64, content))
                resp = d.stub.Predict(req, timeout=60)
                want = reference(x, z)
                for k, w in want.items():
                    close(from_proto(resp.outputs[k]), w, "B=%d %s" % (b, k), d)
                check(resp.outputs["r2"].dtype == C64 and resp.outputs["mag64"].dtype == D,
                      "output dtypes %s %s" % (resp.outputs["r2"].dtype, resp.outputs["mag64"].dtype), d)
                print("gRPC B=%d (%s): %d outputs match numpy.fft" % (
                    b, "tensor_content" if content else "typed values", len(want)), flush=True)

            x = rng.uniform(-1, 1, size=(2, 6, 16)).astype(np.float32)
            st, body = rest(rport, "/v1/models/sig:predict",
                            {"signature_name": "real", "inputs": {"x": x.tolist()}})
            check(st == 200, "REST real signature: %d %s" % (st, body), d)
            outs = json.loads(body)["outputs"]
            want = reference(x, np.zeros((2, 8), np.complex64))
            for k in ("mag", "back", "f2_re", "p3", "r2b"):
                close(np.asarray(outs[k], dtype=np.float64), want[k], "REST %s" % k, d)
            print("REST: the real signature matches numpy.fft", flush=True)
            st, body = rest(rport, "/v1/models/sig:predict",
                            {"inputs": {"x": x.tolist(), "z": [[0.0] * 8] * 2}})
            check(st == 400 and "DT_COMPLEX64" in body,
                  "REST with a complex input: want 400 naming DT_COMPLEX64, got %d %s" % (st, body), d)
            print("REST with a complex input: %d %s" % (st, body.strip()[:160]), flush=True)
            st, body = rest(rport, "/v1/models/sig:predict",
                            {"signature_name": "spectrum", "inputs": {"x": x.tolist()}})
            check(st == 400 and "DT_COMPLEX64" in body and "r2" in body,
                  "REST with a complex output: want 400 naming r2 and DT_COMPLEX64, got %d %s"
                  % (st, body), d)
            print("REST with a complex output: %d %s" % (st, body.strip()[:160]), flush=True)
        finally:
            d.stop()
            d.close()

        p = subprocess.run([os.environ["DCMSERVE"], "check", bad], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        check(p.returncode == 1 and "does not serve" in p.stdout
              and "node 'fz' (FFT): Tcomplex DT_COMPLEX128 is not implemented" in p.stdout,
              "check on the complex128 FFT model: rc %d\n%s" % (p.returncode, p.stdout))
        d = Daemon(["--model_name=bad", "--model_base_path=" + bad])
        try:
            req = pb.tfs.GetModelStatusRequest()
            req.model_spec.name = "bad"
            deadline = time.monotonic() + 60
            msg = ""
            while time.monotonic() < deadline:
                log = d.log()
                if "Tcomplex DT_COMPLEX128" in log:
                    msg = [ln for ln in log.splitlines() if "Tcomplex" in ln][0]
                    break
                time.sleep(0.2)
            check("'fz'" in msg and "(FFT)" in msg and "KissFFT" in msg,
                  "load of a complex128 FFT: want a line naming node fz, FFT and Tcomplex; got %r\n%s"
                  % (msg, d.log_tail()), d)
            print("complex128 FFT refused at load: %s" % msg.strip(), flush=True)
        finally:
            d.stop()
            d.close()
    print("it_fft: ok")


if __name__ == "__main__":
    main()
