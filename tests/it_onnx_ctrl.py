#!/usr/bin/python3
"""it_onnx_ctrl: ONNX control flow (If, Loop, Scan) through the importer.

Small models built here with onnx's Python helper, written to <base>/1/model.onnx,
run with `dcmserve run` (converted in memory, docs/onnx.md "Control flow") and
compared with the same computation written in numpy in this file:

- if_capture: an If on a value computed at run time (sum(x) > 0) whose branches
  read graph inputs and a constant of the outer scope; run with inputs taking
  each branch.
- if_rank: PyTorch's "squeeze when the batch is 1" (an If whose branches give
  ranks 1 and 2 on a dynamic batch), followed by ops that need the rank
  (Shape, Size); run at batch 1 and batch 3.
- if_fail: the same If followed by a Transpose only the rank-2 branch has: batch
  3 runs, batch 1 fails the run with the converter's refusal (docs/onnx.md).
- loop: a Loop with trip count M, a condition computed in the body from an
  outer-scope limit, two loop-carried values (one reading the iteration number)
  and a scan output; run where M ends it, where the condition ends it, and
  with the condition false from the start (no iteration).
- scan: a Scan (opset 11) over two inputs, one along axis 1 read backwards, with a
  running sum state and scan outputs on axis 1 and reversed.
- refused: a Loop whose loop-carried value changes rank is refused at import with
  a message naming node, op and what is missing.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import run_in_tmpdir  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
FAILS = []
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, arr):
    arr = np.asarray(arr)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name))


def model(graph, opset):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def if_capture():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t_out"])], "then", [],
                               [vi("t_out", F, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "y"], ["e_out"]),
                                helper.make_node("Neg", ["e_out"], ["e_neg"])], "else", [],
                               [vi("e_neg", F, None)])
    nodes = [const("two", np.float32(2.0)), const("zero", np.float32(0.0)),
             helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "if_capture", [vi("x", F, ["N", 3]), vi("y", F, ["N", 3])],
                          [vi("out", F, ["N", 3])])
    return model(g, 13)


def if_capture_ref(x, y):
    return {"out": x * 2 if x.sum() > 0 else -(x - y)}


def if_rank():
    then_g = helper.make_graph([const("ax0", np.array([0], np.int64)),
                                helper.make_node("Squeeze", ["x", "ax0"], ["sq"])], "then", [],
                               [vi("sq", F, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["id"])], "else", [],
                               [vi("id", F, None)])
    nodes = [const("i0", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
             helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "i0"], ["n"], axis=0),
             helper.make_node("Equal", ["n", "one"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
             # rank-dependent tail: sum(y) + rank(y) (Size of Shape)
             helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0),
             helper.make_node("Shape", ["y"], ["ys"]),
             helper.make_node("Size", ["ys"], ["rank"]),
             helper.make_node("Cast", ["rank"], ["rankf"], to=F),
             helper.make_node("Add", ["s", "rankf"], ["out"])]
    g = helper.make_graph(nodes, "if_rank", [vi("x", F, ["N", 4])], [vi("out", F, [])])
    return model(g, 13)


def if_rank_ref(x):
    y = x[0] if x.shape[0] == 1 else x
    return {"out": np.float32(y.sum() + y.ndim)}


def if_fail():
    """if_rank's If followed by a Transpose that only a rank-2 value has: the
    squeezed branch's rest cannot be converted and fails the run when taken."""
    m = if_rank()
    g = m.graph
    tail = [n for n in g.node if n.op_type != "If" and n.output[0] in ("s", "ys", "rank", "rankf",
                                                                          "out")]
    for n in tail:
        g.node.remove(n)
    g.node.append(helper.make_node("Transpose", ["y"], ["out"], perm=[1, 0]))
    del g.output[:]
    g.output.append(vi("out", F, [4, "N"]))
    onnx.checker.check_model(m)
    return m


