"""it_serve_requests: finding 7 of the hostile-clients issue (smaller ones)
and patient data in error replies.

  1. A PredictRequest carrying model_spec twice is legal protobuf (the copies
     merge); it answers as the merged request says (the reference is Python
     protobuf's own parse of the same bytes). protobuf-c 1.4 alone refuses it.
     The same for GetModelMetadata.
  2. An unsupported dtype (DT_VARIANT, DT_RESOURCE) is INVALID_ARGUMENT, as TF
     Serving; DT_FLOAT_REF and the other _REF dtypes are refused as inputs.
  3. File size caps, checked with stat before a byte is read: a 2 GB sparse
     saved_model.pb (dcmserve show and the daemon's load), a 2 GB sparse ONNX
     file (import-onnx) and a 2 GB sparse variables.index; the process's peak
     RSS stays small.
  4. DICOM errors caused next to patient-identifying elements: the reply may
     quote a bad RescaleSlope, never PatientName / PatientID / a private
     value, and the daemon's log (at debug level) holds none of them."""
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, SRC, WAIT, Daemon, check, float_tensor,  # noqa: E402
                          gen_protos, tensor_values)

pb = gen_protos()
DEMO = os.path.join(SRC, "models", "demo_ct")
try:
    import pydicom.data
    CT_SMALL = os.path.join(os.path.dirname(pydicom.data.__file__), "test_files", "CT_small.dcm")
except ImportError:
    CT_SMALL = "CT_small.dcm (pydicom is not installed)"
SPARSE = 2_000_000_000
RSS_SMALL = 200 << 20


def raw(d, path):
    return d.channel.unary_unary(path, request_serializer=None, response_deserializer=None)


def expect_code(d, what, fn, code):
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, "%s: want %s, got %s %r" % (what, code, e.code(), e.details()), d)
        return e.details() or ""
    check(False, "%s: accepted" % what, d)


def model_spec_twice(d):
    x = [1.0, 2.0, 5.0]
    first = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="nosuch"))
    first.inputs["x"].CopyFrom(float_tensor(x, [3, 1]))
    bodies = [
        first.SerializeToString() + pb.tfs.PredictRequest(
            model_spec=pb.tfs.ModelSpec(name="hpt")).SerializeToString(),
        pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt")).SerializeToString()
        + pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(signature_name="serving_default"))
        .SerializeToString() + first.SerializeToString()[len(first.model_spec.SerializeToString()) + 2:],
    ]
    for i, body in enumerate(bodies):
        ref = pb.tfs.PredictRequest.FromString(body)  # what protobuf makes of it
        r = pb.tfs.PredictResponse.FromString(
            raw(d, "/tensorflow.serving.PredictionService/Predict")(body, timeout=20))
        want = list(np.asarray(tensor_values(ref.inputs["x"]), np.float32) * np.float32(0.5)
                    + np.float32(2))
        check(tensor_values(r.outputs["y"]) == want, "model_spec twice #%d: %s" % (i, r), d)
        check(r.model_spec.name == ref.model_spec.name, "model_spec twice #%d: answered for %r"
              % (i, r.model_spec.name), d)
    body = (pb.tfs.GetModelMetadataRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
            .SerializeToString() + pb.tfs.GetModelMetadataRequest(
                model_spec=pb.tfs.ModelSpec(signature_name="x"),
                metadata_field=["signature_def"]).SerializeToString())
    r = pb.tfs.GetModelMetadataResponse.FromString(
        raw(d, "/tensorflow.serving.PredictionService/GetModelMetadata")(body, timeout=20))
    check(r.model_spec.name == "hpt", "GetModelMetadata with model_spec twice: %s" % r.model_spec, d)


def dtypes(d):
    fw = pb.fw
    for code, words in ((21, ["DT_VARIANT", "not supported"]), (20, ["DT_RESOURCE", "not supported"]),
                        (fw.DT_FLOAT + 100, ["REF", "DT_FLOAT"]), (fw.DT_HALF + 100, ["REF"]),
                        (fw.DT_STRING + 100, ["REF"])):
        q = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
        t = float_tensor([1.0, 2.0, 5.0], [3, 1])
        t.dtype = code
        q.inputs["x"].CopyFrom(t)
        msg = expect_code(d, "dtype %d" % code, lambda: d.stub.Predict(q, timeout=20),
                          grpc.StatusCode.INVALID_ARGUMENT)
        for w in words:
            check(w in msg, "dtype %d: the message should name %r: %r" % (code, w, msg), d)


def child_peak():
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def sparse(path, tail=b""):
    with open(path, "wb") as f:
        f.truncate(SPARSE)
        if tail:
            f.seek(SPARSE - len(tail))
            f.write(tail)


