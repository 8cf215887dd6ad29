#!/usr/bin/env python3
"""Sliding-window 3-D inference inside the graph (issue 32, acceptance 2).

A small 3-D ONNX model (Conv3d 1->4, Relu, Conv3d 4->3, Sigmoid; fixed
random weights, 'same' padding, so a patch's border differs from the whole
volume's and the blending matters) is imported with `import-onnx --dicom_input
image --sliding_window roi=32,32,32 ...` and run on a 64x96x96 series made
with pydicom from CT_small.dcm (cropped to 96x96, each slice's pixels shifted,
positions rewritten, files shuffled), and on a 20-slice series that is shorter
than the roi (padded and cropped back). The expected output is computed here,
independently: the series' volume from pydicom + numpy, the model as a numpy
convolution, and the blending from MONAI's documented formula for
SlidingWindowInferer (scan interval int(roi * (1 - overlap)) at least 1, or
roi when the axis equals it; windows until one reaches the end, the last
moved back; zero padding (r - n) // 2 before; Gaussian importance map of
sigma = 0.125 * roi, floored at max(min, 1e-3); answer Sum(w p) / Sum(w)).
Compared within 1e-5 for constant and Gaussian blending, NCDHW and NDHWC,
with --argmax labels, and with --spacing (the volume resampled for the model,
the answer resampled back to the series' grid: the volume's formula with the
spacings swapped); served over gRPC within a 24 MB request budget (a
smaller one refused naming the buffer), a 1 ms deadline cancels.
"""
import copy
import itertools
import os
import sys
import tempfile
import warnings

import numpy as np
import onnx
import pydicom
from onnx import TensorProto, helper, numpy_helper
from pydicom.uid import generate_uid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import it_dicom_volume as dv  # noqa: E402
import serve_client as sc  # noqa: E402

warnings.filterwarnings("ignore")

DCMSERVE = sc.DCMSERVE
TEST_FILES = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")
WINDOW = dv.WINDOW
ROI = (32, 32, 32)
TOL = 1e-5
# Shared with it_dicom_volume: its check / run helpers and failure list.
check, run, FAILS = dv.check, dv.run, dv.FAILS


# ---- the model, in ONNX and in numpy ----

RNG = np.random.default_rng(32)
W1 = (RNG.standard_normal((4, 1, 3, 3, 3)) * 0.4).astype(np.float32)
B1 = (RNG.standard_normal(4) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((3, 4, 3, 3, 3)) * 0.3).astype(np.float32)
B2 = (RNG.standard_normal(3) * 0.1).astype(np.float32)