def loop():
    body = helper.make_graph(
        [helper.make_node("Cast", ["it"], ["itf"], to=F),
         const("half", np.float32(0.5)),
         helper.make_node("Mul", ["acc", "half"], ["a1"]),
         helper.make_node("Add", ["a1", "x"], ["a2"]),
         helper.make_node("Add", ["a2", "itf"], ["acc_out"]),
         helper.make_node("Add", ["cnt", "itf"], ["cnt_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["tot"], keepdims=0),
         helper.make_node("Less", ["tot", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"])],
        "body", [vi("it", I64, []), vi("cond_in", B, []), vi("acc", F, [3]), vi("cnt", F, [])],
        [vi("cond_out", B, []), vi("acc_out", F, [3]), vi("cnt_out", F, []),
         vi("scan_out", F, [3])])
    nodes = [helper.make_node("Loop", ["M", "c0", "acc0", "cnt0"], ["acc", "cnt", "trace"],
                              body=body)]
    g = helper.make_graph(nodes, "loop",
                          [vi("M", I64, []), vi("c0", B, []), vi("acc0", F, [3]),
                           vi("cnt0", F, []), vi("x", F, [3]), vi("limit", F, [])],
                          [vi("acc", F, [3]), vi("cnt", F, []), vi("trace", F, [None, 3])])
    return model(g, 13)


def loop_ref(M, c0, acc0, cnt0, x, limit):
    acc, cnt, trace, it, c = acc0.copy(), cnt0.copy(), [], 0, bool(c0)
    while it < M and c:
        acc = (acc * np.float32(0.5) + x + np.float32(it)).astype(np.float32)
        cnt = np.float32(cnt + it)
        trace.append(acc)
        c = bool(acc.sum() < limit)
        it += 1
    return {"acc": acc, "cnt": cnt, "trace": np.array(trace, np.float32).reshape(-1, 3)}


def scan():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "a"], ["s1"]),
         helper.make_node("Mul", ["s1", "b"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["o1"]),
         helper.make_node("Sub", ["a", "b"], ["o2"])],
        "body", [vi("s", F, [2]), vi("a", F, [2]), vi("b", F, [2])],
        [vi("s_out", F, [2]), vi("o1", F, [2]), vi("o2", F, [2])])
    nodes = [helper.make_node("Scan", ["s0", "A", "Bt"], ["s", "O1", "O2"], body=body,
                              num_scan_inputs=2, scan_input_axes=[0, 1],
                              scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                              scan_output_directions=[0, 1])]
    g = helper.make_graph(nodes, "scan",
                          [vi("s0", F, [2]), vi("A", F, ["T", 2]), vi("Bt", F, [2, "T"])],
                          [vi("s", F, [2]), vi("O1", F, [2, "T"]), vi("O2", F, ["T", 2])])
    return model(g, 11)


def scan_ref(s0, A, Bt):
    T = A.shape[0]
    s, o1, o2 = s0.copy(), [], []
    for t in range(T):
        a, b = A[t], Bt[:, T - 1 - t]
        s = ((s + a) * b).astype(np.float32)
        o1.append(s)
        o2.append(a - b)
    return {"s": s, "O1": np.stack(o1, 0).T.copy(), "O2": np.stack(o2[::-1], 0)}


def rank_changing_loop():
    body = helper.make_graph(
        [const("ax", np.array([0], np.int64)),
         helper.make_node("Unsqueeze", ["v", "ax"], ["v_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("it", I64, []), vi("cond_in", B, []), vi("v", F, [None])],
        [vi("cond_out", B, []), vi("v_out", F, [1, None])])
    nodes = [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="grow")]
    g = helper.make_graph(nodes, "grow", [vi("M", I64, []), vi("v0", F, [2])],
                          [vi("v", F, [None])])
    return model(g, 13)


def dcm_run(folder, inputs, work):
    os.makedirs(work, exist_ok=True)
    spec = []
    for k, (name, arr) in enumerate(inputs.items()):
        p = os.path.join(work, "in%d.npy" % k)
        np.save(p, arr)
        spec.append("%s=%s" % (name, p))
    outdir = os.path.join(work, "out")
    shutil.rmtree(outdir, ignore_errors=True)
    r = subprocess.run([DCMSERVE, "run", "--dir", folder, "--inputs", ";".join(spec),
                        "--outdir", outdir, "--overwrite"], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["rc %d" % r.returncode])[-1]
    return {f[:-4]: np.load(os.path.join(outdir, f)) for f in os.listdir(outdir)}, ""


def save(tmp, name, m):
    folder = os.path.join(tmp, name)
    os.makedirs(os.path.join(folder, "1"))
    onnx.save(m, os.path.join(folder, "1", "model.onnx"))
    return folder


def compare(tag, got, err, want):
    if got is None:
        check(False, "%s: run failed: %s" % (tag, err))
        return
    for k, w in want.items():
        g = got.get(k)
        ok = g is not None and g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-5)
        check(ok, "%s: output %s %s" % (tag, k, "matches numpy" if ok else "got %s, want %s" % (
            None if g is None else g.tolist(), w.tolist())))


def body(tmp):
    rng = np.random.default_rng(28)
    f = save(tmp, "if_capture", if_capture())
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    for xs, tag in ((np.abs(x), "then"), (-np.abs(x), "else")):
        got, err = dcm_run(f, {"x": xs, "y": y}, os.path.join(tmp, "w"))
        compare("if_capture (%s branch)" % tag, got, err, if_capture_ref(xs, y))

    f = save(tmp, "if_rank", if_rank())
    for n in (1, 3):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        got, err = dcm_run(f, {"x": x}, os.path.join(tmp, "w"))
        compare("if_rank (batch %d)" % n, got, err, if_rank_ref(x))

    f = save(tmp, "if_fail", if_fail())
    x = rng.standard_normal((3, 4)).astype(np.float32)
    got, err = dcm_run(f, {"x": x}, os.path.join(tmp, "w"))
    compare("if_fail (batch 3, the branch that converts)", got, err, {"out": x.T.copy()})
    got, err = dcm_run(f, {"x": x[:1]}, os.path.join(tmp, "w"))
    check(got is None and "cannot run" in err and "Transpose" in err,
          "if_fail (batch 1): the branch that could not be converted fails the run naming why: " +
          err[:300])

    f = save(tmp, "loop", loop())
    base = {"acc0": np.array([0.5, -1.0, 2.0], np.float32), "cnt0": np.float32(1.0),
            "x": np.array([1.0, 0.25, -0.5], np.float32)}
    for tag, M, c0, limit in (("M ends it", 4, True, 1e9), ("cond ends it", 100, True, 12.0),
                              ("no iteration", 5, False, 1e9)):
        ins = dict(base, M=np.int64(M), c0=np.bool_(c0), limit=np.float32(limit))
        got, err = dcm_run(f, ins, os.path.join(tmp, "w"))
        want = loop_ref(**ins)
        compare("loop (%s)" % tag, got, err, want)

    f = save(tmp, "scan", scan())
    T = 5
    ins = {"s0": np.array([0.1, -0.2], np.float32),
           "A": rng.standard_normal((T, 2)).astype(np.float32),
           "Bt": (0.5 + rng.random((2, T))).astype(np.float32)}
    got, err = dcm_run(f, ins, os.path.join(tmp, "w"))
    compare("scan", got, err, scan_ref(**ins))

    f = save(tmp, "grow", rank_changing_loop())
    r = subprocess.run([DCMSERVE, "check", f], capture_output=True, text=True, timeout=600)
    msg = r.stdout + r.stderr
    check(r.returncode != 0 and '"grow"' in msg and "Loop" in msg and "rank" in msg,
          "rank-changing Loop refused at import naming node, op and what is missing: " +
          (msg.strip().splitlines() or [""])[-1][:300])


if __name__ == "__main__":
    sys.exit(run_in_tmpdir("it_onnx_ctrl_", body, FAILS))
