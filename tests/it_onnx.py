#!/usr/bin/python3
"""it_onnx: `dcmserve import-onnx` and `dcmserve benchmark` from the command line.

Imports every test model of tests/data/onnx (made by tests/tools/gen_onnx_models.py),
decodes the written saved_model.pb with Python protobuf classes compiled from
our proto/ files (an independent parser) and checks the serving_default
signature against the ONNX graph as the onnx package reads it; checks that an
unsupported op fails naming op and node; `dcmserve show` prints the signature;
`dcmserve run` on the stored inputs writes outputs within 1e-4 of ONNX Runtime's
(also with a DICOM file through --dicom_input); the daemon serves imported
models over TF Serving's Predict with the same results; benchmarks an imported
model with --json; a 3-D U-Net with dynamic batch and spatial axes imports and
runs at two input sizes against numpy, as does a 2-D ConvTranspose with
dynamic N, H, W. The Check test `onnx` covers the same numerics in-process.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, float_tensor, gen_protos, tensor_values  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCMSERVE = os.environ.get("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
DATA = os.path.join(SRC, "tests", "data", "onnx")
FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def run(*args):
    return subprocess.run([DCMSERVE] + list(args), capture_output=True, text=True, timeout=300)


def onnx_sig(path):
    """{name: (elem_type, dims with -1 for symbolic)} of graph inputs and outputs."""
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}

    def info(vi):
        dims = [d.dim_value if d.HasField("dim_value") else -1
                for d in vi.type.tensor_type.shape.dim]
        return vi.type.tensor_type.elem_type, dims
    ins = {v.name: info(v) for v in m.graph.input if v.name not in inits}
    outs = {v.name: info(v) for v in m.graph.output}
    return ins, outs

CONVS = ("Conv2D", "DepthwiseConv2dNative")
FUSED = {"_FusedConv2D": "Conv2D", "_FusedDepthwiseConv2dNative": "DepthwiseConv2dNative",
         "_FusedMatMul": "MatMul"}
ACTS = ("Relu", "Relu6", "LeakyRelu")


def check_fusion(name, gd):
    """Fused ops as TensorFlow defines them, no missed fusion, no Pad before a conv."""
    by = {n.name: n for n in gd.node}
    uses = {}
    for n in gd.node:
        for i in n.input:
            src = i.lstrip("^").split(":")[0]
            uses[src] = uses.get(src, 0) + 1

    def src_of(ref):
        return by.get(ref.split(":")[0]) if ":" not in ref else None

    bad = []
    for n in gd.node:
        if n.op in FUSED:
            fo = [s.decode() for s in n.attr["fused_ops"].list.s]
            na = n.attr["num_args"].i
            ok = (len(n.input) == 3 and na == 1 and fo[:1] == ["BiasAdd"] and len(fo) <= 2
                  and (len(fo) == 1 or fo[1] in ACTS) and n.attr["T"].type == 1)
            b = src_of(n.input[2])
            w = src_of(n.input[1])
            if ok and b is not None and b.op == "Const" and w is not None and w.op == "Const":
                bd = [d.size for d in b.attr["value"].tensor.tensor_shape.dim]
                wd = [d.size for d in w.attr["value"].tensor.tensor_shape.dim]
                if n.op == "_FusedConv2D":
                    want = wd[3]
                elif n.op == "_FusedDepthwiseConv2dNative":
                    want = wd[2] * wd[3]
                else:
                    want = wd[0] if n.attr["transpose_b"].b else wd[1]
                ok = bd == [want]
            if not ok:
                bad.append("%s %s fused_ops %s num_args %d" % (n.op, n.name, fo, na))
        x = src_of(n.input[0]) if n.input else None
        if x is None or uses.get(x.name, 0) != 1:
            continue
        if n.op == "BiasAdd" and x.op in CONVS + ("MatMul",):
            bad.append("BiasAdd %s after %s %s not fused" % (n.name, x.op, x.name))
        if n.op in ACTS and (x.op in CONVS or (x.op in FUSED and len(x.attr["fused_ops"].list.s) == 1)):
            bad.append("%s %s after %s %s not fused" % (n.op, n.name, x.op, x.name))
        if (n.op in CONVS or n.op in ("_FusedConv2D", "_FusedDepthwiseConv2dNative")) \
                and x.op in ("Pad", "PadV2"):
            bad.append("%s %s reads Pad %s" % (n.op, n.name, x.name))
    check(not bad, "%s: fused nodes well formed, nothing left unfused: %s" % (name, bad[:3]))
    ops = [n.op for n in gd.node]
    if name == "resnet":
        # Every ONNX Conv of the ResNet has a bias or a folded BatchNormalization.
        check("Conv2D" not in ops and ops.count("_FusedConv2D") >= 5,
              "resnet: every conv is a _FusedConv2D (%d)" % ops.count("_FusedConv2D"))
        acts = [n for n in gd.node if n.op == "_FusedConv2D"
                and [s.decode() for s in n.attr["fused_ops"].list.s] == ["BiasAdd", "Relu"]]
        check(len(acts) >= 3, "resnet: Conv + BatchNorm + Relu fused (%d)" % len(acts))
        expl = [n for n in gd.node if n.op == "_FusedConv2D"
                and n.attr["padding"].s == b"EXPLICIT"]
        check(expl and all(len(n.attr["explicit_paddings"].list.i) == 8 for n in expl),
              "resnet: non-SAME pads as padding EXPLICIT (%d convs)" % len(expl))
        check("Pad" not in ops, "resnet: no Pad op")
        check("_FusedMatMul" in ops, "resnet: Gemm + bias is a _FusedMatMul")


def dicom_guards(tmp):
    """--dicom_modality refuses other modalities; without --size a file of
    another size than the model input is refused, naming both sizes."""
    ct = os.path.join(DATA, "ct64.dcm")

    def imported(tag, *extra):
        out = os.path.join(tmp, "dicom_" + tag, "1")
        r = run("import-onnx", os.path.join(DATA, "dicom_seg.onnx"), "--output_dir", out,
                "--dicom_input", "image", "--window", "40,400", *extra)
        check(r.returncode == 0, "dicom_seg: import with %s (%s)" % (extra, r.stderr.strip()))
        return out

    def ran(model, dcm, tag):
        r = run("run", "--dir", model, "--input_files", "image=" + dcm, "--outdir",
                os.path.join(tmp, "o_" + tag))
        return r.returncode, r.stderr.strip()

    rc, err = ran(imported("mr", "--dicom_modality", "MR,PT"), ct, "mr")
    check(rc != 0 and "'CT'" in err and "MR,PT" in err and "(einval)" not in err,
          "--dicom_modality MR,PT: a CT file is refused naming what came (%s)" % err)
    model_ct = imported("ct", "--dicom_modality", "CT")
    rc, err = ran(model_ct, ct, "ct")
    check(rc == 0, "--dicom_modality CT: the CT file runs (%s)" % err)
    # The same CT cropped to 48x40 (real pixels, written with pydicom).
    import pydicom  # pylint: disable=import-outside-toplevel
    ds = pydicom.dcmread(ct)
    a = ds.pixel_array[:48, :40].copy()
    ds.PixelData = a.tobytes()
    ds.Rows, ds.Columns = a.shape
    small = os.path.join(tmp, "ct48x40.dcm")
    ds.save_as(small)
    rc, err = ran(model_ct, small, "small")
    check(rc != 0 and "48x40" in err and "64x64" in err,
          "no --size: a 48x40 file for a 64x64 model is refused naming both (%s)" % err)
    rc, err = ran(imported("sized", "--size", "64x64"), small, "sized")
    check(rc == 0, "--size 64x64: the 48x40 file is resized and runs (%s)" % err)


def refusals(tmp):
    """Forms that would give a wrong answer are refused at import, naming what is missing:
    a Resize coordinate mode of a later opset, Dropout in training mode (a constant true, or
    training_mode given at run time), an attribute the
    handler does not read, an op version the converter does not implement, LSTM / GRU
    activations with parameters, DFT's complex inverse, GatherND's batch_dims before opset 12,
    a one-sided STFT of a complex signal, TensorScatter on the batch axis, SwiGLU of two
    shapes, Scan-8 of a batch of 2."""
    from onnx import TensorProto, helper

    def model(node, inits, opset, out_dims, in_dims=(1, 1, 4, 4)):
        g = helper.make_graph(
            [node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_dims))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

    def scales(v):
        return helper.make_tensor("s", TensorProto.FLOAT, [4], v)

    cases = [
        ("coordinate mode of a later opset",
         model(helper.make_node("Resize", ["x", "", "s"], ["y"], name="rs", mode="linear",
                                coordinate_transformation_mode="half_pixel_symmetric"),
               [scales([1, 1, 0.5, 0.5])], 18, [1, 1, 2, 2]),
         ["rs", "Resize", "opset 18", "half_pixel_symmetric"]),
        ("training dropout", model(helper.make_node("Dropout", ["x", "", "t"], ["y"], name="dr"),
                                   [helper.make_tensor("t", TensorProto.BOOL, [], [True])], 13,
                                   [1, 1, 4, 4]),
         ["dr", "Dropout", "training_mode"]),
        ("unknown attribute", model(helper.make_node("Relu", ["x"], ["y"], name="re", foo=1), [],
                                    13, [1, 1, 4, 4]),
         ["re", "Relu", "foo"]),
        ("op version", model(helper.make_node("Upsample", ["x", "s"], ["y"], name="up"),
                             [scales([1, 1, 2, 2])], 10, [1, 1, 8, 8]),
         ["up", "Upsample", "opset 10", "version 10"]),
    ]
    # LSTM / GRU over x (T 2, B 1, I 4) with hidden size 2: activation_alpha, and an
    # activation that needs one, are refused naming the attribute.
    def rnn_w(name, gates, cols):
        return helper.make_tensor(name, TensorProto.FLOAT, [1, gates * 2, cols],
                                  [0.1] * (gates * 2 * cols))
    cases += [
        ("LSTM activation_alpha",
         model(helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="ls", hidden_size=2,
                                activations=["Sigmoid", "Tanh", "Tanh"],
                                activation_alpha=[1.0, 1.0, 1.0]),
               [rnn_w("w", 4, 4), rnn_w("r", 4, 2)], 14, [2, 1, 1, 2], (2, 1, 4)),
         ["ls", "LSTM", "activation_alpha"]),
        ("GRU HardSigmoid",
         model(helper.make_node("GRU", ["x", "w", "r"], ["y"], name="gr", hidden_size=2,
                                activations=["HardSigmoid", "Tanh"]),
               [rnn_w("w", 3, 4), rnn_w("r", 3, 2)], 14, [2, 1, 1, 2], (2, 1, 4)),
         ["gr", "GRU", "activations", "HardSigmoid"]),
    ]
    # DFT's complex inverse (see docs/onnx.md), GatherND's batch_dims before opset 12,
    # STFT's one-sided output of a complex signal, TensorScatter on the batch axis, SwiGLU
    # of two shapes.
    def i64(name, dims, vals):
        return helper.make_tensor(name, TensorProto.INT64, dims, vals)
    cases += [
        ("complex inverse DFT",
         model(helper.make_node("DFT", ["x"], ["y"], name="df", inverse=1), [], 17, [1, 4, 2],
               (1, 4, 2)),
         ["df", "DFT", "inverse=1"]),
        ("GatherND batch_dims at opset 11",
         model(helper.make_node("GatherND", ["x", "i"], ["y"], name="gn", batch_dims=1),
               [i64("i", [2, 1], [0, 1])], 11, [2], (2, 2)),
         ["gn", "GatherND", "batch_dims", "opset 12"]),
        ("one-sided STFT of a complex signal",
         model(helper.make_node("STFT", ["x", "s", "", "l"], ["y"], name="st"),
               [i64("s", [], [2]), i64("l", [], [4])], 17, [1, 3, 3, 2], (1, 8, 2)),
         ["st", "STFT", "onesided"]),
        ("TensorScatter on the batch axis",
         model(helper.make_node("TensorScatter", ["x", "u"], ["y"], name="ts", axis=0),
               [helper.make_tensor("u", TensorProto.FLOAT, [1, 2, 1], [1, 2])], 24, [1, 2, 1],
               (1, 2, 1)),
         ["ts", "TensorScatter", "axis"]),
        ("SwiGLU of two shapes",
         model(helper.make_node("SwiGLU", ["x", "g"], ["y"], name="sg"),
               [helper.make_tensor("g", TensorProto.FLOAT, [1, 3], [1, 2, 3])], 28, [1, 2],
               (1, 2)),
         ["sg", "SwiGLU", "same shape"]),
    ]
    # Scan-8 over a batch of 2 (only a batch of 1 is converted).
    fv = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_in"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_out"])], "body",
        [fv("s_in"), fv("x_in")], [fv("s_out"), fv("y_out")])
    cases.append(("Scan-8 of a batch of 2",
                  model(helper.make_node("Scan", ["", "x0", "x"], ["y", "z"], name="sc",
                                         num_scan_inputs=1, body=body),
                        [helper.make_tensor("x0", TensorProto.FLOAT, [2, 2], [0] * 4)], 8,
                        [2, 2], (2, 3, 2)),
                  ["sc", "Scan", "batch of 1"]))
    # Dropout whose training_mode is a graph input: whether it draws a random mask is
    # known only at run time, so the import refuses it.
    rt_drop = model(helper.make_node("Dropout", ["x", "", "t"], ["y"], name="dt"), [], 13,
                    [1, 1, 4, 4])
    rt_drop.graph.input.append(helper.make_tensor_value_info("t", TensorProto.BOOL, []))
    cases.append(("run-time training_mode", rt_drop,
                  ["dt", "Dropout", "training_mode comes at run time"]))
    for what, m, words in cases:
        path = os.path.join(tmp, "refuse.onnx")
        onnx.save_model(m, path)
        r = run("import-onnx", path, "--output_dir", os.path.join(tmp, "refused", "1"))
        check(r.returncode == 1 and all(w in r.stderr for w in words),
              "%s refused at import naming %s: exit %d, %s"
              % (what, words, r.returncode, r.stderr.strip()))


def _conv3d(x, w, b, stride, pad):
    """numpy Conv3d (NCDHW, OIDHW weights), the reference for dynamic_unet."""
    xp = np.pad(x, ((0, 0), (0, 0)) + ((pad, pad),) * 3)
    k = w.shape[2]
    o = [(xp.shape[2 + a] - k) // stride + 1 for a in range(3)]
    y = np.zeros((x.shape[0], w.shape[0], *o), np.float64)
    for i in range(k):
        for j in range(k):
            for m in range(k):
                patch = xp[:, :, i:i + stride * (o[0] - 1) + 1:stride,
                           j:j + stride * (o[1] - 1) + 1:stride,
                           m:m + stride * (o[2] - 1) + 1:stride]
                y += np.einsum("ncdhw,mc->nmdhw", patch, w[:, :, i, j, m])
    return y + b.reshape(1, -1, 1, 1, 1)


def dynamic_unet(tmp):
    """A PyTorch-style 3-D U-Net block exported with dynamic batch and spatial axes
    (N, D, H, W symbolic; Conv3d, InstanceNorm3d, LeakyReLU, strided Conv3d,
    ConvTranspose3d, skip Concat, and a Shape -> Slice -> Concat -> Reshape flatten of
    the result) imports as published and runs at two input sizes; outputs against a
    numpy reference computed here."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(28)
    w = {"w1": rng.normal(0, 0.4, (4, 1, 3, 3, 3)), "b1": rng.normal(0, 0.1, 4),
         "s1": rng.uniform(0.5, 1.5, 4), "t1": rng.normal(0, 0.1, 4),
         "w2": rng.normal(0, 0.2, (8, 4, 3, 3, 3)), "b2": rng.normal(0, 0.1, 8),
         "w3": rng.normal(0, 0.3, (8, 4, 2, 2, 2)), "b3": rng.normal(0, 0.1, 4),
         "w4": rng.normal(0, 0.3, (2, 8, 1, 1, 1)), "b4": rng.normal(0, 0.1, 2),
         "keep": np.array([0], np.int64), "two": np.array([2], np.int64),
         "minus1": np.array([-1], np.int64)}
    w = {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in w.items()}
    H = helper.make_node
    nodes = [
        H("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3, 3], pads=[1] * 6),
        H("InstanceNormalization", ["c1", "s1", "t1"], ["n1"], epsilon=1e-5),
        H("LeakyRelu", ["n1"], ["a1"], alpha=0.01),
        H("Conv", ["a1", "w2", "b2"], ["c2"], kernel_shape=[3, 3, 3], pads=[1] * 6,
          strides=[2, 2, 2]),
        H("LeakyRelu", ["c2"], ["a2"], alpha=0.01),
        H("ConvTranspose", ["a2", "w3", "b3"], ["u3"], kernel_shape=[2, 2, 2],
          strides=[2, 2, 2]),
        H("Concat", ["u3", "a1"], ["cat"], axis=1),
        H("Conv", ["cat", "w4", "b4"], ["y"], kernel_shape=[1, 1, 1]),
        H("Shape", ["y"], ["ys"]),
        H("Slice", ["ys", "keep", "two"], ["nc"]),
        H("Concat", ["nc", "minus1"], ["flat_shape"], axis=0),
        H("Reshape", ["y", "flat_shape"], ["flat"]),
    ]
    g = helper.make_graph(
        nodes, "unet3d_dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, "D", "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "D", "H", "W"]),
         helper.make_tensor_value_info("flat", TensorProto.FLOAT, ["N", 2, "S"])],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    path = os.path.join(tmp, "unet3d_dyn.onnx")
    onnx.save_model(m, path)
    out = os.path.join(tmp, "unet3d_dyn", "1")
    r = run("import-onnx", path, "--output_dir", out)
    check(r.returncode == 0, "dynamic 3-D U-Net: import with symbolic N, D, H, W (%s)"
          % r.stderr.strip())
    if r.returncode != 0:
        return

    def leaky(v):
        return np.where(v > 0, v, 0.01 * v)
    for shape in ((1, 1, 8, 8, 8), (3, 1, 4, 6, 10)):
        x = rng.normal(0, 1, shape).astype(np.float32)
        c1 = _conv3d(x, w["w1"], w["b1"], 1, 1)
        mu, var = c1.mean(axis=(2, 3, 4), keepdims=True), c1.var(axis=(2, 3, 4), keepdims=True)
        a1 = leaky((c1 - mu) / np.sqrt(var + 1e-5) * w["s1"].reshape(1, -1, 1, 1, 1)
                   + w["t1"].reshape(1, -1, 1, 1, 1))
        a2 = leaky(_conv3d(a1, w["w2"], w["b2"], 2, 1))
        u3 = np.zeros((shape[0], 4, shape[2], shape[3], shape[4]))
        for i in range(2):
            for j in range(2):
                for k in range(2):
                    u3[:, :, i::2, j::2, k::2] = np.einsum("ncdhw,co->nodhw", a2,
                                                           w["w3"][:, :, i, j, k])
        u3 += w["b3"].reshape(1, -1, 1, 1, 1)
        y = _conv3d(np.concatenate([u3, a1], axis=1), w["w4"], w["b4"], 1, 0)
        xin = os.path.join(tmp, "unet3d_dyn_x.npy")
        np.save(xin, x)
        outdir = os.path.join(tmp, "unet3d_dyn_out_%d" % shape[0])
        r = run("run", "--dir", out, "--inputs", "x=" + xin, "--outdir", outdir)
        check(r.returncode == 0, "dynamic 3-D U-Net %s: run exits 0 (%s)"
              % (shape, r.stderr.strip()))
        if r.returncode != 0:
            continue
        for name, ref in (("y", y), ("flat", y.reshape(shape[0], 2, -1))):
            got = np.load(os.path.join(outdir, name + ".npy"))
            diff = (float(np.max(np.abs(got - ref))) if got.shape == ref.shape
                    else float("inf"))
            check(diff <= 1e-4, "dynamic 3-D U-Net %s: %s %s within 1e-4 of numpy (max abs %g)"
                  % (shape, name, list(got.shape), diff))


