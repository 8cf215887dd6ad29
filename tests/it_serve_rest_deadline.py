"""it_serve_rest_deadline: a REST :predict run is stoppable (issue 33, F9).

The model `spin` is a TF1 while loop whose condition never turns false
(v + 1 < inf). With --rest_api_timeout_in_ms=1000 its :predict answers 504
(the run is cancelled at its deadline) instead of running forever. With a far
deadline, clients that give up and close their connection cancel their runs:
after more such clients than there are inference workers
(--grpc_max_threads=2), half_plus_two still answers over REST and gRPC. Before
this change each abandoned run kept its worker forever and REST answered no
model at all. Warm-up runs have a deadline too
(--model_warmup_run_timeout_seconds), and SIGTERM ends the process within the
drain timeout while a warm-up without a deadline spins.
"""
import http.client
import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, WAIT, Daemon, check, free_port, gen_protos  # noqa: E402

pb = gen_protos()
F = pb.fw.DT_FLOAT
FRAME = b"spin/while_context"


def write_spin(d):
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def

    def node(name, op, inputs=(), T=F):
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        if T is not None:
            n.attr["T"].type = T
        return n

    def const(name, v, ctl=None):
        n = g.node.add(name=name, op="Const")
        if ctl:
            n.input.append("^" + ctl)
        n.attr["dtype"].type = F
        t = n.attr["value"].tensor
        t.dtype = F
        t.float_val.append(v)
        return n

    def enter(name, x, constant):
        n = node(name, "Enter", [x])
        n.attr["frame_name"].s = FRAME
        n.attr["is_constant"].b = constant
        n.attr["parallel_iterations"].i = 10

    x = node("x", "Placeholder", T=None)
    x.attr["dtype"].type = F
    x.attr["shape"].shape.dim.add(size=1)
    const("inf", float("inf"))
    p = "spin/"
    enter(p + "Enter_v", "x", False)
    enter(p + "Enter_inf", "inf", True)
    node(p + "Merge", "Merge", [p + "Enter_v", p + "Next"]).attr["N"].i = 2
    node(p + "Less", "Less", [p + "Merge", p + "Enter_inf"])
    node(p + "LoopCond", "LoopCond", [p + "Less"], T=None)
    node(p + "Switch", "Switch", [p + "Merge", p + "LoopCond"])
    node(p + "Identity", "Identity", [p + "Switch:1"])
    const(p + "one", 1.0, ctl=p + "Identity")
    node(p + "add", "AddV2", [p + "Identity", p + "one"])
    node(p + "Next", "NextIteration", [p + "add"])
    node(p + "Exit", "Exit", [p + "Switch"])
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name = "x:0"
    sig.inputs["x"].dtype = F
    sig.inputs["x"].tensor_shape.dim.add(size=1)  # so that synthetic warm-up runs it
    sig.outputs["y"].name = p + "Exit:0"
    sig.outputs["y"].dtype = F
    os.makedirs(d)
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def config(spin_base):
    f = tempfile.NamedTemporaryFile("w", suffix=".pbtxt", delete=False)
    f.write('model_config_list { config { name: "spin" base_path: "%s" model_platform: '
            '"tensorflow" } config { name: "hpt" base_path: "%s" model_platform: '
            '"tensorflow" } }\n' % (spin_base, HPT))
    f.close()
    return f.name


def post(port, name, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/v1/models/%s:predict" % name, json.dumps(body),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def start(cfg, rest, timeout_ms):
    return Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest,
                   "--rest_api_timeout_in_ms=%d" % timeout_ms, "--grpc_max_threads=2",
                   "--enable_model_warmup=false"])


