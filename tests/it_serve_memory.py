"""it_serve_memory: requests that cost the sender nothing and the daemon
everything (finding 2 of the hostile-clients issue).

Each case is sent to one daemon serving half_plus_two ("hpt", x: float (-1, 1))
and the DICOM demo model ("demo_ct", dicom: string (-1)). Each must be refused
with the status named below and a message naming the limit; after each a
valid Predict still answers; the daemon's peak RSS (VmHWM in
/proc/PID/status) stays below 1 GiB with the default limits
(--max_message_bytes 256 MiB, --max_request_memory_bytes 1 GiB).

  1. ModelInfer FP32 [1000000000] with 4 raw bytes          INVALID_ARGUMENT
  2. Predict [200000000, 1] with one float_val (broadcast)  RESOURCE_EXHAUSTED
  3. Predict [20000, 10000] with 4 bytes of tensor_content  INVALID_ARGUMENT
  4. Predict with 1 MB of empty `inputs` map entries        RESOURCE_EXHAUSTED
  5. one 39 KB DICOM (CT_small) broadcast to [10000]        RESOURCE_EXHAUSTED
  6. 10^6 empty strings                                     RESOURCE_EXHAUSTED
  7. a 1 MB deflate bomb (Deflated Explicit VR LE, 1 GiB
     inflated), 8 copies in one request                     INVALID_ARGUMENT
  8. a gzip-compressed request that inflates to 512 MiB
     (daemon limit 256 MiB; sent with grpc.Compression.Gzip) RESOURCE_EXHAUSTED

The peak is reset before each case (/proc/PID/clear_refs), so each case is
held to the bound on its own. Under ASan (DCM_ASAN=1, or a build-asan binary) the shadow memory and the
quarantine of freed blocks (256 MiB) add to RSS: the peak bound there is 2 GiB
and the per-case growth is not checked (measured: up to 1.3 GiB peak, the
deflate bombs). Against the binary from before this change, run with
DCM_DAEMON_WRAPPER="prlimit --as=2147483648", every case fails: a wrong status
or an out-of-memory message instead of the limit, 762 MiB of growth for
[20000, 10000], and the gzip request kills the daemon (docs/security.md)."""
import os
import struct
import sys
import zlib

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, SRC, Daemon, check, float_tensor, gen_protos,  # noqa: E402
                          tensor_values)

pb = gen_protos()
DEMO = os.path.join(SRC, "models", "demo_ct")
try:
    import pydicom.data
    CT_SMALL = os.path.join(os.path.dirname(pydicom.data.__file__), "test_files", "CT_small.dcm")
except ImportError:
    CT_SMALL = "CT_small.dcm (pydicom is not installed)"
GIB = 1 << 30
ASAN = bool(os.environ.get("DCM_ASAN")) or "asan" in DCMSERVE
BOUND = 2 * GIB if ASAN else GIB
# Growth of RSS a case may cause (peak minus RSS before it): cases refused
# before their memory is allocated get SMALL (protobuf-c's unpack of what was
# sent, DICOM headers); the others the limit they are held to.
SMALL = 64 << 20


def reset_peak(d):
    """Resets VmHWM to the current RSS (Linux >= 4.0), so each case's peak is its own."""
    try:
        with open("/proc/%d/clear_refs" % d.proc.pid, "w") as f:
            f.write("5")
    except OSError:
        pass


def status_kb(d, key):
    with open("/proc/%d/status" % d.proc.pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss(d):
    return status_kb(d, "VmHWM")


def still_serves(d, what):
    check(d.proc.poll() is None, "%s: the daemon exited (rc=%s)" % (what, d.proc.returncode), d)
    req = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    req.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))
    got = tensor_values(d.stub.Predict(req, timeout=30).outputs["y"])
    check(got == [2.5, 3.0, 4.5], "%s: the next Predict gave %s" % (what, got), d)


def expect(d, what, call, code, words):
    try:
        call()
    except grpc.RpcError as e:
        msg = e.details() or ""
        check(e.code() == code, "%s: want %s, got %s %r" % (what, code, e.code(), msg), d)
        for w in words:
            check(w in msg, "%s: the message should name %r: %r" % (what, w, msg), d)
        return msg
    check(False, "%s: accepted" % what, d)


