"""it_tf1loop: a TF1 dynamic_rnn-style SavedModel (a tf.while_loop frame of
Enter / Merge / Switch / LoopCond / NextIteration / Exit nodes over
TensorArrays, as TF1 exports it), written here with the protobuf classes of
proto/ (there is no TensorFlow here), served by the daemon and checked with
`dcmserve check`.

The loop: h_0 = 0, h_t = tanh(h_{t-1} W + x_t) for each row x_t of x [T, 2];
outputs = [h_1 .. h_T] (TensorArray gathered after the loop), last = h_T. The
reference is the same recurrence in numpy. T = 0 is the zero-trip loop. A
second model has an unknown op inside the loop body: `dcmserve check` names
it with its node and says the model does not serve."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
pb = gen_protos()
F, I32, RES = pb.fw.DT_FLOAT, pb.fw.DT_INT32, pb.fw.DT_RESOURCE
W = np.array([[0.5, -1.0], [0.25, 0.75]], dtype=np.float32)
FRAME = b"rnn/while/while_context"


def const(g, name, arr, dtype, ctl=None):
    n = g.node.add(name=name, op="Const")
    if ctl:
        n.input.append("^" + ctl)
    n.attr["dtype"].type = dtype
    t = n.attr["value"].tensor
    t.dtype = dtype
    a = np.asarray(arr, dtype=np.float32 if dtype == F else np.int32)
    for d in a.shape:
        t.tensor_shape.dim.add(size=d)
    t.tensor_content = a.tobytes()
    return n


def write_model(d, mystery=False):
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def

    def node(name, op, inputs=(), T=None):
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        if T is not None:
            n.attr["T"].type = T
        return n

    def enter(name, x, T, constant):
        n = node(name, "Enter", [x], T)
        n.attr["frame_name"].s = FRAME
        n.attr["is_constant"].b = constant
        n.attr["parallel_iterations"].i = 32

    def loop_var(v, init, nxt, T):
        p = "rnn/while/"
        enter(p + "Enter_" + v, init, T, False)
        node(p + "Merge_" + v, "Merge", [p + "Enter_" + v, p + "NextIteration_" + v], T).attr["N"].i = 2
        node(p + "Switch_" + v, "Switch", [p + "Merge_" + v, p + "LoopCond"], T)
        node(p + "Identity_" + v, "Identity", [p + "Switch_" + v + ":1"], T)
        node(p + "NextIteration_" + v, "NextIteration", [nxt], T)
        node(p + "Exit_" + v, "Exit", [p + "Switch_" + v], T)

    x = node("x", "Placeholder")
    x.attr["dtype"].type = F
    x.attr["shape"].shape.dim.add(size=-1)
    x.attr["shape"].shape.dim.add(size=2)
    node("rnn/Shape", "Shape", ["x"], F).attr["out_type"].type = I32
    const(g, "rnn/b", [0], I32)
    const(g, "rnn/e", [1], I32)
    const(g, "rnn/s", [1], I32)
    ss = node("rnn/T", "StridedSlice", ["rnn/Shape", "rnn/b", "rnn/e", "rnn/s"], I32)
    ss.attr["Index"].type = I32
    for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask"):
        ss.attr[m].i = 0
    ss.attr["shrink_axis_mask"].i = 1
    const(g, "rnn/zero", 0, I32)
    const(g, "rnn/one", 1, I32)
    node("rnn/range", "Range", ["rnn/zero", "rnn/T", "rnn/one"]).attr["Tidx"].type = I32
    for ta in ("rnn/ta_in", "rnn/ta_out"):
        n = node(ta, "TensorArrayV3", ["rnn/T"])
        n.attr["dtype"].type = F
        n.attr["element_shape"].shape.dim.add(size=2)
    node("rnn/scatter", "TensorArrayScatterV3", ["rnn/ta_in", "rnn/range", "x", "rnn/ta_in:1"], F)
    const(g, "rnn/h0", np.zeros((1, 2)), F)
    const(g, "rnn/W", W, F)
    p = "rnn/while/"
    enter(p + "Enter_in", "rnn/ta_in", RES, True)
    enter(p + "Enter_inflow", "rnn/scatter", F, True)
    enter(p + "Enter_out", "rnn/ta_out", RES, True)
    enter(p + "Enter_T", "rnn/T", I32, True)
    enter(p + "Enter_W", "rnn/W", F, True)
    loop_var("time", "rnn/zero", p + "add", I32)
    loop_var("h", "rnn/h0", p + "tanh", F)
    loop_var("flow", "rnn/ta_out:1", p + "write", F)
    node(p + "Less", "Less", [p + "Merge_time", p + "Enter_T"], I32)
    node(p + "LoopCond", "LoopCond", [p + "Less"])
    rd = node(p + "read", "TensorArrayReadV3", [p + "Enter_in", p + "Identity_time", p + "Enter_inflow"])
    rd.attr["dtype"].type = F
    mm = node(p + "mm", "MatMul", [p + "Identity_h", p + "Enter_W"], F)
    mm.attr["transpose_a"].b = False
    mm.attr["transpose_b"].b = False
    node(p + "sum", "AddV2", [p + "mm", p + "read"], F)
    if mystery:
        node(p + "mystery", "NoSuchOpInLoop", [p + "sum"], F)
        node(p + "tanh", "Tanh", [p + "mystery"], F)
    else:
        node(p + "tanh", "Tanh", [p + "sum"], F)
    const(g, p + "es", [2], I32, ctl=p + "Identity_time")
    node(p + "row", "Reshape", [p + "tanh", p + "es"], F).attr["Tshape"].type = I32
    node(p + "write", "TensorArrayWriteV3", [p + "Enter_out", p + "Identity_time", p + "row",
                                             p + "Identity_flow"], F)
    const(g, p + "one", 1, I32, ctl=p + "Identity_time")
    node(p + "add", "AddV2", [p + "Identity_time", p + "one"], I32)
    ga = node("rnn/outputs", "TensorArrayGatherV3", ["rnn/ta_out", "rnn/range", p + "Exit_flow"])
    ga.attr["dtype"].type = F
    ga.attr["element_shape"].shape.dim.add(size=2)
    node("rnn/last", "Identity", [p + "Exit_h"], F)
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name = "x:0"
    sig.inputs["x"].dtype = F
    for k, t in (("outputs", "rnn/outputs:0"), ("last", "rnn/last:0")):
        sig.outputs[k].name = t
        sig.outputs[k].dtype = F
    os.makedirs(d)
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def reference(xs):
    h = np.zeros((1, 2), dtype=np.float64)
    outs = []
    for row in xs:
        h = np.tanh(h @ W.astype(np.float64) + row)
        outs.append(h[0].copy())
    return np.asarray(outs).reshape(len(xs), 2), h[0]


def run(*args):
    p = subprocess.run([DCMSERVE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = os.path.join(tmp, "rnn"), os.path.join(tmp, "bad")
        write_model(os.path.join(good, "1"))
        write_model(os.path.join(bad, "1"), mystery=True)

        rc, out, err = run("check", "--json", good)
        check(rc == 0, "check on the TF1 loop model: rc %d\n%s%s" % (rc, out, err))
        j = json.loads(out)
        sd = {s["key"]: s for s in j["signatures"]}["serving_default"]
        check(j["serves"] is True and sd["unsupported"] == [] and
              {"Enter", "Exit", "LoopCond", "NextIteration", "Tanh", "TensorArrayReadV3"} <= set(sd["ops"])
              and not {"Merge", "Switch"} & set(sd["ops"]), "check: %r" % sd)
        rc, out, err = run("check", "--json", bad)
        j = json.loads(out)
        sd = {s["key"]: s for s in j["signatures"]}["serving_default"]
        got = {u["op"]: u["nodes"] for u in sd["unsupported"]}
        check(rc == 1 and j["serves"] is False and got == {"NoSuchOpInLoop": ["rnn/while/mystery"]}
              and "NoSuchOpInLoop" in j["verdict"], "check on the bad loop: rc %d %r" % (rc, j))

        d = Daemon(["--model_name=rnn", "--model_base_path=" + good])
        try:
            d.wait_health()
            rng = np.random.default_rng(7)
            for t in (4, 1, 0):
                xs = rng.uniform(-1.5, 1.5, size=(t, 2)).astype(np.float32)
                req = pb.tfs.PredictRequest()
                req.model_spec.name = "rnn"
                req.inputs["x"].CopyFrom(float_tensor(xs.ravel().tolist(), [t, 2]))
                resp = d.stub.Predict(req, timeout=30)
                want_o, want_h = reference(xs.astype(np.float64))
                o = resp.outputs["outputs"]
                got_o = np.asarray(tensor_values(o), dtype=np.float64)
                check(tuple(x.size for x in o.tensor_shape.dim) == (t, 2), "T=%d outputs shape %s"
                      % (t, o.tensor_shape), d)
                check(np.allclose(got_o, want_o.ravel(), rtol=1e-5, atol=1e-6),
                      "T=%d outputs %r vs %r" % (t, got_o, want_o.ravel()), d)
                got_h = np.asarray(tensor_values(resp.outputs["last"]), dtype=np.float64)
                check(np.allclose(got_h, want_h, rtol=1e-5, atol=1e-6),
                      "T=%d last %r vs %r" % (t, got_h, want_h), d)
                print("T=%d: last %r (numpy %r)" % (t, got_h.tolist(), want_h.tolist()), flush=True)
        finally:
            d.stop()
            d.close()
    print("it_tf1loop: ok")


if __name__ == "__main__":
    main()
