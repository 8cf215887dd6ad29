"""Helpers for the dcmserve integration tests (not a test itself).

Generates Python message classes from the repo's .proto files with
`protoc --python_out` into a temporary folder at test time, makes grpcio
stubs with channel.unary_unary / unary_stream, and starts the real daemon
($DCMSERVE) on a free 127.0.0.1 port.
"""
import collections
import os
import random
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# Third-party data that is not in the repo (see need_shared).
SHARED = os.environ.get("DCM_SHARED", os.path.join(SRC, "..", "shared"))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
# TensorFlow Serving's test SavedModels, committed under tests/data/savedmodels.
MODELS = os.path.join(SRC, "tests", "data", "savedmodels")
HPT = os.path.join(MODELS, "saved_model_half_plus_two_cpu")
TWO_VERSIONS = os.path.join(MODELS, "saved_model_half_plus_two_2_versions")

# Exit status of a skipped test (ctest's SKIP_RETURN_CODE in CMakeLists.txt).
SKIP_RC = 77
# How long a daemon may take to say where it listens, and then to become
# SERVING, before its test fails with the tail of its log. A limit for a
# daemon that is stuck, not an expectation: on a loaded 2-core machine (ctest
# -j2 beside busy loops, sanitizer builds) a start that takes 1 s alone can
# take tens of seconds, and the wait ends as soon as the condition holds.
START_TIMEOUT = 120.0
# The same for any other condition a test waits for (a reload, a log line, a
# drain): the limit after which the test gives up, never a bound it asserts.
WAIT = START_TIMEOUT
LOG_TAIL_LINES = 20


def need_shared(rel):
    """Returns $DCM_SHARED/<rel>; when it does not exist, prints one SKIP line
    and exits with SKIP_RC."""
    path = os.path.join(SHARED, rel)
    if not os.path.exists(path):
        print("SKIP: ../shared/%s not found" % rel, flush=True)
        sys.exit(SKIP_RC)
    return path

_GEN = None


def gen_protos():
    """Compiles proto/*.proto for Python once per process; returns a namespace."""
    global _GEN
    if _GEN is not None:
        return _GEN
    out = tempfile.mkdtemp(prefix="dcm_pb_")
    protos = ["tf_framework.proto", "tf_savedmodel.proto", "tf_serving.proto",
              "kserve.proto", "health.proto"]
    subprocess.run(["protoc", "--python_out=" + out, "-I", os.path.join(SRC, "proto")] + protos,
                   check=True)
    sys.path.insert(0, out)
    import tf_framework_pb2, tf_savedmodel_pb2, tf_serving_pb2, kserve_pb2, health_pb2  # noqa

    class NS:
        pass
    ns = NS()
    ns.fw, ns.sm, ns.tfs, ns.ks, ns.health = (tf_framework_pb2, tf_savedmodel_pb2,
                                             tf_serving_pb2, kserve_pb2, health_pb2)
    ns.dir = out
    _GEN = ns
    return ns