def raw(d, path):
    return d.channel.unary_unary(path, request_serializer=None, response_deserializer=None)


def deflate_bomb(inflated):
    """A Part 10 file in Deflated Explicit VR Little Endian whose data set is one
    OB element of `inflated` zero bytes, deflated (about 1 MB per GiB)."""
    def el(tag_g, tag_e, vr, val):
        if vr in (b"OB", b"UN"):
            return struct.pack("<HH2sHI", tag_g, tag_e, vr, 0, len(val)) + val
        return struct.pack("<HH2sH", tag_g, tag_e, vr, len(val)) + val
    ts = b"1.2.840.10008.1.2.1.99\0"
    meta = el(2, 1, b"OB", b"\0\1") + el(2, 0x10, b"UI", ts)
    meta = el(2, 0, b"UL", struct.pack("<I", len(meta))) + meta
    head = struct.pack("<HH2sHI", 0x7FE0, 0x10, b"OB", 0, inflated)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [z.compress(head)]
    chunk = bytes(1 << 20)
    for _ in range(inflated >> 20):
        out.append(z.compress(chunk))
    out.append(z.flush())
    return b"\0" * 128 + b"DICM" + meta + b"".join(out)


def cases(d):
    infer = raw(d, "/inference.GRPCInferenceService/ModelInfer")
    predict = raw(d, "/tensorflow.serving.PredictionService/Predict")
    P = pb.tfs.PredictRequest
    fw = pb.fw

    r = pb.ks.ModelInferRequest(model_name="hpt")
    r.inputs.add(name="x", datatype="FP32", shape=[1000000000])
    r.raw_input_contents.append(b"\0\0\x80\x3f")
    yield ("ModelInfer FP32 [1000000000] with 4 raw bytes (%d bytes)" % r.ByteSize(),
           lambda: infer(r.SerializeToString(), timeout=60), grpc.StatusCode.INVALID_ARGUMENT,
           ["4 bytes", "4000000000"], SMALL)

    q = P(model_spec=pb.tfs.ModelSpec(name="hpt"))
    q.inputs["x"].CopyFrom(float_tensor([1.0], [200000000, 1]))
    yield ("Predict [200000000, 1] broadcast from one float_val (%d bytes)" % q.ByteSize(),
           lambda: predict(q.SerializeToString(), timeout=400), grpc.StatusCode.RESOURCE_EXHAUSTED,
           ["--max_request_memory_bytes", str(GIB)], GIB)

    q2 = P(model_spec=pb.tfs.ModelSpec(name="hpt"))
    t = fw.TensorProto(dtype=fw.DT_FLOAT, tensor_content=b"\0\0\x80\x3f")
    t.tensor_shape.dim.add(size=20000)
    t.tensor_shape.dim.add(size=10000)
    q2.inputs["x"].CopyFrom(t)
    yield ("Predict [20000, 10000] with 4 bytes", lambda: predict(q2.SerializeToString(), timeout=60),
           grpc.StatusCode.INVALID_ARGUMENT, ["4 bytes", "800000000"], SMALL)

    spec = P(model_spec=pb.tfs.ModelSpec(name="hpt")).SerializeToString()
    empties = spec + b"\x12\x00" * (1 << 19)  # PredictRequest.inputs = {} x 524288: 1 MiB
    yield ("Predict with 1 MiB of empty inputs entries", lambda: predict(empties, timeout=60),
           grpc.StatusCode.RESOURCE_EXHAUSTED, ["fields", str(1 << 18)], SMALL)

    with open(CT_SMALL, "rb") as f:
        ct = f.read()
    q3 = P(model_spec=pb.tfs.ModelSpec(name="demo_ct"))
    t = fw.TensorProto(dtype=fw.DT_STRING, string_val=[ct])
    t.tensor_shape.dim.add(size=10000)
    q3.inputs["dicom"].CopyFrom(t)
    yield ("a %d-byte DICOM broadcast to [10000]" % len(ct),
           lambda: predict(q3.SerializeToString(), timeout=400), grpc.StatusCode.RESOURCE_EXHAUSTED,
           ["--max_request_memory_bytes", "DICOM"], SMALL)

    q4 = P(model_spec=pb.tfs.ModelSpec(name="demo_ct"))
    t = fw.TensorProto(dtype=fw.DT_STRING, string_val=[b""] * 1000000)
    t.tensor_shape.dim.add(size=1000000)
    q4.inputs["dicom"].CopyFrom(t)
    yield ("10^6 empty strings", lambda: predict(q4.SerializeToString(), timeout=400),
           grpc.StatusCode.RESOURCE_EXHAUSTED, ["fields"], SMALL)

    bomb = deflate_bomb(GIB)
    q5 = P(model_spec=pb.tfs.ModelSpec(name="demo_ct"))
    t = fw.TensorProto(dtype=fw.DT_STRING, string_val=[bomb] * 8)
    t.tensor_shape.dim.add(size=8)
    q5.inputs["dicom"].CopyFrom(t)
    yield ("8 deflate bombs of %d bytes (1 GiB inflated each)" % len(bomb),
           lambda: predict(q5.SerializeToString(), timeout=400), grpc.StatusCode.INVALID_ARGUMENT,
           ["inflates past", str(256 << 20)], GIB)

    q6 = P(model_spec=pb.tfs.ModelSpec(name="hpt"))
    t = fw.TensorProto(dtype=fw.DT_FLOAT, tensor_content=bytes(512 << 20))
    t.tensor_shape.dim.add(size=128 << 20)
    t.tensor_shape.dim.add(size=1)
    q6.inputs["x"].CopyFrom(t)
    body = q6.SerializeToString()
    del q6, t
    yield ("a gzip-compressed PredictRequest inflating to %d bytes" % len(body),
           lambda: predict(body, timeout=400, compression=grpc.Compression.Gzip),
           grpc.StatusCode.RESOURCE_EXHAUSTED, [str(256 << 20)], (256 << 20) + SMALL)


