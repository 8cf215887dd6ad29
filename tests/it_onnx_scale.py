#!/usr/bin/python3
"""it_onnx_scale: `dcmserve import-onnx` and loading the SavedModel it writes
grow linearly with the graph's size (issue 33, F11: 10k nodes took 1.6 s,
40k 34.5 s, 80k 251 s).

Imports chains of N and 4N nodes (blocks of Conv, BatchNormalization, Relu,
Add, so that BN folding and Conv/bias/Relu fusion run over the whole graph)
and runs each written SavedModel once with `dcmserve run` (load, plan, run).
Each step is timed over several rounds, interleaving the sizes, and the
median of the large graph's times over the small one's must stay under 8
(linear gives about 4, quadratic 16). A ratio of medians is independent of
how loaded the machine is; no single time is compared with a bound. Also
checks that the large model's answer is the chain's (so the timing is of a
conversion that is right).

  usage: it_onnx_scale.py [--nodes N] [--rounds R]   (defaults 2000, 3)
  Also writes ONNX chains for benchmarks: it_onnx_scale.py --write N FILE [elementwise]
  (the Conv/BN/Relu/Add blocks above, or a chain of Add, Relu and Mul)
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SRC = os.environ.get("DCM_SRC", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
C = 4  # channels


def chain(n_nodes):
    """An ONNX model of about n_nodes nodes: x [1, C, 1, 1] through blocks of
    Conv (identity weights, bias 0.5) -> BatchNormalization (scale 0.5) ->
    Relu -> Add(0.25). Each block maps v to (v + 0.5) * 0.5 + 0.25 for v >= 0."""
    w = numpy_helper.from_array(np.eye(C, dtype=np.float32).reshape(C, C, 1, 1), "w")
    b = numpy_helper.from_array(np.full([C], 0.5, np.float32), "b")
    scale = numpy_helper.from_array(np.full([C], 0.5, np.float32), "scale")
    zero = numpy_helper.from_array(np.zeros([C], np.float32), "zero")
    one = numpy_helper.from_array(np.full([C], 1.0 - 1e-5, np.float32), "one")
    q = numpy_helper.from_array(np.array([0.25], np.float32), "q")
    nodes = []
    prev = "x"
    blocks = max(1, n_nodes // 4)
    for i in range(blocks):
        c, bn, r, a = "c%d" % i, "bn%d" % i, "r%d" % i, "a%d" % i
        nodes.append(helper.make_node("Conv", [prev, "w", "b"], [c], name="conv%d" % i))
        nodes.append(helper.make_node("BatchNormalization", [c, "scale", "zero", "zero", "one"],
                                      [bn], name="norm%d" % i, epsilon=1e-5))
        nodes.append(helper.make_node("Relu", [bn], [r], name="relu%d" % i))
        nodes.append(helper.make_node("Add", [r, "q"], [a], name="add%d" % i))
        prev = a
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 1, 1])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, C, 1, 1])],
                          [w, b, scale, zero, one, q])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), blocks


def elementwise_chain(n_nodes):
    """x [1, C] through n_nodes nodes cycling Add(0.5), Relu, Mul(0.5): the
    plain chain of docs/benchmarks_onnx.md's 10^6-node figure."""
    c = numpy_helper.from_array(np.array([0.5], dtype=np.float32), "c")
    nodes, prev = [], "x"
    for i in range(n_nodes):
        o = "t%d" % i
        op = ("Add", "Relu", "Mul")[i % 3]
        nodes.append(helper.make_node(op, [prev] if op == "Relu" else [prev, "c"], [o],
                                      name="n%d" % i))
        prev = o
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, C])], [c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def expected(blocks, v=0.0):
    for _ in range(blocks):
        v = (v + 0.5) * 0.5 + 0.25  # tends to 1.0
    return v


def timed(args, limit):
    """(seconds, stdout) of one dcmserve command; inf past `limit` seconds
    (the ratio is then past any bound: no need to wait for a quadratic run)."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([DCMSERVE] + args, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        print("dcmserve %s: still running after %.1f s, stopped" % (args[0], limit))
        return float("inf"), ""
    dt = time.monotonic() - t0
    if p.returncode != 0:
        print("FAIL dcmserve %s: exit %d\n%s" % (" ".join(args[:2]), p.returncode, p.stderr[-2000:]))
        sys.exit(1)
    return dt, p.stdout


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--write"]:
        n = int(argv[1])
        onnx.save(elementwise_chain(n) if argv[3:4] == ["elementwise"] else chain(n)[0], argv[2])
        return 0
    n, rounds = 2000, 3
    for i in range(0, len(argv) - 1, 2):
        if argv[i] == "--nodes":
            n = int(argv[i + 1])
        elif argv[i] == "--rounds":
            rounds = int(argv[i + 1])
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        sizes = (n, 4 * n)
        blocks = {}
        for s in sizes:
            m, blocks[s] = chain(s)
            onnx.save(m, os.path.join(tmp, "m%d.onnx" % s))
        imp = {s: [] for s in sizes}
        load = {s: [] for s in sizes}
        out = {}
        for r in range(rounds):
            for s in sizes:
                d = os.path.join(tmp, "sm%d_%d" % (s, r))
                # The small graph's runs bound the large one's: 20x its worst
                # (at least 10 s), so code that is quadratic fails in minutes.
                lim = 1800.0 if s == sizes[0] else 20 * max(10.0 / 20, max(imp[sizes[0]]))
                dt, _ = timed(["import-onnx", os.path.join(tmp, "m%d.onnx" % s), "--output_dir", d],
                              lim)
                imp[s].append(dt)
                if dt == float("inf"):
                    load[s].append(dt)
                    continue
                lim = 1800.0 if s == sizes[0] else 20 * max(10.0 / 20, max(load[sizes[0]]))
                dt, out[s] = timed(["run", "--dir", d, "--input_exprs",
                                    "x=np.zeros((1,%d,1,1))" % C], lim)
                load[s].append(dt)
                print("round %d: %d nodes: import %.2f s, load+run %.2f s" % (r, s, imp[s][-1], dt))
        for what, t in (("import-onnx", imp), ("load+run", load)):
            ratio = statistics.median(t[sizes[1]]) / statistics.median(t[sizes[0]])
            ok = ratio < 8.0
            print("%s %s: median %.2f s for %d nodes, %.2f s for %d: ratio %.2f for 4x the nodes "
                  "(bound 8)" % ("ok  " if ok else "FAIL", what, statistics.median(t[sizes[0]]),
                                 sizes[0], statistics.median(t[sizes[1]]), sizes[1], ratio))
            if not ok:
                fails.append(what)
        want = expected(blocks[sizes[1]])
        text = out.get(sizes[1], "").split("Result for output key", 1)[-1].split(":", 1)[-1]
        got = [float(x) for x in re.findall(r"-?\d+\.?\d*(?:e[-+]?\d+)?", text)]
        ok = len(got) >= C and all(abs(g - want) < 1e-4 for g in got[-C:])
        print("%s the %d-node chain answers %s (want %.5f each)" % ("ok  " if ok else "FAIL",
                                                                   sizes[1], got[-C:], want))
        if not ok:
            fails.append("answer")
    print("it_onnx_scale: %s" % ("FAILED: " + ", ".join(fails) if fails else "passed"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
