#!/usr/bin/python3
"""Where does dcmserve's output of an ONNX model part from ONNX Runtime's?

Usage (Debian's interpreter; onnxruntime-node from bench/install_ort.sh):

    /usr/bin/python3 tests/tools/onnx_layer_diff.py FOLDER [--ops Conv,Add] [--dcmserve PATH]

FOLDER holds model.onnx and io.json as ../shared/testdata/onnx_wild's folders
do (io.json's "inputs": [{"name", "file"}], files relative to FOLDER).

The model is copied with the float32 outputs of its nodes (of the ops named by
--ops, all ops when absent) added as graph outputs, and that copy is run three
times: in ONNX Runtime with graph optimisation level 'all' and 'disabled', and
in `dcmserve run`. One line per added output, in graph order:

    dcm-dis   dcmserve against ORT 'disabled' (the operators as written)
    all-dis   ORT 'all' against ORT 'disabled' (what ORT's own rewrites move)
    dcm-all   dcmserve against ORT 'all'

each as the largest absolute difference, that divided by the tensor's largest
magnitude, and the number of elements outside numpy.allclose(rtol=1e-3,
atol=1e-5). A node whose dcm-dis grows well past its all-dis, or past float32
rounding (about 1e-7 of the magnitude per layer), is where to look.

--f64 also evaluates the unchanged model in float64 with numpy (weights and
inputs as stored, every op in double; a small set of ops: Conv, element-wise
arithmetic, Relu, Clip, Sigmoid, Pad, Transpose, Concat, Slice, Shape,
Reshape, linear Resize) and prints how far ORT 'all', ORT 'disabled' and
dcmserve each are from that: when ORT's own output is outside the rule
against the float64 result, no float32 summation order but ORT's matches it.

An added graph output keeps ORT from fusing its node away, so 'all' here is
not bit for bit ORT's 'all' on the unchanged model; the last lines (the
model's own outputs) are run on the unchanged model too, for that.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import it_onnx_wild  # noqa: E402
import ort_oracle  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-3, 1e-5


def stats(got, ref):
    """(max abs diff, that / max |ref|, elements outside the rule)."""
    d = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    bad = int((~np.isclose(got, ref, rtol=RTOL, atol=ATOL)).sum())
    dmax = float(d.max()) if d.size else 0.0
    return dmax, dmax / scale if scale > 0 else 0.0, bad


def _conv64(x, w, b, at):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    grp = at.get("group", 1)
    st, dl = at.get("strides", [1, 1]), at.get("dilations", [1, 1])
    p = at.get("pads", [0, 0, 0, 0])
    if at.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID") or x.ndim != 4:
        sys.exit("--f64: only 2-D Conv with explicit pads")
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    ho = (h + p[0] + p[2] - dl[0] * (kh - 1) - 1) // st[0] + 1
    wo = (wd + p[1] + p[3] - dl[1] * (kw - 1) - 1) // st[1] + 1
    out = np.zeros((n, m, ho, wo))
    mg = m // grp
    for ky in range(kh):
        for kx in range(kw):
            xs = xp[:, :, ky * dl[0]:ky * dl[0] + st[0] * (ho - 1) + 1:st[0],
                    kx * dl[1]:kx * dl[1] + st[1] * (wo - 1) + 1:st[1]]
            if cg == 1 and mg == 1:  # depthwise
                out += w[None, :, 0, ky, kx, None, None] * xs
                continue
            for gi in range(grp):
                out[:, gi * mg:(gi + 1) * mg] += np.einsum(
                    "mc,nchw->nmhw", w[gi * mg:(gi + 1) * mg, :, ky, kx],
                    xs[:, gi * cg:(gi + 1) * cg], optimize=True)
    return out if b is None else out + b[None, :, None, None]


def _resize64(x, scales, sizes, at):
    if at.get("mode", b"nearest") != b"linear":
        sys.exit("--f64: only Resize mode linear")
    ctm = at.get("coordinate_transformation_mode", b"half_pixel")
    out = x
    for ax in range(x.ndim):
        n = x.shape[ax]
        no = int(sizes[ax]) if sizes is not None else int(np.floor(n * float(scales[ax])))
        sc = no / n if sizes is not None else float(scales[ax])
        if no == n and sc == 1.0:
            continue
        o = np.arange(no, dtype=np.float64)
        if ctm == b"half_pixel":
            c = (o + 0.5) / sc - 0.5
        elif ctm == b"asymmetric":
            c = o / sc
        elif ctm == b"align_corners":
            c = o * (n - 1) / (no - 1) if no > 1 else np.zeros(no)
        else:
            sys.exit("--f64: Resize coordinate_transformation_mode %s" % ctm.decode())
        c = np.clip(c, 0, n - 1)
        i0 = np.floor(c).astype(np.int64)
        i1 = np.minimum(i0 + 1, n - 1)
        shape = [1] * x.ndim
        shape[ax] = no
        fr = (c - i0).reshape(shape)
        out = np.take(out, i0, axis=ax) * (1 - fr) + np.take(out, i1, axis=ax) * fr
    return out


def eval_f64(model, inputs):
    """{graph output: float64 array} of the model's float outputs, every op
    evaluated in double by numpy (see the module doc for the ops)."""
    g = model.graph
    val = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    val.update(inputs)
    val = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in val.items()}
    prod = {o: n for n in g.node for o in n.output}
    binary = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}
    known = set(binary) | {"Constant", "Conv", "Relu", "Clip", "Sigmoid", "Transpose", "Pad",
                           "Shape", "Concat", "Reshape", "Slice", "Resize"}
    need = set()
    for out in g.output:
        if out.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            continue
        cone, todo = set(), [out.name]
        while todo:
            t = todo.pop()
            if t not in cone and t in prod:
                cone.add(t)
                todo += list(prod[t].input)
        missing = sorted({prod[t].op_type for t in cone} - known)
        if missing:
            print("--f64: output %s left out (needs %s)" % (out.name, ", ".join(missing)))
        else:
            need |= cone
    for n in g.node:
        if not any(o in need for o in n.output):
            continue
        at = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        i = [val[k] if k else None for k in n.input]
        op = n.op_type
        if op == "Constant":
            r = numpy_helper.to_array(at["value"])
            r = r.astype(np.float64) if r.dtype == np.float32 else r
        elif op == "Conv":
            r = _conv64(i[0], i[1], i[2] if len(i) > 2 else None, at)
        elif op in binary:
            r = binary[op](i[0], i[1])
        elif op == "Relu":
            r = np.maximum(i[0], 0)
        elif op == "Clip":
            r = np.clip(i[0], i[1] if len(i) > 1 and i[1] is not None else -np.inf,
                        i[2] if len(i) > 2 and i[2] is not None else np.inf)
        elif op == "Sigmoid":
            r = 1 / (1 + np.exp(-i[0]))
        elif op == "Transpose":
            r = np.transpose(i[0], at.get("perm"))
        elif op == "Pad" and at.get("mode", b"constant") == b"constant":
            k = len(i[1]) // 2
            r = np.pad(i[0], [(int(i[1][d]), int(i[1][d + k])) for d in range(k)],
                       constant_values=float(i[2]) if len(i) > 2 and i[2] is not None else 0)
        elif op == "Shape":
            r = np.array(i[0].shape, np.int64)
        elif op == "Concat":
            r = np.concatenate(i, axis=at["axis"])
        elif op == "Reshape":
            shape = [i[0].shape[d] if v == 0 else int(v) for d, v in enumerate(i[1])]
            r = i[0].reshape(shape)
        elif op == "Slice":
            axes = i[3] if len(i) > 3 and i[3] is not None else range(len(i[1]))
            steps = i[4] if len(i) > 4 and i[4] is not None else [1] * len(i[1])
            sl = [slice(None)] * i[0].ndim
            for s0, e0, ax, sp in zip(i[1], i[2], axes, steps):
                sl[int(ax)] = slice(int(s0), int(max(min(e0, 1 << 62), -(1 << 62))), int(sp))
            r = i[0][tuple(sl)]
        elif op == "Resize":
            sc = i[2] if len(i) > 2 and i[2] is not None and i[2].size else None
            sz = i[3] if len(i) > 3 and i[3] is not None and i[3].size else None
            r = _resize64(i[0], sc, sz, at)
        else:
            sys.exit("--f64: op %s (node %s) is not evaluated here" % (op, n.name))
        if len(n.output) > 1:
            sys.exit("--f64: node %s has several outputs" % n.name)
        val[n.output[0]] = r
    return {o.name: val[o.name] for o in g.output if o.name in val and o.name in need}


def dcmserve_run(folder, inputs, work):
    """{output name: array} of `dcmserve run` on version folder `folder`."""
    rc, err, outs = it_onnx_wild.run_model(folder, inputs, work)
    if rc != 0:
        sys.exit("dcmserve run failed:\n" + err[-2000:])
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--ops", default="", help="comma-separated op types to expose")
    ap.add_argument("--f64", action="store_true", help="also against a float64 evaluation")
    ap.add_argument("--dcmserve", default=os.path.join(SRC, "build", "dcmserve"))
    a = ap.parse_args()
    it_onnx_wild.DCMSERVE = a.dcmserve
    why = ort_oracle.available()
    if why:
        sys.exit(why)
    ops = set(filter(None, a.ops.split(",")))
    io = json.load(open(os.path.join(a.folder, "io.json")))
    inputs = {i["name"]: np.load(os.path.join(a.folder, i["file"])) for i in io["inputs"]}
    model = onnx.load(os.path.join(a.folder, "model.onnx"))
    inferred = shape_inference.infer_shapes(model)
    elem = {v.name: v.type.tensor_type.elem_type
            for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    own = [o.name for o in model.graph.output]
    order, added = {}, []
    for i, n in enumerate(model.graph.node):
        for o in n.output:
            order[o] = (i, n.op_type)
        if n.op_type == "Constant" or (ops and n.op_type not in ops):
            continue
        for o in n.output:
            if o and o not in own and elem.get(o) == onnx.TensorProto.FLOAT:
                model.graph.output.append(helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT,
                                                                        None))
                added.append(o)
    work = tempfile.mkdtemp(prefix="onnx_layer_diff_")
    try:
        vdir = os.path.join(work, "m", "1")
        os.makedirs(vdir)
        onnx.save(model, os.path.join(vdir, "model.onnx"))
        ort = {opt: ort_oracle.run(os.path.join(vdir, "model.onnx"), inputs, opt)
               for opt in ("all", "disabled")}
        outs = dcmserve_run(vdir, inputs, os.path.join(work, "layers"))
        print("%4s %-10s %-32s %9s | %-25s | %-25s | %-25s" % (
            "node", "op", "output (tail)", "max|ref|", "dcm-dis: diff rel outside",
            "all-dis", "dcm-all"))
        for o in sorted(added + own, key=lambda x: order.get(x, (1 << 30, ""))[0]):
            got, r_all, r_dis = outs.get(o), ort["all"].get(o), ort["disabled"].get(o)
            if got is None or r_all is None or r_all.dtype != np.float32:
                continue
            if got.shape != r_all.shape:
                print("%4d %-10s %-32s shape %s, ORT %s" % (order[o][0], order[o][1], o[-32:],
                                                            got.shape, r_all.shape))
                continue
            cols = [stats(got, r_dis), stats(r_all, r_dis), stats(got, r_all)]
            print("%4d %-10s %-32s %9.3g | %s" % (
                order[o][0], order[o][1], o[-32:], float(np.abs(r_dis).max()) if r_dis.size else 0,
                " | ".join("%8.2g %8.2g %7d" % c for c in cols)), flush=True)
        # the model's own outputs, with ORT free to fuse everything
        plain = {opt: ort_oracle.run(os.path.join(a.folder, "model.onnx"), inputs, opt)
                 for opt in ("all", "disabled")}
        plain_out = dcmserve_run(a.folder, inputs, os.path.join(work, "plain"))
        print("unchanged model:")
        for o in own:
            got, r_all, r_dis = plain_out.get(o), plain["all"][o], plain["disabled"][o]
            if got is None or r_all.dtype != np.float32:
                continue
            cols = [stats(got, r_dis), stats(r_all, r_dis), stats(got, r_all)]
            print("     %-10s %-32s %9.3g | %s" % ("output", o[-32:], float(np.abs(r_dis).max()),
                                                   " | ".join("%8.2g %8.2g %7d" % c for c in cols)))
        if a.f64:
            truth = eval_f64(onnx.load(os.path.join(a.folder, "model.onnx")), inputs)
            print("against float64 (diff, rel, outside the rule): ORT all | ORT disabled | dcm")
            for o, t in truth.items():
                got = plain_out.get(o)
                cols = [stats(plain["all"][o], t), stats(plain["disabled"][o], t)]
                cols += [stats(got, t)] if got is not None else []
                print("     %-10s %-32s %9.3g | %s" % ("output", o[-32:], float(np.abs(t).max()),
                                                       " | ".join("%8.2g %8.2g %7d" % c
                                                                  for c in cols)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
