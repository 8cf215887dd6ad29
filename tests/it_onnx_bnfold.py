#!/usr/bin/python3
"""it_onnx_bnfold: an inference BatchNormalization right after a Conv is folded
into the convolution at import (runtime/onnx/rt_onnx.c fold_batchnorm: filter
times scale / sqrt(var + eps), the rest into the bias), as ONNX Runtime does,
with weights and parameters given as initializers or as Constant nodes (the
form Paddle2ONNX writes, e.g. ppocrv3_det's 48 Conv + BatchNormalization).

Models built with onnx's helper, symbolic N / H / W, run through the
conformance worker (build/onnx_conf_run) at two input sizes and compared with
a float64 numpy reference (rtol 1e-4, atol 1e-5). The converted graph must
hold no FusedBatchNormV3 where the fold applies (bare conv, conv with bias,
stride 2, depthwise with a channel multiplier, two convs sharing one weight
tensor with different BNs; the const_nodes_* cases from Constant nodes) and
keep it where it must not (the conv's output used besides the BN, weights
computed at run time).
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_worker import WORKER, Worker, graph_has  # noqa: E402

EPS = 1e-3


def conv_ref(x, w, b, stride, group):
    """ONNX Conv, 3x3 kernels, pads 1, float64."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = (h + 2 - kh) // stride + 1, (wd + 2 - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for o in range(m):
        g = o // mg
        for ci in range(cg):
            for i in range(kh):
                for j in range(kw):
                    y[:, o] += w[o, ci, i, j] * xp[:, g * cg + ci, i:i + stride * oh:stride,
                                                   j:j + stride * ow:stride]
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


def bn_ref(y, p):
    s, o, mu, var = (a.reshape(1, -1, 1, 1).astype(np.float64) for a in p)
    return (y - mu) / np.sqrt(var + EPS) * s + o


def bn_params(rng, m, tag):
    p = [rng.uniform(0.5, 2, m), rng.standard_normal(m), rng.standard_normal(m),
         rng.uniform(0.1, 3, m)]
    p = [a.astype(np.float32) for a in p]
    names = ["%s_%s" % (tag, k) for k in ("scale", "bias", "mean", "var")]
    return p, names, [numpy_helper.from_array(a, nm) for a, nm in zip(p, names)]


def case(rng, name, cin, cout, group, stride, bias, extra_use=False, shared=False,
         runtime_w=False, relu=True, constants=False):
    """(model, reference function of x, extra feeds, expected fold)."""
    w = (rng.standard_normal((cout, cin // group, 3, 3)) * 0.5).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    inits, nodes = [], []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", cin, "h", "w"])]
    if runtime_w:
        inputs.append(helper.make_tensor_value_info("wt", TensorProto.FLOAT, list(w.shape)))
    else:
        inits.append(numpy_helper.from_array(w, "wt"))
    conv_in = ["x", "wt"]
    if bias:
        inits.append(numpy_helper.from_array(b, "cb"))
        conv_in.append("cb")
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride], group=group)
    p1, n1, i1 = bn_params(rng, cout, "bn1")
    inits += i1
    nodes.append(helper.make_node("Conv", conv_in, ["c1"], **attrs))
    nodes.append(helper.make_node("BatchNormalization", ["c1"] + n1, ["b1"], epsilon=EPS))
    last = "b1"
    if shared:  # a second conv on the same weights, its own BN
        p2, n2, i2 = bn_params(rng, cout, "bn2")
        inits += i2
        nodes.append(helper.make_node("Conv", conv_in, ["c2"], **attrs))
        nodes.append(helper.make_node("BatchNormalization", ["c2"] + n2, ["b2"], epsilon=EPS))
        nodes.append(helper.make_node("Add", ["b1", "b2"], ["s"]))
        last = "s"
    if extra_use:  # the conv's output used besides the BN
        nodes.append(helper.make_node("Add", ["b1", "c1"], ["s"]))
        last = "s"
    nodes.append(helper.make_node("Relu" if relu else "Identity", [last], ["y"]))
    if constants:  # weights and parameters as Constant nodes (Paddle2ONNX's form)
        nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in inits] + nodes
        inits = []
    g = helper.make_graph(nodes, name, inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    def ref(x):
        c = conv_ref(x, w, b, stride, group)
        y = bn_ref(c, p1)
        if shared:
            y = y + bn_ref(c, p2)
        if extra_use:
            y = y + c
        return np.maximum(y, 0) if relu else y

    feeds = [("wt", w)] if runtime_w else []
    return model, ref, feeds, not (extra_use or runtime_w)


def main():
    if not os.access(WORKER, os.X_OK):
        print("FAIL: worker %s not built" % WORKER)
        return 1
    rng = np.random.default_rng(7)
    cases = [
        ("plain", dict(cin=3, cout=5, group=1, stride=1, bias=False)),
        ("bias_stride2", dict(cin=4, cout=6, group=1, stride=2, bias=True, relu=False)),
        ("depthwise_x2", dict(cin=4, cout=8, group=4, stride=1, bias=False)),
        ("depthwise_bias_s2", dict(cin=6, cout=6, group=6, stride=2, bias=True)),
        ("shared_weights", dict(cin=3, cout=4, group=1, stride=1, bias=True, shared=True)),
        ("conv_used_twice", dict(cin=3, cout=4, group=1, stride=1, bias=False,
                                 extra_use=True)),
        ("const_nodes", dict(cin=3, cout=5, group=1, stride=2, bias=True, constants=True)),
        ("const_nodes_depthwise", dict(cin=4, cout=8, group=4, stride=1, bias=False,
                                       constants=True)),
        ("const_nodes_shared", dict(cin=3, cout=4, group=1, stride=1, bias=False, shared=True,
                                    constants=True)),
        ("const_nodes_used_twice", dict(cin=3, cout=4, group=1, stride=1, bias=False,
                                        extra_use=True, constants=True)),
        ("runtime_weights", dict(cin=3, cout=4, group=1, stride=1, bias=False,
                                 runtime_w=True)),
    ]
    tmp = tempfile.mkdtemp(prefix="it_onnx_bnfold_")
    worker = Worker()
    fails, runs = [], 0
    try:
        for name, kw in cases:
            model, ref, extra, fold = case(rng, name, **kw)
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(model, path)
            for k, shp in enumerate([(1, kw["cin"], 7, 9), (2, kw["cin"], 5, 6)]):
                x = rng.standard_normal(shp).astype(np.float32)
                work = os.path.join(tmp, "%s_%d" % (name, k))
                ans, y = worker.run(path, work, [("x", x)] + extra)
                runs += 1
                if y is None:
                    fails.append("%s at %s: %s" % (name, shp, ans))
                    continue
                (bn,) = graph_has(work, "FusedBatchNormV3")
                if bn == fold:
                    fails.append("%s: FusedBatchNormV3 %s in the converted graph" %
                                 (name, "left" if bn else "gone"))
                want = ref(x)
                if y.shape != want.shape or not np.allclose(y, want, rtol=1e-4, atol=1e-5):
                    d = np.max(np.abs(y - want)) if y.shape == want.shape else y.shape
                    fails.append("%s at %s: differs from the reference (%s)" % (name, shp, d))
    finally:
        worker.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d models, %d runs, %d failures" % (len(cases), runs, len(fails)))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