def make_model(path, layout):
    """NCDHW model; with layout NHWC the same model behind Transposes, its
    input and output (N, D, H, W, C)."""
    nodes, x_in = [], "image"
    if layout == "NHWC":
        nodes.append(helper.make_node("Transpose", ["image"], ["x_t"], perm=[0, 4, 1, 2, 3]))
        x_in = "x_t"
    nodes += [
        helper.make_node("Conv", [x_in, "w1", "b1"], ["c1"], kernel_shape=[3, 3, 3],
                         pads=[1, 1, 1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3, 3],
                         pads=[1, 1, 1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["prob" if layout == "NCHW" else "p_t"]),
    ]
    if layout == "NHWC":
        nodes.append(helper.make_node("Transpose", ["p_t"], ["prob"], perm=[0, 2, 3, 4, 1]))
        xd, yd = ["N", 32, 32, 32, 1], ["N", 32, 32, 32, 3]
    else:
        xd, yd = ["N", 1, 32, 32, 32], ["N", 3, 32, 32, 32]
    inits = [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(B1, "b1"),
             numpy_helper.from_array(W2, "w2"), numpy_helper.from_array(B2, "b2")]
    g = helper.make_graph(nodes, "unet3d", [helper.make_tensor_value_info("image", TensorProto.FLOAT, xd)],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, yd)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def conv3d(x, w, b):
    """x (C, D, H, W), w (O, C, 3, 3, 3), zero padding 1; float64."""
    c, d, h, wd = x.shape
    xp = np.zeros((c, d + 2, h + 2, wd + 2))
    xp[:, 1:-1, 1:-1, 1:-1] = x
    out = np.zeros((w.shape[0], d, h, wd)) + b.astype(np.float64)[:, None, None, None]
    for dz, dy, dx in itertools.product(range(3), repeat=3):
        out += np.tensordot(w[:, :, dz, dy, dx].astype(np.float64),
                            xp[:, dz:dz + d, dy:dy + h, dx:dx + wd], axes=([1], [0]))
    return out


def model_np(patch):
    """patch (D, H, W) -> (3, D, H, W)."""
    h = np.maximum(conv3d(patch[None].astype(np.float64), W1, B1), 0.0)
    return 1.0 / (1.0 + np.exp(-conv3d(h, W2, B2)))


# ---- MONAI's sliding_window_inference, written from its documentation ----

def scan_interval(n, r, overlap):
    if r == n:
        return r
    return max(int(r * (1 - overlap)), 1)


def starts(n, r, step):
    out, k = [], 0
    while True:
        s = k * step
        out.append(min(s, n - r))
        if s + r >= n:
            return out
        k += 1


def importance(roi, gaussian, sigma_scale=0.125):
    if not gaussian:
        return np.ones(roi)
    m = None
    for r in roi:
        x = np.arange(r) - (r - 1) / 2.0
        g = np.exp(-(x ** 2) / (2 * (sigma_scale * r) ** 2))
        m = g if m is None else np.multiply.outer(m, g)
    return np.maximum(m, max(m.min(), 1e-3))


def sliding_window(vol, overlap, gaussian):
    """vol (D, H, W) -> (3, D, H, W)."""
    pads = []
    for n, r in zip(vol.shape, ROI):
        diff = max(r - n, 0)
        pads.append((diff // 2, diff - diff // 2))
    v = np.pad(vol, pads)
    st = [starts(n, r, scan_interval(n, r, overlap)) for n, r in zip(v.shape, ROI)]
    w = importance(ROI, gaussian)
    acc = np.zeros((3,) + v.shape)
    cnt = np.zeros(v.shape)
    for z, y, x in itertools.product(*st):
        sl = (slice(z, z + ROI[0]), slice(y, y + ROI[1]), slice(x, x + ROI[2]))
        acc[(slice(None),) + sl] += w * model_np(v[sl])
        cnt[sl] += w
    out = acc / cnt
    crop = tuple(slice(a, a + n) for (a, _), n in zip(pads, vol.shape))
    return out[(slice(None),) + crop].astype(np.float32)


# ---- resampling to --spacing and back (docs/dicom.md "Series volumes"; the
# formula's numpy form is it_dicom_volume's) ----

def forward(vol, have, spacing):
    """The decoded volume at `spacing` (the op's float32 attr widened)."""
    for ax in range(3):
        t = float(np.float32(spacing[ax]))
        vol = dv.resample(vol, ax, have[ax], t)
    return vol.astype(np.float32)


def back(pred, have, spacing, dims):
    """pred (C, d, h, w) on the resampled grid back to the series' dims:
    the same formula with the spacings swapped."""
    for ax in range(3):
        t = float(np.float32(spacing[ax]))
        pred = dv.resample(pred, ax + 1, t, have[ax], dims[ax])
    return pred


# ---- the series ----

def make_series(n, rows, tmp, tag, rng):
    base = pydicom.dcmread(os.path.join(TEST_FILES, "CT_small.dcm"))
    arr = base.pixel_array[:rows, :rows]
    series = generate_uid()
    out, vols = [], []
    for k in range(n):
        ds = copy.deepcopy(base)
        a = np.clip(arr.astype(np.int64) + 11 * k - 200 + rng.integers(-40, 40, arr.shape),
                    0, 4000).astype(arr.dtype)
        ds.Rows, ds.Columns = rows, rows
        ds.PixelData = a.tobytes()
        ds.SeriesInstanceUID = series
        ds.SOPInstanceUID = generate_uid()
        ds.ImageOrientationPatient = ["1", "0", "0", "0", "1", "0"]
        ds.ImagePositionPatient = ["-10.0", "20.5", "%.3f" % (100.0 + 2.5 * k)]
        ds.RescaleSlope = "1"
        ds.RescaleIntercept = "-1024"
        out.append(ds)
        vols.append(dv.window(a.astype(np.float32) * np.float32(1.0) + np.float32(-1024.0)))
    return dv.save_shuffled(out, rng, tmp, tag), np.stack(vols).astype(np.float32)


def import_sw(tmp, name, layout, *extra):
    onnx_path = os.path.join(tmp, "unet_%s.onnx" % layout)
    if not os.path.exists(onnx_path):
        make_model(onnx_path, layout)
    out = os.path.join(tmp, name, "1")
    r = run("import-onnx", onnx_path, "--output_dir", out, "--dicom_input", "image",
            "--window", "%g,%g" % WINDOW, "--layout", layout,
            "--sliding_window", "roi=%d,%d,%d" % ROI, *extra)
    check(r.returncode == 0, "import-onnx --sliding_window %s %s (%s)" %
          (layout, " ".join(extra), r.stderr.strip()))
    return out


def ours(model_dir, paths, tmp, outputs=("prob",)):
    outdir = os.path.join(tmp, "out")
    r = run("run", "--dir", model_dir, "--input_files", "image=" + ",".join(paths),
            "--outdir", outdir, "--overwrite")
    if r.returncode != 0:
        return None, r.stderr.strip()
    return [np.load(os.path.join(outdir, o + ".npy")) for o in outputs], None


def close(got, want, what):
    if got is None or got.shape != want.shape:
        check(False, "%s: shape %s, want %s" % (what, None if got is None else got.shape,
                                                want.shape))
        return
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    check(err <= TOL, "%s: max |ours - numpy| = %.2e (<= %g)" % (what, err, TOL))


def main():
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="dcm_sw_") as tmp:
        paths, vol = make_series(64, 96, tmp, "ct", rng)
        short, svol = make_series(20, 96, tmp, "short", rng)
        check(vol.shape == (64, 96, 96), "series of 64 slices of 96x96")

        # constant, overlap 0.5, 4 patches a run, labels
        m = import_sw(tmp, "sw_const", "NCHW", "--overlap", "0.5", "--blend", "constant",
                      "--sw_batch", "4", "--argmax")
        want = sliding_window(vol, 0.5, False)
        got, err = ours(m, paths, tmp, ("prob", "prob_labels"))
        check(err is None, "dcmserve run, constant blend (%s)" % err)
        if got:
            close(got[0], want[None], "constant, overlap 0.5, sw_batch 4, NCDHW")
            lab = got[1]
            check(lab.dtype == np.uint8 and lab.shape == (1, 64, 96, 96) and
                  np.array_equal(lab[0], np.argmax(got[0][0], axis=0).astype(np.uint8)),
                  "prob_labels: uint8 (1, 64, 96, 96), the arg-max over the channels")
            srt = np.sort(want, axis=0)
            clear = (srt[-1] - srt[-2]) > 1e-4
            check(np.array_equal(lab[0][clear], np.argmax(want, axis=0)[clear]),
                  "prob_labels equal numpy's arg-max wherever the top two differ by > 1e-4 "
                  "(%d of %d voxels)" % (int(clear.sum()), clear.size))

        # gaussian, overlap 0.25 (windows moved back at the end), 5 a run (last batch short)
        m = import_sw(tmp, "sw_gauss", "NCHW", "--overlap", "0.25", "--blend", "gaussian",
                      "--sw_batch", "5")
        want_g = sliding_window(vol, 0.25, True)
        got, err = ours(m, paths, tmp)
        check(err is None, "dcmserve run, gaussian blend (%s)" % err)
        if got:
            close(got[0], want_g[None], "gaussian, overlap 0.25, sw_batch 5, NCDHW")

        # NDHWC model, gaussian, a series shorter than the roi (padded, cropped back)
        m = import_sw(tmp, "sw_nhwc", "NHWC", "--overlap", "0.5", "--blend", "gaussian",
                      "--sw_batch", "3")
        got, err = ours(m, short, tmp)
        check(err is None, "dcmserve run, NDHWC, 20 slices < roi (%s)" % err)
        if got:
            want_s = sliding_window(svol, 0.5, True)
            close(got[0], np.moveaxis(want_s, 0, -1)[None],
                  "gaussian, 20x96x96 padded to the roi, NDHWC")
        got, err = ours(m, paths, tmp)
        if got:
            close(got[0], np.moveaxis(sliding_window(vol, 0.5, True), 0, -1)[None],
                  "gaussian, overlap 0.5, sw_batch 3, NDHWC")

        # with --spacing: resampled for the model, the answer back on the series' grid
        spacing = (3.0, 1.0, 0.9)
        have = (2.5,) + tuple(float(x) for x in pydicom.dcmread(paths[0]).PixelSpacing)
        rs = forward(vol, have, spacing)
        check(rs.shape == (53, 63, 70), "resampled to %s mm the volume is %s" % (spacing, rs.shape))
        for blend, ov in (("constant", 0.5), ("gaussian", 0.25)):
            m = import_sw(tmp, "sw_sp_" + blend, "NCHW", "--overlap", str(ov), "--blend", blend,
                          "--sw_batch", "4", "--spacing", "%g,%g,%g" % spacing, "--argmax")
            got, err = ours(m, paths, tmp, ("prob", "prob_labels"))
            check(err is None, "dcmserve run, %s, --spacing (%s)" % (blend, err))
            if got:
                want_b = back(sliding_window(rs, ov, blend == "gaussian"), have, spacing,
                              vol.shape)
                close(got[0], want_b[None], "%s, --spacing %g,%g,%g, back on the series' "
                      "64x96x96 grid" % ((blend,) + spacing))
                check(np.array_equal(got[1][0], np.argmax(got[0][0], axis=0).astype(np.uint8)),
                      "%s, --spacing: labels are the arg-max of the answer on the series' grid"
                      % blend)

        # `dcmserve check` lists the wrapped model's ops too (reached through the
        # op's pred attr, not an edge)
        r = run("check", os.path.dirname(m))
        check(r.returncode == 0 and "_SlidingWindow" in r.stdout and "Sigmoid" in r.stdout and
              "Relu" in r.stdout, "dcmserve check lists _SlidingWindow and the model's ops (%s)" %
              [ln for ln in r.stdout.splitlines() if "ops (" in ln])

        # refusals at import
        onnx_path = os.path.join(tmp, "unet_NCHW.onnx")
        r = run("import-onnx", onnx_path, "--output_dir", os.path.join(tmp, "x1", "1"),
                "--dicom_input", "image", "--window", "40,400",
                "--sliding_window", "roi=16,32,32")
        check(r.returncode != 0 and "does not match the model input" in r.stderr,
              "a roi that is not the model's patch size is refused (%s)" % r.stderr.strip())
        r = run("import-onnx", onnx_path, "--output_dir", os.path.join(tmp, "x3", "1"),
                "--dicom_input", "image", "--window", "40,400", "--blend", "gaussian")
        check(r.returncode == 2 and "go with --sliding_window" in r.stderr,
              "--blend without --sliding_window is a usage error (%s)" % r.stderr.strip())

        # ---- served once over gRPC ----
        pb = sc.gen_protos()
        # A 24 MB request budget: the volume (2.4 MB), the weight sum (2.4), the
        # output (7.1) and one batch of 4 patches with its activations fit; the
        # 75 patches at once would not (their Conv3d 1->4 output alone: 39 MB).
        d = sc.Daemon(["--model_name=sw", "--model_base_path=" + os.path.join(tmp, "sw_const"),
                       "--max_request_memory_bytes=24000000"])
        try:
            d.wait_health()
            files = []
            for q in paths:
                with open(q, "rb") as fh:
                    files.append(fh.read())
            req = sc.dicom_request(files, model="sw", key="image")
            resp = d.stub.Predict(req, timeout=300)
            tp = resp.outputs["prob"]
            g = np.array(sc.tensor_values(tp), dtype=np.float32)
            g = g.reshape([dd.size for dd in tp.tensor_shape.dim])
            close(g, want[None], "daemon: gRPC Predict of the 64-file series within a 24 MB "
                  "request budget")
            lp = resp.outputs["prob_labels"]
            check(lp.dtype == pb.fw.DT_UINT8 and
                  [dd.size for dd in lp.tensor_shape.dim] == [1, 64, 96, 96],
                  "daemon: prob_labels is DT_UINT8 (1, 64, 96, 96)")
            import grpc  # pylint: disable=import-outside-toplevel
            # Cancellation between batches: a deadline far below the run's time.
            try:
                d.stub.Predict(req, timeout=0.001)
                check(False, "daemon: a 1 ms deadline is not met")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED,
                      "daemon: a 1 ms deadline gives DEADLINE_EXCEEDED (%s)" % e.code())
            resp = d.stub.Predict(req, timeout=300)
            check("prob" in resp.outputs, "daemon: serves the next request after that")
        finally:
            d.close()
        # 9 MB: the output does not fit beside the volume and the weight sum.
        d = sc.Daemon(["--model_name=sw", "--model_base_path=" + os.path.join(tmp, "sw_const"),
                       "--max_request_memory_bytes=9000000"])
        try:
            d.wait_health()
            try:
                d.stub.Predict(req, timeout=300)
                check(False, "daemon: a 9 MB request budget refuses the sliding window")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and
                      "the sliding window's output needs 7077888 bytes" in e.details(),
                      "daemon: a 9 MB request budget gives RESOURCE_EXHAUSTED naming the "
                      "output (%s)" % e.details())
        finally:
            d.close()

    if FAILS:
        print("%d FAILED" % len(FAILS))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
