"""it_serve_rest_deadline_more: every REST call that runs a model is stoppable
(issue 33), not only :predict (it_serve_rest_deadline): :classify, :regress
and KServe v2 REST /infer.

The model is it_serve_rest_deadline's endless while loop, started from a
Const so that each signature spins whatever it is fed: serving_default (x),
"classify" and "regress" (serialized tf.Examples). With
--rest_api_timeout_in_ms=1000 each endpoint answers 504 naming the deadline.
With a far deadline, clients that give up after 0.5 s cancel their runs: each
abandoned call ends in the request log as cancelled (the run stopped, its
worker free), and half_plus_two still answers over REST and gRPC. Before,
these calls ran for ever.
"""
import http.client
import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import WAIT, Daemon, check, free_port, gen_protos  # noqa: E402
from it_serve_rest_deadline import config, wait_available, write_spin  # noqa: E402

pb = gen_protos()
F = pb.fw.DT_FLOAT

CALLS = {
    "classify": ("/v1/models/spin:classify",
                 {"signature_name": "classify", "examples": [{"a": 1.0}]}),
    "regress": ("/v1/models/spin:regress",
                {"signature_name": "regress", "examples": [{"a": 1.0}]}),
    "infer": ("/v2/models/spin/infer",
              {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}),
}
APIS = {"classify": "rest_classify", "regress": "rest_regress", "infer": "rest_kserve_infer"}


def write_spin_all(d):
    """write_spin, its loop started from a Const, with classify and regress
    signatures over a DT_STRING input."""
    write_spin(d)
    path = os.path.join(d, "saved_model.pb")
    sm = pb.sm.SavedModel()
    with open(path, "rb") as f:
        sm.ParseFromString(f.read())
    mg = sm.meta_graphs[0]
    g = mg.graph_def
    x0 = g.node.add(name="x0", op="Const")
    x0.attr["dtype"].type = F
    x0.attr["value"].tensor.dtype = F
    x0.attr["value"].tensor.tensor_shape.dim.add(size=1)
    x0.attr["value"].tensor.float_val.append(1.0)
    for n in g.node:
        if n.name == "spin/Enter_v":
            n.input[0] = "x0"
    ex = g.node.add(name="ex", op="Placeholder")
    ex.attr["dtype"].type = pb.fw.DT_STRING
    for key, method, out in (("classify", "tensorflow/serving/classify", "scores"),
                             ("regress", "tensorflow/serving/regress", "outputs")):
        sig = mg.signature_def[key]
        sig.method_name = method
        sig.inputs["inputs"].name = "ex:0"
        sig.inputs["inputs"].dtype = pb.fw.DT_STRING
        sig.outputs[out].name = "spin/Exit:0"
        sig.outputs[out].dtype = F
    with open(path, "wb") as f:
        f.write(sm.SerializeToString())


def post(port, path, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def start(cfg, rest, timeout_ms):
    return Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest,
                   "--rest_api_timeout_in_ms=%d" % timeout_ms, "--grpc_max_threads=2",
                   "--rest_api_num_threads=2", "--enable_model_warmup=false",
                   "--request_log=errors"])


def hpt_answers(d, rest):
    code, data = None, b""
    try:
        code, data = post(rest, "/v1/models/hpt:predict", {"instances": [1.0]}, 60)
    except (socket.timeout, OSError) as e:
        data = str(e).encode()
    check(code == 200 and json.loads(data)["predictions"] == [2.5],
          "REST half_plus_two answers: %s %r" % (code, data[:200]), d)
    req = pb.tfs.PredictRequest()
    req.model_spec.name = "hpt"
    req.inputs["x"].dtype = F
    req.inputs["x"].tensor_shape.dim.add(size=1)
    req.inputs["x"].tensor_shape.dim.add(size=1)
    req.inputs["x"].float_val.append(1.0)
    try:
        got = list(d.stub.Predict(req, timeout=60).outputs["y"].float_val)
    except Exception as e:  # noqa: BLE001 - reported below
        got = str(e)
    check(got == [2.5], "gRPC half_plus_two answers: %r" % (got,), d)


def main():
    top = tempfile.mkdtemp(prefix="it_rest_deadline_more_")
    write_spin_all(os.path.join(top, "spin", "1"))
    cfg = config(os.path.join(top, "spin"))

    # 1. The deadline: 504 on every endpoint.
    rest = free_port()
    d = start(cfg, rest, 1000)
    try:
        check(wait_available(rest, "spin") and wait_available(rest, "hpt"), "models available", d)
        for what, (path, body) in sorted(CALLS.items()):
            t0 = time.monotonic()
            try:
                code, data = post(rest, path, body, 30)
            except (socket.timeout, OSError) as e:
                code, data = None, str(e).encode()
            check(code == 504 and b"deadline" in data,
                  "%s of the endless model with --rest_api_timeout_in_ms=1000 answers 504 (got "
                  "%s %r after %.1f s)" % (what, code, data[:300], time.monotonic() - t0), d)
        hpt_answers(d, rest)
    finally:
        d.close()

    # 2. Clients that give up: each run is cancelled and recorded as such.
    rest = free_port()
    d = start(cfg, rest, 600000)
    try:
        check(wait_available(rest, "spin") and wait_available(rest, "hpt"), "models available", d)
        for what, (path, body) in sorted(CALLS.items()):
            for _ in range(3):
                try:
                    post(rest, path, body, 0.5)
                except (socket.timeout, OSError):
                    pass  # the client gives up and closes its connection
            end = time.monotonic() + WAIT
            n = 0
            while time.monotonic() < end:
                n = sum(1 for line in d.log().splitlines()
                        if 'api="%s"' % APIS[what] in line and 'code="CANCELLED"' in line)
                if n >= 3:
                    break
                time.sleep(0.2)
            check(n >= 3, "3 abandoned %s calls: %d ended as cancelled in the request log"
                  % (what, n), d)
        hpt_answers(d, rest)
    finally:
        d.close()
    print("it_serve_rest_deadline_more: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