class Stubs:
    """Callables per method: stubs.Predict(req, timeout=...)."""

    def __init__(self, channel):
        pb = gen_protos()
        t, k, h = pb.tfs, pb.ks, pb.health
        table = [
            ("/tensorflow.serving.PredictionService/Predict", "Predict", t.PredictRequest, t.PredictResponse),
            ("/tensorflow.serving.PredictionService/GetModelMetadata", "GetModelMetadata",
             t.GetModelMetadataRequest, t.GetModelMetadataResponse),
            ("/tensorflow.serving.PredictionService/Classify", "Classify", t.ClassificationRequest,
             t.ClassificationResponse),
            ("/tensorflow.serving.PredictionService/Regress", "Regress", t.RegressionRequest, t.RegressionResponse),
            ("/tensorflow.serving.PredictionService/MultiInference", "MultiInference", t.MultiInferenceRequest,
             t.MultiInferenceResponse),
            ("/tensorflow.serving.ModelService/GetModelStatus", "GetModelStatus", t.GetModelStatusRequest,
             t.GetModelStatusResponse),
            ("/tensorflow.serving.ModelService/HandleReloadConfigRequest", "HandleReloadConfigRequest",
             t.ReloadConfigRequest, t.ReloadConfigResponse),
            ("/inference.GRPCInferenceService/ServerLive", "ServerLive", k.ServerLiveRequest, k.ServerLiveResponse),
            ("/inference.GRPCInferenceService/ServerReady", "ServerReady", k.ServerReadyRequest,
             k.ServerReadyResponse),
            ("/inference.GRPCInferenceService/ModelReady", "ModelReady", k.ModelReadyRequest, k.ModelReadyResponse),
            ("/inference.GRPCInferenceService/ServerMetadata", "ServerMetadata", k.ServerMetadataRequest,
             k.ServerMetadataResponse),
            ("/inference.GRPCInferenceService/ModelMetadata", "ModelMetadata", k.ModelMetadataRequest,
             k.ModelMetadataResponse),
            ("/inference.GRPCInferenceService/ModelInfer", "ModelInfer", k.ModelInferRequest, k.ModelInferResponse),
            ("/grpc.health.v1.Health/Check", "Check", h.HealthCheckRequest, h.HealthCheckResponse),
        ]
        for path, name, req, resp in table:
            setattr(self, name, channel.unary_unary(path, request_serializer=req.SerializeToString,
                                                    response_deserializer=resp.FromString))
        self.Watch = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                          request_serializer=h.HealthCheckRequest.SerializeToString,
                                          response_deserializer=h.HealthCheckResponse.FromString)


def channel(port, max_recv=-1):
    return grpc.insecure_channel("127.0.0.1:%d" % port,
                                 options=[("grpc.max_receive_message_length", max_recv),
                                          ("grpc.max_send_message_length", -1)])


class Daemon:
    """The real dcmserve on 127.0.0.1 with --port=0; stderr goes to a log file."""

    def __init__(self, args, env=None, wrapper=None, start_timeout=START_TIMEOUT):
        self.logf = tempfile.NamedTemporaryFile(prefix="dcmserve_", suffix=".log", delete=False)
        cmd = (wrapper or []) + [DCMSERVE, "serve", "--port=0", "--bind_address=127.0.0.1"] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.logf, env=env)
        line = self._first_line(start_timeout)
        if "listening on" not in line:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            msg = "daemon did not say where it listens within %gs (rc=%s): %r\n%s" % (
                start_timeout, self.proc.returncode, line, self.log_tail())
            self.close()
            raise RuntimeError(msg)
        self.port = int(line.rsplit(":", 1)[1])
        self.channel = channel(self.port)
        self.stub = Stubs(self.channel)
        rest = rest_port_of(args)
        if rest:
            self._wait_rest(rest, start_timeout)

    def _wait_rest(self, rest, timeout):
        """The daemon opens its REST port after printing the gRPC one: waits
        until its log says REST listens (or why not), so that no test's first
        REST call can find the port closed."""
        end = time.monotonic() + timeout
        while True:
            log = self.log()
            if "REST listening on" in log:
                return
            why = [ln for ln in log.splitlines() if "REST: " in ln]
            if why or self.proc.poll() is not None or time.monotonic() > end:
                hint = ""
                if any("in use" in ln for ln in why):
                    hint = (" (port %d was taken by another process after free_port() found it "
                            "free)" % rest)
                msg = "REST port %d did not open%s\n%s" % (rest, hint, self.log_tail())
                self.close()
                raise RuntimeError(msg)
            time.sleep(0.02)

    def _first_line(self, timeout):
        """The daemon's first stdout line, or what came of it within timeout s."""
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        buf = b""
        while not buf.endswith(b"\n"):
            left = end - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            b = os.read(fd, 1)
            if not b:
                break
            buf += b
        return buf.decode(errors="replace")

    def log(self):
        with open(self.logf.name, errors="replace") as f:
            return f.read()

    def log_tail(self, lines=LOG_TAIL_LINES):
        tail = collections.deque(self.log().splitlines(), maxlen=lines)
        return "--- last %d lines of the daemon's log ---\n%s\n--- end of the daemon's log ---" % (
            len(tail), "\n".join(tail))

    def wait_health(self, want=1, service="", timeout=START_TIMEOUT):
        """Waits until health of `service` is `want`, for at most timeout s in
        all; raises with the tail of the daemon's log when it is not, or when
        the daemon exits first."""
        pb = gen_protos()
        deadline = time.monotonic() + timeout
        last = None
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("daemon exited (rc=%s) while health of %r was %s, wanted %s\n%s"
                                     % (self.proc.returncode, service, last, want, self.log_tail()))
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                last = self.stub.Check(pb.health.HealthCheckRequest(service=service),
                                       timeout=min(2.0, left)).status
                if last == want:
                    return
            except grpc.RpcError as e:
                last = e.code()
            time.sleep(0.02)
        raise AssertionError("health of %r stayed %s, wanted %s, for %gs\n%s"
                             % (service, last, want, timeout, self.log_tail()))

    def stop(self, sig=signal.SIGTERM, timeout=WAIT):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            raise AssertionError("daemon did not exit within %ss\n%s" % (timeout, self.log()))
        self.channel.close()
        self.proc.stdout.close()
        return rc

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(self.logf.name)
        except OSError:
            pass