def file_caps():
    with tempfile.TemporaryDirectory() as t:
        v = os.path.join(t, "m", "1")
        os.makedirs(v)
        sparse(os.path.join(v, "saved_model.pb"))
        p = subprocess.run([DCMSERVE, "show", "--dir", v, "--all"], capture_output=True, text=True,
                           timeout=60)
        check(p.returncode > 0 and "not read" in p.stderr, "show on a 2 GB saved_model.pb: rc=%d %r"
              % (p.returncode, p.stderr[-300:]))
        sparse(os.path.join(t, "big.onnx"))
        p = subprocess.run([DCMSERVE, "import-onnx", os.path.join(t, "big.onnx"), "--output_dir",
                            os.path.join(t, "out", "1")], capture_output=True, text=True, timeout=60)
        check(p.returncode > 0 and "not read" in p.stderr, "import-onnx on a 2 GB file: rc=%d %r"
              % (p.returncode, p.stderr[-300:]))
        check(child_peak() < RSS_SMALL, "a 2 GB file was read: peak RSS of a child %d" % child_peak())
        w = os.path.join(t, "w", "123")
        shutil.copytree(os.path.join(HPT, "00000123"), w)
        # An SSTable's footer magic last, so the manager takes the index as written.
        sparse(os.path.join(w, "variables", "variables.index"),
               bytes([0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb]))
        for base, words in ((os.path.join(t, "m"), "not read"), (os.path.join(t, "w"), "larger than the limit")):
            d = Daemon(["--model_name=big", "--model_base_path=" + base])
            try:
                end = time.monotonic() + WAIT
                while words not in d.log() and time.monotonic() < end and d.proc.poll() is None:
                    time.sleep(0.1)
                check(words in d.log(), "the load should say %r" % words, d)
                with open("/proc/%d/status" % d.proc.pid) as f:
                    hwm = [int(x.split()[1]) * 1024 for x in f if x.startswith("VmHWM")][0]
                check(hwm < RSS_SMALL, "the daemon read a 2 GB file: VmHWM %d" % hwm, d)
            finally:
                d.close()


def phi_files():
    """CT_small with identifying values, each made to fail near them."""
    import pydicom
    out = []
    base = pydicom.dcmread(CT_SMALL)
    base.PatientName = "DOE^JANE^PHINAME"
    base.PatientID = "PHIID98765"
    base.add_new(0x00091001, "LO", "PHIPRIVATE")
    ds = base.copy()
    ds.RescaleSlope = "9.87654"
    b = io.BytesIO()
    ds.save_as(b, write_like_original=False)
    # A bad non-identifying value (pydicom will not write one): may be quoted.
    data = b.getvalue().replace(b"9.87654", b"abcdefg")
    out.append(("non-numeric RescaleSlope", data, "abcdefg"))
    b = io.BytesIO()
    base.save_as(b, write_like_original=False)
    data = b.getvalue()
    cut = data.index(b"PHINAME") + 3  # ends inside PatientName's value
    out.append(("file ending inside PatientName", data[:cut], None))
    at = data.index(b"PHIID98765")
    bad = bytearray(data)
    bad[at - 2:at] = (0xFFF0).to_bytes(2, "little")  # PatientID's length runs past the end
    out.append(("PatientID length past the end", bytes(bad), None))
    return out


def phi(d):
    for what, data, quoted in phi_files():
        q = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="demo_ct"))
        t = pb.fw.TensorProto(dtype=pb.fw.DT_STRING, string_val=[data])
        t.tensor_shape.dim.add(size=1)
        q.inputs["dicom"].CopyFrom(t)
        try:
            d.stub.Predict(q, timeout=30)
            msg = None
        except grpc.RpcError as e:
            msg = e.details() or ""
        check(msg is not None, "%s: accepted" % what, d)
        for secret in ("PHINAME", "DOE^JANE", "PHIID", "PHIPRIVATE"):
            check(secret not in msg, "%s: the reply quotes %r: %r" % (what, secret, msg), d)
            check(secret not in d.log(), "%s: the log holds %r" % (what, secret), d)
        if quoted:
            check(quoted in msg, "%s: the reply should quote %r: %r" % (what, quoted, msg), d)
        print("it_serve_requests: %s -> %r" % (what, msg[:200]))


def main():
    if not os.path.exists(CT_SMALL):
        print("it_serve_requests: skipped, %s (python3-pydicom's test files) is missing" % CT_SMALL)
        sys.exit(77)
    file_caps()
    cfg = os.path.join(os.environ.get("TMPDIR", "/tmp"), "it_serve_requests_%d.cfg" % os.getpid())
    with open(cfg, "w") as f:
        f.write('model_config_list { config { name: "hpt" base_path: "%s" model_platform: '
                '"tensorflow" } config { name: "demo_ct" base_path: "%s" model_platform: '
                '"tensorflow" } }\n' % (HPT, DEMO))
    d = Daemon(["--model_config_file=" + cfg, "--log_level=debug"])
    try:
        d.wait_health()
        model_spec_twice(d)
        dtypes(d)
        phi(d)
        check(d.proc.poll() is None, "the daemon exited", d)
    finally:
        d.close()
        os.unlink(cfg)
    print("4 passed, 0 failed")


if __name__ == "__main__":
    main()