def wait_available(rest, name, limit=WAIT):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", rest, timeout=30)
            c.request("GET", "/v1/models/" + name)
            r = c.getresponse()
            body = r.read()
            c.close()
            if r.status == 200 and b"AVAILABLE" in body:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def main():
    top = tempfile.mkdtemp(prefix="it_rest_deadline_")
    write_spin(os.path.join(top, "spin", "1"))
    cfg = config(os.path.join(top, "spin"))

    # 1. The deadline: 504, not a run that never ends.
    rest = free_port()
    d = start(cfg, rest, 1000)
    try:
        check(wait_available(rest, "spin") and wait_available(rest, "hpt"), "models available")
        t0 = time.monotonic()
        try:
            code, data = post(rest, "spin", {"inputs": [1.0]}, 60)
        except (socket.timeout, OSError) as e:
            code, data = None, str(e).encode()
        took = time.monotonic() - t0
        check(code == 504 and b"deadline" in data,
              "spin :predict with --rest_api_timeout_in_ms=1000 answers 504 (got %s %r after "
              "%.1f s)" % (code, data[:200], took))
        code, data = post(rest, "hpt", {"instances": [1.0, 2.0]}, 30)
        check(code == 200 and json.loads(data)["predictions"] == [2.5, 3.0],
              "half_plus_two answers after it: %s %r" % (code, data[:200]))
    finally:
        d.close()

    # 2. Clients that give up: their runs are cancelled, the workers freed.
    rest = free_port()
    d = start(cfg, rest, 600000)
    try:
        check(wait_available(rest, "spin") and wait_available(rest, "hpt"), "models available")
        for i in range(5):
            try:
                post(rest, "spin", {"inputs": [1.0]}, 0.5)
            except (socket.timeout, OSError):
                pass  # the client gives up and closes its connection
        ok = False
        code, data = None, b""
        for _ in range(3):
            try:
                code, data = post(rest, "hpt", {"instances": [1.0]}, 60)
                ok = code == 200
                break
            except (socket.timeout, OSError) as e:
                data = str(e).encode()
        check(ok, "after 5 abandoned spinning calls on 2 workers, REST half_plus_two answers "
                  "(got %s %r)" % (code, data[:200]))
        req = pb.tfs.PredictRequest()
        req.model_spec.name = "hpt"
        req.inputs["x"].dtype = F
        req.inputs["x"].tensor_shape.dim.add(size=1)
        req.inputs["x"].tensor_shape.dim.add(size=1)
        req.inputs["x"].float_val.append(1.0)
        try:
            resp = d.stub.Predict(req, timeout=60)
            got = list(resp.outputs["y"].float_val)
        except Exception as e:  # noqa: BLE001 - reported below
            got = str(e)
        check(got == [2.5], "and gRPC half_plus_two answers: %r" % (got,))
    finally:
        d.close()
    # 3. Warm-up gets a deadline: the synthetic warm-up of the spinning model
    #    stops at it (logged) and the version becomes AVAILABLE instead of
    #    staying LOADING for ever.
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest,
                "--model_warmup_run_timeout_seconds=1"])
    try:
        check(wait_available(rest, "hpt"), "hpt available beside the spinning warm-up")
        check(wait_available(rest, "spin"), "spin AVAILABLE after its warm-up deadline",
              daemon=d)
        check("model_warmup_run_timeout_seconds" in d.log(),
              "the warm-up's stop is logged naming the flag", daemon=d)
    finally:
        d.close()

    # 4. SIGTERM during a warm-up without a deadline and during a REST run
    #    without one: the drain timeout cancels both and the process exits.
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--rest_api_port=%d" % rest,
                "--model_warmup_run_timeout_seconds=0", "--drain_timeout_seconds=1",
                "--rest_api_timeout_in_ms=600000"])
    try:
        check(wait_available(rest, "hpt"), "hpt available")
        time.sleep(0.5)  # spin is warming up, for ever
        t0 = time.monotonic()
        d.proc.send_signal(15)
        try:
            d.proc.wait(timeout=WAIT)
            took = time.monotonic() - t0
        except Exception:  # noqa: BLE001 - reported below
            took = None
        # A limit far above the drain timeout (1 s) for a loaded machine, far
        # below never (what a warm-up without a deadline did before).
        check(took is not None and took < 60,
              "SIGTERM with a warm-up that never ends: exited after %s s" % took)
    finally:
        d.close()
    print("it_serve_rest_deadline: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