def float_tensor(values, shape, content=False):
    """DT_FLOAT TensorProto in float_val, or in tensor_content when content=True."""
    import numpy as np
    pb = gen_protos()
    t = pb.fw.TensorProto(dtype=pb.fw.DT_FLOAT)
    for d in shape:
        t.tensor_shape.dim.add(size=d)
    if content:
        t.tensor_content = np.asarray(values, dtype="<f4").tobytes()
    else:
        t.float_val.extend(values)
    return t


def serve_graph():
    """A new SavedModel with one "serve" meta graph: (sm, mg, node), where
    node(name, op, inputs=(), **types) adds a NodeDef with type attrs."""
    pb = gen_protos()
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def

    def node(name, op, inputs=(), **types):
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        for k, v in types.items():
            n.attr[k].type = v
        return n
    return sm, mg, node


def tensor_values(tp):
    """Values of a DT_FLOAT TensorProto (either encoding) as a list."""
    import numpy as np
    if tp.tensor_content:
        return list(np.frombuffer(tp.tensor_content, dtype="<f4"))
    return list(tp.float_val)


def dicom_request(files, model="demo_ct", key="dicom"):
    """PredictRequest of a DT_STRING [len(files)] input: each file's bytes."""
    pb = gen_protos()
    r = pb.tfs.PredictRequest()
    r.model_spec.name = model
    t = r.inputs[key]
    t.dtype = pb.fw.DT_STRING
    t.tensor_shape.dim.add(size=len(files))
    t.string_val.extend(files)
    return r


def shifted_dicoms(path, n, step, offset):
    """n different DICOM files: path's file with its stored pixels shifted by
    step * k + offset for file k (clipped to the pixel type)."""
    import numpy as np
    import pydicom
    from io import BytesIO
    out = []
    for k in range(n):
        ds = pydicom.dcmread(path)
        arr = ds.pixel_array.astype(np.int32) + step * k + offset
        info = np.iinfo(ds.pixel_array.dtype)
        ds.PixelData = np.clip(arr, info.min, info.max).astype(ds.pixel_array.dtype).tobytes()
        buf = BytesIO()
        ds.save_as(buf)
        out.append(buf.getvalue())
    return out


def stub_compilers():
    """The PROTOC modes scripts/gen_python_stubs.sh can use here: Debian's protoc
    + grpc_python_plugin, and python3-grpc-tools' protoc."""
    out = []
    if shutil.which("protoc") and shutil.which("grpc_python_plugin"):
        out.append("protoc")
    if subprocess.run(["/usr/bin/python3", "-c", "import grpc_tools.protoc"],
                      capture_output=True).returncode == 0:
        out.append("grpc_tools")
    return out