def main():
    if not os.path.exists(CT_SMALL):
        print("it_serve_memory: skipped, %s (python3-pydicom's test files) is missing" % CT_SMALL)
        sys.exit(77)
    cfg = os.path.join(os.environ.get("TMPDIR", "/tmp"), "it_serve_memory_%d.cfg" % os.getpid())
    with open(cfg, "w") as f:
        f.write('model_config_list { config { name: "hpt" base_path: "%s" model_platform: '
                '"tensorflow" } config { name: "demo_ct" base_path: "%s" model_platform: '
                '"tensorflow" } }\n' % (HPT, DEMO))
    # DCM_DAEMON_WRAPPER, e.g. "prlimit --as=2147483648", runs the daemon under a
    # memory limit (not under ASan, whose shadow memory needs terabytes of
    # address space).
    wrapper = os.environ.get("DCM_DAEMON_WRAPPER", "").split() or None
    d = Daemon(["--model_config_file=" + cfg], wrapper=wrapper)
    n = 0
    try:
        d.wait_health()
        still_serves(d, "start")
        print("it_serve_memory: peak RSS after start %.0f MiB" % (peak_rss(d) / 2**20))
        for what, call, code, words, grow in cases(d):
            reset_peak(d)
            before = status_kb(d, "VmRSS")
            msg = expect(d, what, call, code, words)
            still_serves(d, what)
            peak = peak_rss(d)
            print("it_serve_memory: %s -> %s %r; peak RSS %.0f MiB (+%.0f MiB)"
                  % (what, code.name, msg[:160], peak / 2**20, (peak - before) / 2**20))
            check(peak < BOUND, "%s: peak RSS %d bytes, the bound is %d" % (what, peak, BOUND), d)
            check(ASAN or peak - before < grow, "%s: RSS grew by %d bytes, the bound is %d"
                  % (what, peak - before, grow), d)
            n += 1
    finally:
        d.close()
        os.unlink(cfg)
    print("%d passed, 0 failed" % n)


if __name__ == "__main__":
    main()
