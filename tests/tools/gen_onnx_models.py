#!/usr/bin/python3
"""Builds the ONNX test models of `dcmserve import-onnx` and their references.

Run with Debian's interpreter (python3-onnx, python3-numpy):

    /usr/bin/python3 tests/tools/gen_onnx_models.py --out tests/data/onnx
    /usr/bin/python3 tests/tools/gen_onnx_models.py --bench bench/models

--out writes the small test models, fixed inputs (<model>.in.<k>.npy) and the
outputs ONNX Runtime computes for them (<model>.out.<k>.npy). The references
come from onnxruntime-node (bench/install_ort.sh installs it into the ignored
bench/node_modules); tests/tools/ort_run.js runs one model. Tests only read
the stored .npy files, so `make test` needs neither node nor this script.

--bench writes the larger benchmark configurations (no references).

Every weight and input comes from numpy's generator with a fixed seed, so a
rerun writes the same models.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


class Builder:
    """Accumulates nodes and initializers of one graph."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0

    def name(self, kind):
        self.count += 1
        return "%s_%d" % (kind, self.count)

    def const(self, arr, kind="w"):
        n = self.name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, op_type, inputs, nout=1, **attrs):
        nm = self.name(op_type.lower())
        outs = ["%s_out%d" % (nm, i) if nout > 1 else nm + "_out" for i in range(nout)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=nm, **attrs))
        return outs if nout > 1 else outs[0]

    def weight(self, shape, fan_in):
        return self.const((self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in))
                          .astype(np.float32))

    def conv(self, x, cin, cout, k, stride=1, pad=None, group=1, dil=1, bias=True, **extra):
        if pad is None:
            pad = (k // 2) * dil
        w = self.weight((cout, cin // group, k, k), cin // group * k * k)
        ins = [x, w]
        if bias:
            ins.append(self.const((self.rng.standard_normal(cout) * 0.1).astype(np.float32), "b"))
        if "auto_pad" not in extra:
            extra["pads"] = list(pad) if isinstance(pad, (list, tuple)) else [pad] * 4
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride], group=group,
                       dilations=[dil, dil], **extra)

    def bn(self, x, c):
        r = self.rng
        g = self.const((1.0 + 0.1 * r.standard_normal(c)).astype(np.float32), "gamma")
        b = self.const((0.1 * r.standard_normal(c)).astype(np.float32), "beta")
        m = self.const((0.1 * r.standard_normal(c)).astype(np.float32), "mean")
        v = self.const((0.5 + r.random(c)).astype(np.float32), "var")
        return self.op("BatchNormalization", [x, g, b, m, v], epsilon=1e-5)

    def model(self, inputs, outputs, opset, name):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="dcmserve-gen")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def tinfo(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


# ---------------------------------------------------------------------------
# ResNet-style classifier: stem conv 7x7/2 + BN + ReLU + max pool, basic
# blocks with identity and projection shortcuts, global average pool, the
# PyTorch flatten pattern (Shape/Gather/Unsqueeze/Concat/Reshape), Gemm,
# Softmax. Opset 13.
def resnet(size, width, blocks, classes=4, seed=1, dynamic_hw=False):
    b = Builder(seed)
    x = "image"
    h = b.op("Relu", [b.bn(b.conv(x, 1, width, 7, stride=2, pad=3, bias=False), width)])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = width
    for stage, nblk in enumerate(blocks):
        for i in range(nblk):
            stride = 2 if (stage > 0 and i == 0) else 1
            cout = width * (2 ** stage)
            y = b.op("Relu", [b.bn(b.conv(h, c, cout, 3, stride=stride, bias=False), cout)])
            y = b.bn(b.conv(y, cout, cout, 3, bias=False), cout)
            sc = h
            if stride != 1 or cout != c:
                sc = b.bn(b.conv(h, c, cout, 1, stride=stride, pad=0, bias=False), cout)
            h = b.op("Relu", [b.op("Add", [y, sc])])
            c = cout
    h = b.op("GlobalAveragePool", [h])
    shp = b.op("Shape", [h])
    n = b.op("Gather", [shp, b.const(np.array(0, np.int64), "idx")], axis=0)
    n = b.op("Unsqueeze", [n, b.const(np.array([0], np.int64), "axes")])
    newshape = b.op("Concat", [n, b.const(np.array([-1], np.int64), "m1")], axis=0)
    h = b.op("Reshape", [h, newshape])
    fc_w = b.const((b.rng.standard_normal((classes, c)) * np.sqrt(1.0 / c)).astype(np.float32))
    fc_b = b.const((0.1 * b.rng.standard_normal(classes)).astype(np.float32), "b")
    h = b.op("Gemm", [h, fc_w, fc_b], transB=1)
    b.nodes.append(helper.make_node("Softmax", [h], ["probs"], name="softmax", axis=1))
    hw = ["H", "W"] if dynamic_hw else [size, size]
    return b.model([tinfo("image", ["N", 1] + hw)], [tinfo("probs", ["N", classes])],
                   13, "resnet")


# ---------------------------------------------------------------------------
# U-Net-style segmenter: two encoder levels with skip connections, a dilated
# bottleneck with InstanceNormalization and LeakyRelu, upsampling by Resize
# (nearest, then linear) and by ConvTranspose, channel Concat, a channel
# Softmax and a Sigmoid head. Opset 11 (Resize with roi/scales inputs).
def unet(size, width, seed=2):
    b = Builder(seed)
    x = "image"
    w = width

    def cbr(h, cin, cout):
        return b.op("Relu", [b.conv(h, cin, cout, 3)])

    e1 = cbr(cbr(x, 1, w), w, w)
    p1 = b.op("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2])
    e2 = cbr(cbr(p1, w, 2 * w), 2 * w, 2 * w)
    p2 = b.op("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2])
    bt = b.conv(p2, 2 * w, 4 * w, 3, dil=2)
    sc = b.const((1.0 + 0.1 * b.rng.standard_normal(4 * w)).astype(np.float32), "in_s")
    bi = b.const((0.1 * b.rng.standard_normal(4 * w)).astype(np.float32), "in_b")
    bt = b.op("InstanceNormalization", [bt, sc, bi], epsilon=1e-5)
    bt = b.op("LeakyRelu", [bt], alpha=0.1)
    empty = b.const(np.zeros(0, np.float32), "roi")
    scales = b.const(np.array([1, 1, 2, 2], np.float32), "scales")
    u2 = b.op("Resize", [bt, empty, scales], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    d2 = cbr(b.op("Concat", [u2, e2], axis=1), 6 * w, 2 * w)
    wt = b.weight((2 * w, w, 2, 2), 2 * w * 4)
    u1 = b.op("ConvTranspose", [d2, wt, b.const(np.zeros(w, np.float32), "b")],
              kernel_shape=[2, 2], strides=[2, 2])
    d1 = cbr(b.op("Concat", [u1, e1], axis=1), 2 * w, w)
    # A half-resolution side branch brought back with bilinear Resize.
    side = b.op("AveragePool", [d1], kernel_shape=[2, 2], strides=[2, 2])
    side = b.op("Resize", [side, empty, scales], mode="linear",
                coordinate_transformation_mode="half_pixel")
    d1 = b.op("Add", [d1, side])
    logits = b.conv(d1, w, 2, 1, pad=0)
    b.nodes.append(helper.make_node("Softmax", [logits], ["mask"], name="mask_softmax", axis=1))
    fg = b.op("Slice", [logits, b.const(np.array([1], np.int64), "st"),
                        b.const(np.array([2], np.int64), "en"),
                        b.const(np.array([1], np.int64), "ax")])
    b.nodes.append(helper.make_node("Sigmoid", [fg], ["foreground"], name="fg_sigmoid"))
    return b.model([tinfo("image", ["N", 1, size, size])],
                   [tinfo("mask", ["N", 2, size, size]), tinfo("foreground", ["N", 1, size, size])],
                   11, "unet")


# ---------------------------------------------------------------------------
# Mobile-style model: BatchNormalization, Clip (ReLU6), depthwise and grouped
# convolutions, hard-swish (HardSigmoid * x), Pad, AveragePool with
# count_include_pad, Split/Concat, Slice, an explicit standardisation
# (ReduceMean, Sub, Pow, Sqrt, Div), Squeeze/Unsqueeze, Transpose, Flatten,
# Gemm, MatMul, Tanh, Constant. Opset 17.
def mobile(size, width, seed=3):
    b = Builder(seed)
    x = "image"
    w = width
    # Per-sample standardisation written out with elementary ops.
    mean = b.op("ReduceMean", [x], axes=[1, 2, 3], keepdims=1)
    cen = b.op("Sub", [x, mean])
    var = b.op("ReduceMean", [b.op("Pow", [cen, b.const(np.array(2.0, np.float32), "two")])],
               axes=[1, 2, 3], keepdims=1)
    eps = b.op("Constant", [], value=numpy_helper.from_array(np.array(1e-3, np.float32)))
    h = b.op("Div", [cen, b.op("Sqrt", [b.op("Add", [var, eps])])])
    h = b.op("Clip", [b.bn(b.conv(h, 3, w, 3, stride=2, bias=False), w),
                      b.const(np.array(0.0, np.float32), "lo"),
                      b.const(np.array(6.0, np.float32), "hi")])
    # Depthwise 3x3 (multiplier 2), BN, hard-swish.
    h = b.bn(b.conv(h, w, 2 * w, 3, group=w, bias=False), 2 * w)
    h = b.op("Mul", [h, b.op("HardSigmoid", [h], alpha=1.0 / 6, beta=0.5)])
    # Grouped 1x1 (4 groups) and an asymmetric explicit Pad before a 3x3 valid conv.
    h = b.op("Relu", [b.conv(h, 2 * w, 2 * w, 1, pad=0, group=4)])
    h = b.op("Pad", [h, b.const(np.array([0, 0, 1, 0, 0, 0, 1, 2], np.int64), "pads")],
             mode="constant")
    h = b.conv(h, 2 * w, 2 * w, 3, pad=0, group=2)
    # Two branches from a channel Split, one through Tanh.
    a, c = b.op("Split", [h, b.const(np.array([w, w], np.int64), "split")], nout=2, axis=1)
    h = b.op("Concat", [b.op("Tanh", [a]), b.op("Sigmoid", [c])], axis=1)
    h = b.op("AveragePool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
             count_include_pad=1)
    h = b.op("AveragePool", [h], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1])
    h = b.op("Slice", [h, b.const(np.array([1, 1], np.int64), "st"),
                       b.const(np.array([-1, 1000], np.int64), "en"),
                       b.const(np.array([2, 3], np.int64), "ax")])
    # Channels-last through Transpose, then Flatten and two dense layers.
    h = b.op("Transpose", [h], perm=[0, 2, 3, 1])
    fl = b.op("Flatten", [h], axis=1)
    s2 = (size // 2 - 1) // 2 + 1   # spatial size after the pools
    hw = (s2 - 2) * (s2 - 1) * 2 * w
    d = b.op("Relu", [b.op("Gemm", [fl, b.weight((hw, 16), hw),
                                    b.const(np.zeros(16, np.float32), "b")], alpha=1.0, beta=1.0)])
    d = b.op("Unsqueeze", [d, b.const(np.array([1], np.int64), "axes")])
    d = b.op("MatMul", [d, b.weight((16, 3), 16)])
    d = b.op("Squeeze", [d, b.const(np.array([1], np.int64), "axes")])
    b.nodes.append(helper.make_node("LeakyRelu", [d], ["scores"], name="scores", alpha=0.2))
    return b.model([tinfo("image", ["N", 3, size, size])], [tinfo("scores", ["N", 3])], 17,
                   "mobile")


# ---------------------------------------------------------------------------
# Odds and ends the three networks do not reach: auto_pad SAME_UPPER,
# ceil_mode, reflect Pad, Resize by sizes (align_corners), strided and
# reversed Slice, Gather at run time, reductions, more elementwise ops,
# ConvTranspose with pads and output_padding, Softmax on a middle axis,
# BatchNormalization on a matrix, Gemm with transA, ConstantOfShape, Cast.
# Opset 14 (HardSwish).
def misc(size, seed=5):
    b = Builder(seed)
    x = "image"
    h = b.conv(x, 2, 4, 3, stride=2, pad=0, auto_pad="SAME_UPPER")
    h = b.conv(h, 4, 4, 3, pad=0, auto_pad="SAME_LOWER", group=2)
    h = b.op("HardSwish", [h])
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    h = b.bn(h, 4)   # not after a Conv: stays a FusedBatchNormV3
    h = b.op("Pad", [h, b.const(np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), "pads")],
             mode="reflect")
    # sizes = Shape(h)[0:2] ++ [9, 7], as exporters write it for a dynamic batch.
    nc = b.op("Slice", [b.op("Shape", [h]), b.const(np.array([0], np.int64), "st"),
                        b.const(np.array([2], np.int64), "en")])
    sizes = b.op("Concat", [nc, b.const(np.array([9, 7], np.int64), "hw")], axis=0)
    h = b.op("Resize", [h, b.const(np.zeros(0, np.float32), "roi"),
                        b.const(np.zeros(0, np.float32), "scales"), sizes],
             mode="linear", coordinate_transformation_mode="align_corners")
    wt = b.weight((4, 3, 3, 3), 36)
    h = b.op("ConvTranspose", [h, wt], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1],
             output_padding=[1, 0])
    h = b.op("Max", [b.op("Abs", [h]), b.op("Neg", [b.op("Floor", [h])])])
    h = b.op("Min", [h, b.const(np.array(2.5, np.float32), "cap")])
    sm = b.op("Softmax", [h], axis=1)
    r = b.op("Slice", [sm, b.const(np.array([0, -1], np.int64), "st"),
                       b.const(np.array([1000, -1000], np.int64), "en"),
                       b.const(np.array([2, 3], np.int64), "ax"),
                       b.const(np.array([2, -2], np.int64), "sp")])
    g = b.op("Gather", [r, b.const(np.array(1, np.int64), "i")], axis=1)
    s1 = b.op("ReduceSum", [g, b.const(np.array([2], np.int64), "axes")], keepdims=0)
    s2 = b.op("ReduceMax", [b.op("Exp", [g])], axes=[1], keepdims=0)
    gm = b.op("GlobalMaxPool", [b.op("Dropout", [b.op("Identity", [sm])])])
    gm = b.op("Squeeze", [gm, b.const(np.array([2, 3], np.int64), "axes")])
    v = b.op("Concat", [s1, s2, gm], axis=1)
    return b, v, x


def misc_model(size):
    b, v, x = misc(size)
    assert size == 16, "the width below is derived for 16x16 inputs"
    # 16 -> conv/2 SAME 8 -> conv SAME 8 -> maxpool 3/2 ceil 4 -> reflect pad
    # 4+3 = 7 (W 4+3 = 7) -> resize to 9x7 -> ConvTranspose x2 with pads and
    # output_padding: H 2*8+3+1-2 = 18, W 2*6+3-1 = 14 -> strided slice 9x7
    # -> gather channel 1: [N, 9, 7]; sum over W: 9, max over H: 7, 3 pooled
    # channels: 19 features.
    width = 19
    v = b.bn(v, width)
    wt = b.const((b.rng.standard_normal((width, 5)) * np.sqrt(1.0 / width)).astype(np.float32))
    v = b.op("Gemm", [b.op("Transpose", [v], perm=[1, 0]), wt,
                      b.const((0.1 * b.rng.standard_normal((1, 5))).astype(np.float32), "c")],
             transA=1, beta=0.5)
    ones = b.op("ConstantOfShape", [b.const(np.array([1, 5], np.int64), "shp")],
                value=numpy_helper.from_array(np.array([0.25], np.float32)))
    cnt = b.op("Cast", [b.const(np.array([[3]], np.int64), "three")], to=TensorProto.FLOAT)
    v = b.op("Add", [v, b.op("Mul", [ones, cnt])])
    b.nodes.append(helper.make_node("Sigmoid", [v], ["out"], name="out"))
    return b.model([tinfo(x, ["N", 2, size, size])], [tinfo("out", ["N", 5])], 14, "misc")


# Opset 9 Upsample (deprecated, still exported by old tools) and Slice with
# attributes.
def upsample9(size, seed=6):
    b = Builder(seed)
    h = b.op("Relu", [b.conv("image", 1, 3, 3)])
    h = b.op("Upsample", [h, b.const(np.array([1, 1, 2, 2], np.float32), "scales")],
             mode="nearest")
    h = b.op("Upsample", [h, b.const(np.array([1, 1, 1.5, 2], np.float32), "scales2")],
             mode="linear")
    h = b.op("Slice", [h], starts=[1], ends=[3], axes=[1])
    b.nodes.append(helper.make_node("Softmax", [h], ["y"], name="y", axis=3))
    return b.model([tinfo("image", ["N", 1, size, size])],
                   [tinfo("y", ["N", 2, size * 3, size * 4])], 9, "upsample9")


# ---------------------------------------------------------------------------
# For --dicom_input: a small segmenter on 1x64x64 windowed CT, and a synthetic
# CT file (int16 stored values, rescale intercept -1024) written by pydicom.
DICOM_WINDOW = (40.0, 400.0)


def dicom_seg(size, seed=7):
    b = Builder(seed)
    h = b.op("Relu", [b.conv("image", 1, 4, 3)])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Relu", [b.conv(h, 4, 4, 3)])
    h = b.op("Resize", [h, b.const(np.zeros(0, np.float32), "roi"),
                        b.const(np.array([1, 1, 2, 2], np.float32), "scales")], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    h = b.conv(h, 4, 2, 1, pad=0)
    b.nodes.append(helper.make_node("Softmax", [h], ["seg"], name="seg", axis=1))
    return b.model([tinfo("image", ["N", 1, size, size])], [tinfo("seg", ["N", 2, size, size])],
                   13, "dicom_seg")


# ---------------------------------------------------------------------------
# 3-D U-Net on a (1, 1, D, H, W) volume: Conv (3x3x3, 1x1x1, a strided one
# with asymmetric pads), InstanceNormalization, Relu, MaxPool, AveragePool,
# ConvTranspose (2x2x2 / 2), Resize (nearest x2), channel Concat skips.
# Opset 13. widths = channels of the three levels.
def conv3(b, x, cin, cout, k, stride=1, pads=None):
    if pads is None:
        pads = [k // 2] * 6
    w = b.weight((cout, cin, k, k, k), cin * k * k * k)
    bias = b.const((b.rng.standard_normal(cout) * 0.1).astype(np.float32), "b")
    return b.op("Conv", [x, w, bias], kernel_shape=[k] * 3, strides=[stride] * 3, pads=pads)


def inorm3(b, x, c):
    g = b.const((1.0 + 0.1 * b.rng.standard_normal(c)).astype(np.float32), "gamma")
    be = b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32), "beta")
    return b.op("InstanceNormalization", [x, g, be], epsilon=1e-5)


def unet3d(shape, widths, seed=9, small=False):
    b = Builder(seed)
    w1, w2, w3 = widths
    e1 = b.op("Relu", [conv3(b, "volume", 1, w1, 3)])
    e1 = b.op("Relu", [inorm3(b, conv3(b, e1, w1, w1, 3), w1)])
    h = b.op("MaxPool", [e1], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    e2 = b.op("Relu", [conv3(b, h, w1, w2, 3)])
    e2 = b.op("Relu", [conv3(b, e2, w2, w2, 3)])
    if small:
        # Strided conv with asymmetric pads (an explicit Pad) next to the pool.
        s = b.op("Relu", [conv3(b, e2, w2, w2, 3, stride=2, pads=[1, 1, 1, 0, 0, 0])])
    h = b.op("AveragePool", [e2], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    if small:
        h = b.op("Add", [h, s])
    m = b.op("Relu", [conv3(b, h, w2, w3, 3)])
    m = b.op("Relu", [conv3(b, m, w3, w3, 3)])
    wt = b.weight((w3, w2, 2, 2, 2), w3 * 8)
    bt = b.const((b.rng.standard_normal(w2) * 0.1).astype(np.float32), "b")
    u2 = b.op("ConvTranspose", [m, wt, bt], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    d2 = b.op("Concat", [u2, e2], axis=1)
    d2 = b.op("Relu", [conv3(b, d2, 2 * w2, w2, 3)])
    u1 = b.op("Resize", [d2, b.const(np.zeros(0, np.float32), "roi"),
                         b.const(np.array([1, 1, 2, 2, 2], np.float32), "scales")],
              mode="nearest")
    u1 = conv3(b, u1, w2, w1, 1)
    d1 = b.op("Concat", [u1, e1], axis=1)
    d1 = b.op("Relu", [conv3(b, d1, 2 * w1, w1, 3)])
    w = b.weight((2, w1, 1, 1, 1), w1)
    bias = b.const((b.rng.standard_normal(2) * 0.1).astype(np.float32), "b")
    b.nodes.append(helper.make_node("Conv", [d1, w, bias], ["logits"], name="head",
                                    kernel_shape=[1, 1, 1]))
    n, _, d, hh, ww = shape
    return b.model([tinfo("volume", [n, 1, d, hh, ww])], [tinfo("logits", [n, 2, d, hh, ww])],
                   13, "unet3d")


def write_3d_test(out):
    os.makedirs(out, exist_ok=True)
    shape = (1, 1, 8, 12, 16)
    m = unet3d(shape, (4, 8, 16), small=True)
    path = os.path.join(out, "unet3d.onnx")
    onnx.save_model(m, path)
    x = np.random.default_rng(101).standard_normal(shape).astype(np.float32)
    np.save(os.path.join(out, "unet3d.in.volume.npy"), x)
    for oname, arr in ort_run(path, [("volume", x)]):
        np.save(os.path.join(out, "unet3d.out.%s.npy" % oname), arr)
    print("wrote", path)


def write_ct(path, size):
    """A deterministic synthetic CT slice: body-like ellipse, bone ring, noise."""
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid
    ct = "1.2.840.10008.5.1.4.1.1.2"
    uid = generate_uid(entropy_srcs=["dcmserve gen_onnx_models ct"])
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = ct
    meta.MediaStorageSOPInstanceUID = uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(path, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = ct
    ds.SOPInstanceUID = uid
    ds.StudyInstanceUID = generate_uid(entropy_srcs=["dcmserve gen_onnx_models study"])
    ds.SeriesInstanceUID = generate_uid(entropy_srcs=["dcmserve gen_onnx_models series"])
    ds.Modality = "CT"
    ds.Rows = ds.Columns = size
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = 16
    ds.BitsStored = 16
    ds.HighBit = 15
    ds.PixelRepresentation = 1
    ds.RescaleIntercept = "-1024"
    ds.RescaleSlope = "1"
    rng = np.random.default_rng(8)
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1) * 2 - 1
    r = np.sqrt((xx / 0.8) ** 2 + (yy / 0.6) ** 2)
    hu = np.where(r < 1, 40 + 120 * xx, -1000).astype(np.float64)
    hu = np.where((r > 0.85) & (r < 1), 900, hu) + rng.normal(0, 30, hu.shape)
    ds.PixelData = np.round(hu + 1024).astype("<i2").tobytes()
    ds.is_little_endian = True
    ds.is_implicit_VR = False
    ds.save_as(path, write_like_original=False)
    return pydicom.dcmread(path)


def pydicom_window(ds, center, width):
    """pydicom preprocessing: modality LUT to HU, then clip to the window and
    scale to [0, 1] (LINEAR_EXACT with ymin 0, ymax 1), as a float32 NCHW batch."""
    from pydicom.pixel_data_handlers.util import apply_modality_lut
    hu = apply_modality_lut(ds.pixel_array, ds).astype(np.float64)
    lo, hi = center - width / 2, center + width / 2
    x = (np.clip(hu, lo, hi) - lo) / (hi - lo)
    return x.astype(np.float32)[None, None]


def unsupported():
    """A graph with an op the importer does not support (TfIdfVectorizer)."""
    b = Builder(4)
    h = b.op("Relu", ["x"])
    b.nodes.append(helper.make_node("TfIdfVectorizer", [h], ["y"], name="my_tfidf", mode="TF",
                                    min_gram_length=1, max_gram_length=1, max_skip_count=0,
                                    ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1]))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])
    return b.model([tinfo("x", ["N", 4])], [y], 13, "bad")


# ---------------------------------------------------------------------------
def ort_run(model_path, inputs):
    """Runs model_path in onnxruntime-node; returns the outputs as numpy arrays."""
    node_modules = os.path.join(SRC, "bench", "node_modules")
    if not os.path.isdir(os.path.join(node_modules, "onnxruntime-node")):
        subprocess.check_call(["sh", os.path.join(SRC, "bench", "install_ort.sh")])
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"model": os.path.abspath(model_path), "inputs": [], "outdir": tmp}
        for k, (name, arr) in enumerate(inputs):
            p = os.path.join(tmp, "in%d.bin" % k)
            arr.astype(np.float32).tofile(p)
            spec["inputs"].append({"name": name, "dims": list(arr.shape), "file": p})
        env = dict(os.environ, NODE_PATH=node_modules)
        res = subprocess.run(["node", os.path.join(HERE, "ort_run.js")],
                             input=json.dumps(spec), capture_output=True, text=True, env=env,
                             check=False)
        if res.returncode != 0:
            sys.exit("ort_run.js failed on %s:\n%s" % (model_path, res.stderr))
        outs = []
        for o in json.loads(res.stdout)["outputs"]:
            outs.append((o["name"], np.fromfile(o["file"], np.float32).reshape(o["dims"])))
        return outs


def write_test_set(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(100)
    models = {
        "resnet": (resnet(32, 8, [1, 1]), 1),
        "unet": (unet(32, 4), 1),
        "mobile": (mobile(24, 8), 3),
        "misc": (misc_model(16), 2),
        "upsample9": (upsample9(8), 1),
    }
    for name, (m, ch) in models.items():
        path = os.path.join(out, name + ".onnx")
        if name == "mobile":
            # Weights in an external data file, as large exports store them.
            for f in os.listdir(out):
                if f.startswith("mobile.weights"):
                    os.remove(os.path.join(out, f))
            onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location="mobile.weights", size_threshold=256)
        else:
            onnx.save_model(m, path)
        size = m.graph.input[0].type.tensor_type.shape.dim[2].dim_value
        x = rng.standard_normal((2, ch, size, size)).astype(np.float32)
        np.save(os.path.join(out, "%s.in.%s.npy" % (name, m.graph.input[0].name)), x)
        for oname, arr in ort_run(path, [(m.graph.input[0].name, x)]):
            np.save(os.path.join(out, "%s.out.%s.npy" % (name, oname)), arr)
        print("wrote", path)
    write_3d_test(out)
    onnx.save_model(unsupported(), os.path.join(out, "unsupported.onnx"))
    # DICOM in front: reference = pydicom preprocessing + ONNX Runtime.
    path = os.path.join(out, "dicom_seg.onnx")
    onnx.save_model(dicom_seg(64), path)
    ds = write_ct(os.path.join(out, "ct64.dcm"), 64)
    x = pydicom_window(ds, *DICOM_WINDOW)
    np.save(os.path.join(out, "dicom_seg.in.image.npy"), x)
    for oname, arr in ort_run(path, [("image", x)]):
        np.save(os.path.join(out, "dicom_seg.out.%s.npy" % oname), arr)
    print("wrote", path)


def write_bench_set(out):
    os.makedirs(out, exist_ok=True)
    for size in (256, 512):
        onnx.save_model(resnet(size, 32, [2, 2, 2]), os.path.join(out, "resnet%d.onnx" % size))
    # The same weights as resnet256 with symbolic N, H and W (bench_onnx_dynamic.sh).
    onnx.save_model(resnet(256, 32, [2, 2, 2], dynamic_hw=True),
                    os.path.join(out, "resnet_dyn.onnx"))
    onnx.save_model(unet(256, 16), os.path.join(out, "unet256.onnx"))
    onnx.save_model(unet3d((1, 1, 64, 128, 128), (16, 32, 64)),
                    os.path.join(out, "unet3d_64x128x128.onnx"))
    print("wrote benchmark models to", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="test models + ORT references go here")
    ap.add_argument("--bench", help="benchmark models go here")
    ap.add_argument("--only3d", action="store_true",
                    help="only the 3-D models (unet3d test model / 3-D U-Net benchmark)")
    a = ap.parse_args()
    if not a.out and not a.bench:
        ap.error("give --out and/or --bench")
    if a.only3d:
        if a.out:
            write_3d_test(a.out)
        if a.bench:
            os.makedirs(a.bench, exist_ok=True)
            onnx.save_model(unet3d((1, 1, 64, 128, 128), (16, 32, 64)),
                            os.path.join(a.bench, "unet3d_64x128x128.onnx"))
        return
    if a.out:
        write_test_set(a.out)
    if a.bench:
        write_bench_set(a.bench)


if __name__ == "__main__":
    sys.exit(main())
