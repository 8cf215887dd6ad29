#!/usr/bin/python3
"""it_onnx_resize_dyn: ONNX Resize / Upsample of 4-D inputs whose H and W are
known only at run time, fast path against the general kernel.

The importer maps Resize onto TF's ResizeNearestNeighbor (the fast path,
runtime/onnx/rt_onnx_shape.c resize_tf) where that computes exactly what ONNX
defines, and onto OnnxResize (the general kernel, kn_cpu_image.c) otherwise.
With run-time H / W the fast path takes constant scales of 1, 2, 4, ... on H
and W in nearest mode with (asymmetric, floor) or ((pytorch_)half_pixel,
round_prefer_floor / round_prefer_ceil), its output size computed in the graph.

For every mode / coordinate_transformation_mode / nearest_mode combination
and a set of scales, at opsets 9 (Upsample), 10, 11 and 13, this test builds
two models of the same node: A with the scales as a constant (what exporters
write; fast path where allowed) and B with the scales as a graph input (always
the general kernel). Both run on inputs of several sizes (odd ones, 1) through
the conformance worker (build/onnx_conf_run); A's output must equal B's bit for
bit, and in nearest mode also a numpy transcription of ONNX's formula. The
converted graph of A must use ResizeNearestNeighbor exactly for the
combinations above (so the test fails if the fast path is lost or widened
without a check here). Variants with only W dynamic, and an upscale whose
output size exceeds 2^31 (must be refused at run time, not wrapped), follow.
"""
import itertools
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_worker import WORKER, Worker, graph_has  # noqa: E402

CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NMS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = [(2, 2), (4, 2), (1, 2), (2, 1), (1, 1), (3, 3), (0.5, 0.5), (2.5, 2), (8, 8)]
SHAPES = [(1, 2, 5, 7), (2, 1, 1, 3), (1, 1, 6, 4), (1, 3, 9, 1)]


def fast_expected(mode, ctm, nm, sc):
    """1 when the importer must use TF's ResizeNearestNeighbor."""
    pow2 = all(s >= 1 and float(s).is_integer() and (int(s) & (int(s) - 1)) == 0 for s in sc)
    if mode != "nearest" or not pow2:
        return False
    return (ctm == "asymmetric" and nm == "floor") or (
        ctm in ("half_pixel", "pytorch_half_pixel") and nm in ("round_prefer_floor",
                                                               "round_prefer_ceil"))


def ref_nearest(x, sc, ctm, nm):
    """ONNX's nearest Resize with scales (1, 1, sh, sw), as its reference."""
    out = x
    for ax, s in ((2, sc[0]), (3, sc[1])):
        n = out.shape[ax]
        on = int(np.floor(n * s))
        o = np.arange(on, dtype=np.float64)
        if ctm == "asymmetric":
            c = o / s
        elif ctm == "align_corners":
            c = np.zeros_like(o) if s * n == 1 else o * (n - 1) / (s * n - 1)
        elif ctm == "pytorch_half_pixel" and s * n <= 1:
            c = np.zeros_like(o)
        else:
            c = (o + 0.5) / s - 0.5
        if nm == "floor":
            i = np.floor(c)
        elif nm == "ceil":
            i = np.ceil(c)
        elif nm == "round_prefer_floor":
            i = np.where(c - np.floor(c) == 0.5, np.floor(c), np.round(c))
        else:
            i = np.where(c - np.floor(c) == 0.5, np.ceil(c), np.round(c))
        i = np.clip(i, 0, n - 1).astype(np.int64)
        out = np.take(out, i, axis=ax)
    return out