def hpt_rest_predict(rest, timeout=10):
    """REST :predict of half_plus_two (model "hpt") with x = 1.0: (status, body)."""
    import http.client
    import json
    c = http.client.HTTPConnection("127.0.0.1", rest, timeout=timeout)
    try:
        c.request("POST", "/v1/models/hpt:predict", json.dumps({"instances": [1.0]}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def hpt_grpc_predict(d, timeout=10):
    """gRPC Predict of half_plus_two (model "hpt") with x = [[1.0]]: the y values."""
    pb = gen_protos()
    req = pb.tfs.PredictRequest()
    req.model_spec.name = "hpt"
    req.inputs["x"].dtype = pb.fw.DT_FLOAT
    req.inputs["x"].tensor_shape.dim.add(size=1)
    req.inputs["x"].tensor_shape.dim.add(size=1)
    req.inputs["x"].float_val.append(1.0)
    return list(d.stub.Predict(req, timeout=timeout).outputs["y"].float_val)


def rest_port_of(args):
    """The --rest_api_port in a daemon's args (either spelling), or 0."""
    args = list(args)
    for i, a in enumerate(args):
        if a.startswith("--rest_api_port="):
            v = a.split("=", 1)[1]
        elif a == "--rest_api_port" and i + 1 < len(args):
            v = args[i + 1]
        else:
            continue
        return int(v) if v.isdigit() else 0
    return 0


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago. Picked at random
    below the kernel's ephemeral range: a port from bind(port 0) is one the
    kernel also hands to the next client connection or --port=0 daemon of a
    test running beside this one, and the daemon would then find it taken."""
    lo, hi = _ephemeral_range()
    span = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535) if hi < 63000 else None
    for _ in range(200 if span else 0):
        p = random.randint(*span)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def copy_version(src_dir, dst_dir):
    shutil.copytree(src_dir, dst_dir)


def run_in_tmpdir(prefix, body, fails):
    """Runs body(tmp) in a fresh temporary folder, removed afterwards; the
    exit code of a test whose soft checks appended to `fails` what failed."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        print("%d check(s) failed" % len(fails))
        return 1
    print("all checks passed")
    return 0


def check(cond, msg, daemon=None):
    if not cond:
        raise AssertionError(msg + ("\n--- daemon log ---\n" + daemon.log() if daemon else ""))


# Descriptor exhaustion (it_serve_outages on the plaintext port, it_serve_tls
# on the TLS port): the daemon's RLIMIT_NOFILE is lowered to FD_LIMIT and
# FD_CONNECTIONS idle connections are opened, more than it can accept.
FD_LIMIT = 1024
FD_CONNECTIONS = 1100


def fd_exhaustion_possible(test):
    """Raises this process's RLIMIT_NOFILE so that it can hold FD_CONNECTIONS
    sockets. False (and says so) when it cannot, or prlimit is missing."""
    need = FD_CONNECTIONS + 300
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < need or shutil.which("prlimit") is None:
        print("%s: cannot open %d descriptors or no prlimit; EMFILE case skipped" % (test, need))
        return False
    return True


def exhaust_fds(d, port, hello=b"", hold=3.0):
    """Lowers the daemon's descriptor limit to FD_LIMIT (prlimit on its pid),
    opens up to FD_CONNECTIONS connections to port, each sending hello, keeps
    them open for hold seconds, checks that the daemon is alive, and closes
    them. Returns how many were opened."""
    subprocess.run(["prlimit", "--pid", str(d.proc.pid), "--nofile=%d:%d" % (FD_LIMIT, FD_LIMIT)],
                   check=True)
    socks = []
    try:
        for _ in range(FD_CONNECTIONS):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if hello:
                    s.sendall(hello)
                socks.append(s)
            except OSError:
                break
        time.sleep(hold)
        check(d.proc.poll() is None, "daemon died under descriptor exhaustion", d)
        return len(socks)
    finally:
        for s in socks:
            s.close()


def answered_within(fn, seconds, what, d):
    """fn() until it returns instead of raising grpc.RpcError or OSError;
    returns its result. Fails the test with what after seconds."""
    end = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except (grpc.RpcError, OSError) as e:
            check(time.monotonic() < end, "%s: %s" % (what, e), d)
            time.sleep(0.2)


def exhaustion_survived(d, stub):
    """After exhaust_fds: hpt is still loaded (asked through stub), nothing
    was unloaded, and the daemon hit the limit (else the test tested nothing)."""
    pb = gen_protos()
    r = pb.tfs.GetModelStatusRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    state = [v.state for v in stub.GetModelStatus(r, timeout=10).model_version_status]
    check(state == [30], "model state after EMFILE: %s" % state, d)
    check("unloaded" not in d.log(), "a model was unloaded under EMFILE", d)
    check("accept failed" in d.log() or "cannot be read now" in d.log(),
          "descriptor exhaustion was never hit (the test did not test it)", d)