def dynamic_convtranspose2d(tmp):
    """A 2-D ConvTranspose (stride 2, asymmetric pads, output_padding) on an input with
    symbolic N, H, W: input_sizes and the crop come from the input's shape at run time; two
    sizes against a numpy reference."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    b = rng.normal(size=2).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2],
                            pads=[1, 0, 0, 1], output_padding=[1, 0])
    g = helper.make_graph(
        [node], "ct2d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "OH", "OW"])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = os.path.join(tmp, "ct2d_dyn.onnx")
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = os.path.join(tmp, "ct2d_dyn", "1")
    r = run("import-onnx", path, "--output_dir", out)
    check(r.returncode == 0, "dynamic 2-D ConvTranspose: import (%s)" % r.stderr.strip())
    if r.returncode != 0:
        return
    for shape in ((1, 3, 4, 5), (2, 3, 7, 3)):
        x = rng.normal(size=shape).astype(np.float32)
        n, _, hh, ww = shape
        full = np.zeros((n, 2, (hh - 1) * 2 + 3 + 1, (ww - 1) * 2 + 3))
        for i in range(hh):
            for j in range(ww):
                full[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3] += np.einsum("nc,cokl->nokl",
                                                                       x[:, :, i, j], w)
        ref = full[:, :, 1:, :-1] + b.reshape(1, -1, 1, 1)
        xin = os.path.join(tmp, "ct2d_x.npy")
        np.save(xin, x)
        outdir = os.path.join(tmp, "ct2d_out_%d" % n)
        r = run("run", "--dir", out, "--inputs", "x=" + xin, "--outdir", outdir)
        got = np.load(os.path.join(outdir, "y.npy")) if r.returncode == 0 else None
        diff = (float(np.max(np.abs(got - ref))) if got is not None and got.shape == ref.shape
                else float("inf"))
        check(diff <= 1e-4, "dynamic 2-D ConvTranspose %s: y %s within 1e-4 of numpy (max abs %g)"
              % (shape, list(ref.shape), diff))


def serve_checks(tmp):
    """`dcmserve serve` on imported models: Predict over gRPC vs ORT outputs."""
    pb = gen_protos()
    for name, dicom in (("unet", False), ("dicom_seg", True)):
        base = os.path.join(tmp, "serve_" + name)
        args = ["import-onnx", os.path.join(DATA, name + ".onnx"), "--output_dir",
                os.path.join(base, "1")]
        if dicom:
            args += ["--dicom_input", "image", "--window", "40,400"]
        r = run(*args)
        check(r.returncode == 0, "serve %s: import (%s)" % (name, r.stderr.strip()))
        d = Daemon(["--model_name=" + name, "--model_base_path=" + base])
        try:
            d.wait_health(1)
            req = pb.tfs.PredictRequest()
            req.model_spec.name = name
            if dicom:
                t = pb.fw.TensorProto(dtype=pb.fw.DT_STRING)
                t.tensor_shape.dim.add(size=1)
                with open(os.path.join(DATA, "ct64.dcm"), "rb") as f:
                    t.string_val.append(f.read())
                req.inputs["image"].CopyFrom(t)
            else:
                x = np.load(os.path.join(DATA, name + ".in.image.npy"))
                req.inputs["image"].CopyFrom(float_tensor(x.ravel(), list(x.shape), content=True))
            resp = d.stub.Predict(req, timeout=60)
            outs = ["seg"] if dicom else ["mask", "foreground"]
            for k in outs:
                ref = np.load(os.path.join(DATA, "%s.out.%s.npy" % (name, k)))
                tp = resp.outputs[k]
                shape = [dim.size for dim in tp.tensor_shape.dim]
                got = np.array(tensor_values(tp), dtype=np.float32)
                ok = shape == list(ref.shape)
                diff = float(np.max(np.abs(got.reshape(ref.shape) - ref))) if ok else float("inf")
                check(diff <= 1e-4, "serve %s: Predict %s shape %s within 1e-4 of ORT (max abs %g)"
                      % (name, k, shape, diff))
        finally:
            rc = d.stop()
            check(rc == 0, "serve %s: daemon exits 0 on SIGTERM (got %s)" % (name, rc))
            d.close()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        pb2 = gen_protos().sm
        for name in ("resnet", "unet", "mobile", "misc", "upsample9"):
            model = os.path.join(DATA, name + ".onnx")
            out = os.path.join(tmp, name, "1")
            r = run("import-onnx", model, "--output_dir", out)
            check(r.returncode == 0, "%s: import-onnx exits 0 (%s)" % (name, r.stderr.strip()))
            if r.returncode != 0:
                continue
            sm = pb2.SavedModel()
            with open(os.path.join(out, "saved_model.pb"), "rb") as f:
                sm.ParseFromString(f.read())
            check(len(sm.meta_graphs) == 1 and list(sm.meta_graphs[0].meta_info_def.tags) ==
                  ["serve"], "%s: one MetaGraphDef tagged serve" % name)
            mg = sm.meta_graphs[0]
            check("serving_default" in mg.signature_def, "%s: serving_default exists" % name)
            sd = mg.signature_def["serving_default"]
            ins, outs = onnx_sig(model)
            nodes = {n.name for n in mg.graph_def.node}
            for want, got in ((ins, sd.inputs), (outs, sd.outputs)):
                check(set(want) == set(got.keys()),
                      "%s: signature keys %s == ONNX names %s" % (name, sorted(got), sorted(want)))
                for k, (etype, dims) in want.items():
                    if k not in got:
                        continue
                    ti = got[k]
                    gd = [d.size for d in ti.tensor_shape.dim]
                    check(etype == onnx.TensorProto.FLOAT and ti.dtype == 1,
                          "%s: %s is DT_FLOAT" % (name, k))
                    check(gd == dims and dims[0] == -1,
                          "%s: %s shape %s == ONNX %s, batch -1" % (name, k, gd, dims))
                    check(ti.name.split(":")[0] in nodes,
                          "%s: %s names graph tensor %s" % (name, k, ti.name))
            ops = {n.op for n in mg.graph_def.node}
            convs = {"Conv2D", "DepthwiseConv2dNative", "_FusedConv2D",
                     "_FusedDepthwiseConv2dNative"}
            check("Placeholder" in ops and ops & convs,
                  "%s: graph has Placeholder and a convolution" % name)
            print("     %s ops: %s" % (name, sorted(ops)))
            check_fusion(name, mg.graph_def)

            r = run("show", "--dir", out, "--all")
            shown = r.stdout
            check(r.returncode == 0 and "signature_def['serving_default']" in shown,
                  "%s: dcmserve show lists serving_default" % name)
            for k, (etype, dims) in list(ins.items()) + list(outs.items()):
                want = "shape: (%s)" % ", ".join(str(d) for d in dims)
                check("['%s'] tensor_info" % k in shown and want in shown,
                      "%s: show prints %s with %s" % (name, k, want))

            # dcmserve run on the stored input; outputs vs ONNX Runtime's.
            inp = list(ins)[0]
            outdir = os.path.join(tmp, name + "_out")
            r = run("run", "--dir", out, "--inputs",
                    "%s=%s" % (inp, os.path.join(DATA, "%s.in.%s.npy" % (name, inp))),
                    "--outdir", outdir)
            check(r.returncode == 0, "%s: dcmserve run exits 0 (%s)" % (name, r.stderr.strip()))
            for k in outs:
                got_p = os.path.join(outdir, k + ".npy")
                if not os.path.exists(got_p):
                    check(False, "%s: run wrote %s.npy" % (name, k))
                    continue
                got = np.load(got_p)
                ref = np.load(os.path.join(DATA, "%s.out.%s.npy" % (name, k)))
                diff = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
                check(diff <= 1e-4, "%s: run output %s within 1e-4 of ORT (max abs %g)"
                      % (name, k, diff))

        # DICOM in front: the file's bytes in, pydicom preprocessing + ORT out.
        out = os.path.join(tmp, "dicom", "1")
        r = run("import-onnx", os.path.join(DATA, "dicom_seg.onnx"), "--output_dir", out,
                "--dicom_input", "image", "--window", "40,400")
        check(r.returncode == 0, "dicom_seg: import with --dicom_input (%s)" % r.stderr.strip())
        r = run("show", "--dir", out, "--all")
        check("DT_STRING" in r.stdout and "shape: (-1)" in r.stdout,
              "dicom_seg: show prints a DT_STRING [-1] input")
        outdir = os.path.join(tmp, "dicom_out")
        r = run("run", "--dir", out, "--input_files",
                "image=" + os.path.join(DATA, "ct64.dcm"), "--outdir", outdir)
        check(r.returncode == 0, "dicom_seg: run with the DICOM file (%s)" % r.stderr.strip())
        if r.returncode == 0:
            got = np.load(os.path.join(outdir, "seg.npy"))
            ref = np.load(os.path.join(DATA, "dicom_seg.out.seg.npy"))
            diff = float(np.max(np.abs(got - ref))) if got.shape == ref.shape else float("inf")
            check(diff <= 1e-4, "dicom_seg: DICOM in = pydicom + ORT within 1e-4 (max abs %g)"
                  % diff)
        dicom_guards(tmp)
        r = run("import-onnx", os.path.join(DATA, "resnet.onnx"), "--output_dir",
                os.path.join(tmp, "x", "1"), "--dicom_input", "image")
        check(r.returncode == 2 and "--window" in r.stderr, "--dicom_input without --window: exit 2")

        r = run("import-onnx", os.path.join(DATA, "unsupported.onnx"), "--output_dir",
                os.path.join(tmp, "bad", "1"))
        check(r.returncode == 1, "unsupported op: exit status 1 (got %d)" % r.returncode)
        check("TfIdfVectorizer" in r.stderr and "my_tfidf" in r.stderr,
              "unsupported op: message names op and node: " + r.stderr.strip())
        check(not os.path.exists(os.path.join(tmp, "bad", "1", "saved_model.pb")),
              "unsupported op: nothing written")

        r = run("import-onnx", os.path.join(DATA, "resnet.onnx"))
        check(r.returncode == 2 and "--output_dir" in r.stderr, "missing --output_dir: usage, exit 2")
        refusals(tmp)

        # An existing version folder is not overwritten unless asked.
        resnet1 = os.path.join(tmp, "resnet", "1")
        pb_file = os.path.join(resnet1, "saved_model.pb")
        before = open(pb_file, "rb").read()
        r = run("import-onnx", os.path.join(DATA, "unet.onnx"), "--output_dir", resnet1)
        check(r.returncode == 1 and "already holds files" in r.stderr and "--overwrite" in r.stderr,
              "import into a full version folder: rc %d %s" % (r.returncode, r.stderr.strip()))
        check(open(pb_file, "rb").read() == before, "the refused import changed saved_model.pb")
        r = run("import-onnx", os.path.join(DATA, "unet.onnx"), "--output_dir", resnet1, "--overwrite")
        check(r.returncode == 0 and open(pb_file, "rb").read() != before,
              "--overwrite: rc %d %s" % (r.returncode, r.stderr.strip()))

        r = run("benchmark", "--dir", os.path.join(tmp, "unet"), "--batch", "2",
                "--iterations", "3", "--warmup", "1", "--intra_op_threads", "1", "--json")
        check(r.returncode == 0, "benchmark exits 0 (%s)" % r.stderr.strip())
        if r.returncode == 0:
            lines = r.stdout.strip().splitlines()
            res = json.loads(lines[-1])
            check(len(lines) == 1, "benchmark --json prints one line")
            check(res["batch"] == 2 and res["intra_op_threads"] == 1 and res["iterations"] == 3,
                  "benchmark reports its settings")
            check(0 < res["median_ms"] <= res["p99_ms"], "median_ms <= p99_ms, both > 0")
            check(res["images_per_s"] > 0 and res["peak_rss_mb"] > 0,
                  "images_per_s and peak_rss_mb > 0")
        r = run("benchmark", "--dir", os.path.join(tmp, "unet"), "--signature_def", "nope",
                "--iterations", "1")
        check(r.returncode == 1 and "nope" in r.stderr, "benchmark: unknown signature fails")
        serve_checks(tmp)
        dynamic_unet(tmp)
        dynamic_convtranspose2d(tmp)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