def build(opset, mode, ctm, nm, sc, const_scales, h_dyn=True):
    """An ONNX model of one Resize (or Upsample at opset 9)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                      ["n", "c", "h" if h_dyn else 5, "w"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    scales = np.array([1, 1, sc[0], sc[1]], dtype=np.float32)
    inputs, inits = [x], []
    if const_scales:
        inits.append(numpy_helper.from_array(scales, "scales"))
    else:
        inputs.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4]))
    attrs = {"mode": mode}
    if opset >= 11:
        attrs.update(coordinate_transformation_mode=ctm, nearest_mode=nm)
        inits.append(numpy_helper.from_array(np.zeros(0, np.float32), "roi"))
        node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)
    else:
        node = helper.make_node("Upsample" if opset == 9 else "Resize", ["x", "scales"], ["y"],
                                **attrs)
    g = helper.make_graph([node], "g", inputs, [y], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def main():
    if not os.access(WORKER, os.X_OK):
        print("FAIL: worker %s not built" % WORKER)
        return 1
    tmp = tempfile.mkdtemp(prefix="it_onnx_resize_dyn_")
    worker = Worker()
    fails, cases, fast_cases, seq = [], 0, 0, itertools.count()
    rng = np.random.default_rng(28)
    combos = []
    for opset in (9, 10, 11, 13):
        modes = ["nearest", "linear"]
        pairs = [(c, n) for c in CTMS for n in NMS] if opset >= 11 else [("asymmetric", "floor")]
        for mode in modes:
            for ctm, nm in pairs:
                if mode == "linear" and nm != "round_prefer_floor":
                    continue  # nearest_mode does not matter in linear mode
                for sc in SCALES:
                    combos.append((opset, mode, ctm, nm, sc, True))
    # Only W dynamic (H static 5): half_pixel and asymmetric at opset 13.
    for ctm, nm in (("half_pixel", "round_prefer_floor"), ("asymmetric", "floor")):
        for sc in ((2, 2), (0.4, 2), (2, 3)):
            combos.append((13, "nearest", ctm, nm, sc, False))
    try:
        for opset, mode, ctm, nm, sc, h_dyn in combos:
            name = "op%d_%s_%s_%s_%gx%g%s" % (opset, mode, ctm, nm, sc[0], sc[1],
                                             "" if h_dyn else "_wdyn")
            paths = []
            for const in (True, False):
                p = os.path.join(tmp, "%s_%s.onnx" % (name, "A" if const else "B"))
                onnx.save(build(opset, mode, ctm, nm, sc, const, h_dyn), p)
                paths.append(p)
            want_fast = fast_expected(mode, ctm, nm, sc)
            fast_cases += want_fast
            for shp in SHAPES:
                if not h_dyn:
                    shp = (shp[0], shp[1], 5, shp[3])
                cases += 1
                x = rng.standard_normal(shp).astype(np.float32)
                scales = np.array([1, 1, sc[0], sc[1]], dtype=np.float32)
                wa = os.path.join(tmp, "w%d" % next(seq))
                wb = os.path.join(tmp, "w%d" % next(seq))
                ans_a, ya = worker.run(paths[0], wa, [("x", x)])
                ans_b, yb = worker.run(paths[1], wb, [("x", x), ("scales", scales)])
                where = "%s at %s" % (name, "x".join(map(str, shp)))
                if ya is None or yb is None:
                    # Refused or failed alike is no wrong answer; one of the
                    # two only is a difference.
                    if (ya is None) != (yb is None) or ans_a.split("\t")[0] != ans_b.split("\t")[0]:
                        fails.append("%s: A %r, B %r" % (where, ans_a, ans_b))
                    continue
                # Scales of 1 on the fast path are no op at all (an alias).
                ident = want_fast and sc == (1, 1)
                nn, general = graph_has(wa, "ResizeNearestNeighbor", "OnnxResize")
                if (nn, general) != (want_fast and not ident, not want_fast):
                    fails.append("%s: ResizeNearestNeighbor %s, OnnxResize %s, expected %s"
                                 % (where, nn, general, "no op" if ident else
                                    "the fast path" if want_fast else "the general kernel"))
                if ya.shape != yb.shape or not np.array_equal(ya.view(np.uint32),
                                                              yb.view(np.uint32)):
                    d = "shapes %s, %s" % (ya.shape, yb.shape) if ya.shape != yb.shape else \
                        "max abs diff %g" % np.max(np.abs(ya - yb))
                    fails.append("%s: fast path differs from the general kernel (%s)" % (where, d))
                    continue
                if mode == "nearest":
                    r = ref_nearest(x, sc, ctm, nm)
                    if r.shape != ya.shape or not np.array_equal(r, ya):
                        fails.append("%s: differs from ONNX's formula" % where)
        # An output size of 2^31 must be refused, not wrapped into int32.
        big = os.path.join(tmp, "big.onnx")
        onnx.save(build(13, "nearest", "asymmetric", "floor", (1024, 1), True), big)
        ans, y = worker.run(big, os.path.join(tmp, "wbig"),
                            [("x", np.zeros((1, 1, 1 << 21, 1), np.float32))])
        if y is not None or not ans.startswith("error"):
            fails.append("2^21 rows x 1024: expected a run-time error, got %r" % ans)
        else:
            print("2^21 rows x 1024 refused: %s" % ans)
    finally:
        worker.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d cases (%d models, %d on the fast path), %d failures" %
          (cases, len(combos), fast_cases, len(fails)))
    for f in fails:
        print("FAIL: " + f)
    if fast_cases == 0:
        print("FAIL: no case took the fast path")
        return 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
