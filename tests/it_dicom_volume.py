#!/usr/bin/python3
"""it_dicom_volume: whole series in, one windowed volume out (DcmDecodeVolume,
`import-onnx --dicom_input NAME --dicom_volume [--spacing Z,Y,X]`).

Series are built here with pydicom from the real slices of pydicom's own
test files (CT_small.dcm, MR_small.dcm): each slice's pixels shifted and its
RescaleIntercept changed so that every slice differs, ImagePositionPatient
rewritten along the normal of ImageOrientationPatient (axial and oblique),
files written in shuffled order. An enhanced multi-frame CT is built the same
way, with position, orientation, pixel spacing and rescale in the Shared and
Per-Frame Functional Groups and its frames stored out of order.

The reference is pydicom + numpy: HU = float32(sv) * float32(slope) +
float32(intercept), slices sorted by position along the normal, the window
(np.clip(hu, lo, hi) - lo) / (hi - lo) in float32, and with --spacing linear
resampling along z, y then x as docs/dicom.md states. Outputs must be equal
bit for bit: through `dcmserve run` and through the daemon (gRPC Predict).
Hostile series (mixed series, duplicate or missing positions, mixed sizes,
tilted gantry, a missing slice, colour, a multi-frame file among others)
must be refused with INVALID_ARGUMENT naming the problem.
"""
import copy
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import pydicom
from onnx import TensorProto, helper
from pydicom.dataset import Dataset
from pydicom.sequence import Sequence
from pydicom.uid import RLELossless, generate_uid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client as sc  # noqa: E402

warnings.filterwarnings("ignore")

DCMSERVE = sc.DCMSERVE
TEST_FILES = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")
WINDOW = (40.0, 400.0)
FAILS = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def run(*args):
    return subprocess.run([DCMSERVE] + list(args), capture_output=True, text=True, timeout=300)


def identity_model(path, layout):
    dims = ["N", 1, "D", "H", "W"] if layout == "NCHW" else ["N", "D", "H", "W", 1]
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("vol", TensorProto.FLOAT, dims)
    g = helper.make_graph([helper.make_node("Identity", ["image"], ["vol"])], "vol", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def orientation(oblique):
    if not oblique:
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    r = unit([1.0, 0.0, 0.3])
    c = unit(np.cross(unit([0.2, 0.1, 1.0]), r))
    c = unit(np.cross(np.cross(r, c), r)) * -1 if np.dot(c, [0, 1, 0]) < 0 else c
    c = unit(c - np.dot(c, r) * r)
    return [float(x) for x in list(r) + list(c)]


def fmt(v):
    return ["%.6f" % x for x in v]


def make_series(src_name, n, gap, oblique, rng, tmp, tag, pixel_spacing=None, rle=False):
    """n single-frame files of one series; returns (paths in shuffled order, datasets)."""
    base = pydicom.dcmread(os.path.join(TEST_FILES, src_name))
    arr = base.pixel_array
    iop = orientation(oblique)
    nrm = np.cross(iop[:3], iop[3:])
    origin = np.array([-12.5, 30.25, 100.0])
    series = generate_uid()
    out = []
    for k in range(n):
        ds = copy.deepcopy(base)
        a = arr.astype(np.int64) + 7 * k - 3
        info = np.iinfo(arr.dtype)
        a = np.clip(a, info.min, info.max).astype(arr.dtype)
        ds.PixelData = a.tobytes()
        ds.SeriesInstanceUID = series
        ds.SOPInstanceUID = generate_uid()
        ds.ImageOrientationPatient = fmt(iop)
        ds.ImagePositionPatient = fmt(origin + k * gap * nrm)
        ds.RescaleSlope = "1"
        ds.RescaleIntercept = str(-1024 + 3 * k)
        ds.InstanceNumber = str(n - k)
        if pixel_spacing:
            ds.PixelSpacing = [pixel_spacing, pixel_spacing]
        if rle:  # through the codec, not the native path
            ds.compress(RLELossless, a)
        out.append(ds)
    return save_shuffled(out, rng, tmp, tag)


def save_shuffled(datasets, rng, tmp, tag):
    """Writes the datasets as tmp/<tag>_<i>.dcm in a shuffled order; their paths."""
    order = list(range(len(datasets)))
    rng.shuffle(order)
    paths = []
    for i, k in enumerate(order):
        p = os.path.join(tmp, "%s_%02d.dcm" % (tag, i))
        datasets[k].save_as(p, write_like_original=False)
        paths.append(p)
    return paths


def make_enhanced(n, gap, rng, tmp, tag):
    """One enhanced multi-frame CT from CT_small's pixels: geometry and rescale
    in functional groups, frames stored in shuffled position order."""
    base = pydicom.dcmread(os.path.join(TEST_FILES, "CT_small.dcm"))
    arr = base.pixel_array
    iop = orientation(True)
    nrm = np.cross(iop[:3], iop[3:])
    origin = np.array([5.0, -7.5, 42.0])
    order = list(range(n))
    rng.shuffle(order)
    ds = copy.deepcopy(base)
    for kw in ("ImagePositionPatient", "ImageOrientationPatient", "RescaleSlope",
               "RescaleIntercept", "PixelSpacing", "SliceThickness"):
        if kw in ds:
            delattr(ds, kw)
    frames = []
    per = Sequence()
    for k in order:
        a = np.clip(arr.astype(np.int64) + 11 * k, -32768, 32767).astype(arr.dtype)
        frames.append(a.tobytes())
        it = Dataset()
        pp = Dataset()
        pp.ImagePositionPatient = fmt(origin + k * gap * nrm)
        it.PlanePositionSequence = Sequence([pp])
        pv = Dataset()
        pv.RescaleSlope = "1.5" if k % 2 else "1"
        pv.RescaleIntercept = str(-1000 - 5 * k)
        pv.RescaleType = "HU"
        it.PixelValueTransformationSequence = Sequence([pv])
        per.append(it)
    shared = Dataset()
    po = Dataset()
    po.ImageOrientationPatient = fmt(iop)
    shared.PlaneOrientationSequence = Sequence([po])
    pm = Dataset()
    pm.PixelSpacing = ["0.661468", "0.661468"]
    pm.SliceThickness = "%.3f" % gap
    shared.PixelMeasuresSequence = Sequence([pm])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    ds.PerFrameFunctionalGroupsSequence = per
    ds.NumberOfFrames = n
    ds.PixelData = b"".join(frames)
    ds.SOPClassUID = "1.2.840.10008.5.1.4.1.1.2.1"  # Enhanced CT Image Storage
    ds.file_meta.MediaStorageSOPClassUID = ds.SOPClassUID
    p = os.path.join(tmp, "%s.dcm" % tag)
    ds.save_as(p, write_like_original=False)
    return [p]


# ---- the reference ----

def window(hu):
    c, w = WINDOW
    lo, hi = np.float32(c - w / 2.0), np.float32(c + w / 2.0)
    return (np.clip(hu, lo, hi) - lo) / (hi - lo)


def ref_slices(paths):
    """[(position along the normal, HU float32 2-D, pixel spacing)] for every slice."""
    out = []
    for p in paths:
        ds = pydicom.dcmread(p)
        sv = ds.pixel_array
        if int(getattr(ds, "NumberOfFrames", 1) or 1) > 1:
            sh = ds.SharedFunctionalGroupsSequence[0]
            iop = np.array([float(x) for x in sh.PlaneOrientationSequence[0].ImageOrientationPatient])
            px = [float(x) for x in sh.PixelMeasuresSequence[0].PixelSpacing]
            for f, it in enumerate(ds.PerFrameFunctionalGroupsSequence):
                ipp = np.array([float(x) for x in it.PlanePositionSequence[0].ImagePositionPatient])
                pv = it.PixelValueTransformationSequence[0]
                hu = (sv[f].astype(np.float32) * np.float32(float(pv.RescaleSlope)) +
                      np.float32(float(pv.RescaleIntercept)))
                out.append((float(np.dot(ipp, np.cross(iop[:3], iop[3:]))), hu, px))
        else:
            iop = np.array([float(x) for x in ds.ImageOrientationPatient])
            ipp = np.array([float(x) for x in ds.ImagePositionPatient])
            hu = (sv.astype(np.float32) * np.float32(float(ds.RescaleSlope)) +
                  np.float32(float(ds.RescaleIntercept)))
            out.append((float(np.dot(ipp, np.cross(iop[:3], iop[3:]))), hu,
                        [float(x) for x in ds.PixelSpacing]))
    return out


RS_TOL = 1e-4  # docs/dicom.md: positions within 1e-4 of an input index are that index


def resample(v, axis, s, t, m=None):
    """Axis `axis` of v from spacing s to t: output index i reads input index
    i * t / s; m output indices (default: as many as the op gives)."""
    n = v.shape[axis]
    if m is None:
        m = int(np.floor((n - 1) * s / t + RS_TOL)) + 1
    p = np.arange(m, dtype=np.float64) * t / s
    r = np.floor(p + 0.5)
    p = np.where(np.abs(p - r) <= RS_TOL, r, p)
    i0 = np.minimum(np.floor(p).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    f = (p - i0).astype(np.float32)
    a = np.take(v, i0, axis=axis)
    b = np.take(v, i1, axis=axis)
    shape = [1] * v.ndim
    shape[axis] = m
    return a + (b - a) * f.reshape(shape)


def reference(paths, spacing=None, windowed=True):
    sl = sorted(ref_slices(paths), key=lambda s: s[0])
    vol = np.stack([s[1] for s in sl]).astype(np.float32)
    if windowed:
        vol = window(vol)
    if spacing:
        # The op's spacing attr is float32: its values widened to double.
        spacing = [float(np.float32(t)) for t in spacing]
        pos = [s[0] for s in sl]
        have = [(pos[-1] - pos[0]) / (len(pos) - 1), sl[0][2][0], sl[0][2][1]]
        for ax in range(3):
            vol = resample(vol, ax, have[ax], spacing[ax])
    return vol.astype(np.float32)


# ---- running ----

def decoded(port):
    """(dcmserve_dicom_frames_total, dcmserve_dicom_pixels_total) from the
    daemon's /metrics: frames the ops decoded, and pixels the pixel module
    itself converted (counted where the pixel bytes are read)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    got = {}
    for line in text.splitlines():
        for k in ("dcmserve_dicom_frames_total", "dcmserve_dicom_pixels_total"):
            if line.startswith(k + " "):
                got[k] = float(line.split()[1])
    if len(got) != 2:
        raise AssertionError("no dcmserve_dicom_frames_total / pixels_total in /metrics")
    return got["dcmserve_dicom_frames_total"], got["dcmserve_dicom_pixels_total"]


def ours_run(model_dir, paths, tmp):
    outdir = os.path.join(tmp, "out")
    r = run("run", "--dir", model_dir, "--input_files", "image=" + ",".join(paths),
            "--outdir", outdir, "--overwrite")
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "rc %d" % r.returncode
    return np.load(os.path.join(outdir, "vol.npy")), None


def same(got, want):
    return got is not None and got.shape == want.shape and got.dtype == want.dtype and \
        np.array_equal(got.view(np.uint32), want.view(np.uint32))


def import_model(tmp, name, layout, *extra, windowed=True):
    onnx_path = os.path.join(tmp, "vol_%s.onnx" % layout)
    identity_model(onnx_path, layout)
    out = os.path.join(tmp, name, "1")
    win = ["--window", "%g,%g" % WINDOW] if windowed else []
    r = run("import-onnx", onnx_path, "--output_dir", out, "--dicom_input", "image",
            *win, "--dicom_volume", "--layout", layout, *extra)
    check(r.returncode == 0, "import-onnx --dicom_volume %s %s (%s)" % (layout, " ".join(extra),
                                                                      r.stderr.strip()))
    return out


def main():
    if not os.path.exists(os.path.join(TEST_FILES, "CT_small.dcm")):
        print("SKIP: pydicom's test files not found")
        return sc.SKIP_RC
    rng = random.Random(14)
    with tempfile.TemporaryDirectory(prefix="dcm_vol_") as tmp:
        m_nchw = import_model(tmp, "vol", "NCHW")
        m_nhwc = import_model(tmp, "vol_nhwc", "NHWC")
        m_sp = import_model(tmp, "vol_sp", "NCHW", "--spacing", "2.0,0.9,1.1")
        # a 4-D model is refused with --dicom_volume; --size does not go with it
        x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])
        y = helper.make_tensor_value_info("vol", TensorProto.FLOAT, ["N", 1, 8, 8])
        g = helper.make_graph([helper.make_node("Identity", ["image"], ["vol"])], "v", [x], [y])
        p4 = os.path.join(tmp, "id4.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p4)
        r = run("import-onnx", p4, "--output_dir", os.path.join(tmp, "x4", "1"), "--dicom_input",
                "image", "--window", "40,400", "--dicom_volume")
        check(r.returncode != 0 and "5-D" in r.stderr,
              "import-onnx --dicom_volume refuses a 4-D model input (%s)" % r.stderr.strip())
        r = run("import-onnx", p4, "--output_dir", os.path.join(tmp, "x5", "1"), "--dicom_input",
                "image", "--window", "40,400", "--dicom_volume", "--size", "8x8")
        check(r.returncode == 2 and "--spacing" in r.stderr,
              "import-onnx: --size with --dicom_volume is a usage error (%s)" % r.stderr.strip())
        r = run("show", "--dir", m_nchw, "--all")
        check("DT_STRING" in r.stdout, "show: the volume input is DT_STRING")

        series = {
            "CT axial 7 slices": make_series("CT_small.dcm", 7, 2.5, False, rng, tmp, "cta"),
            "CT oblique 5 slices": make_series("CT_small.dcm", 5, 1.25, True, rng, tmp, "cto"),
            "MR axial 6 slices": make_series("MR_small.dcm", 6, 4.0, False, rng, tmp, "mra"),
            "MR oblique 4 slices": make_series("MR_small.dcm", 4, 3.0, True, rng, tmp, "mro"),
            "enhanced CT 6 frames": make_enhanced(6, 1.5, rng, tmp, "enh"),
            "CT RLE 5 slices": make_series("CT_small.dcm", 5, 2.0, True, rng, tmp, "rle", rle=True),
        }
        for name, paths in series.items():
            want = reference(paths)
            got, err = ours_run(m_nchw, paths, tmp)
            check(same(got, want[None, None]),
                  "%s: (1, 1, D, H, W) equals pydicom + numpy bit for bit (%s)" % (name, err or got.shape))
            got, err = ours_run(m_nhwc, paths, tmp)
            check(same(got, want[None, ..., None]),
                  "%s: NHWC (1, D, H, W, 1) equals the reference (%s)" % (name, err or got.shape))
            want = reference(paths, (2.0, 0.9, 1.1))
            got, err = ours_run(m_sp, paths, tmp)
            check(same(got, want[None, None]),
                  "%s: --spacing 2.0,0.9,1.1 equals the reference resampling %s (%s)"
                  % (name, want.shape, err or got.shape))
        # --spacing equal to the series' own, where float32 rounds the requested
        # values up (4.8 -> 4.8000002, 0.8 -> 0.80000001): the volume is the
        # series itself, last slice, row and column included
        own = make_series("CT_small.dcm", 9, 4.8, False, rng, tmp, "own", "0.8")
        m_own = import_model(tmp, "vol_own", "NCHW", "--spacing", "4.8,0.8,0.8")
        got, err = ours_run(m_own, own, tmp)
        check(same(got, reference(own)[None, None]),
              "--spacing 4.8,0.8,0.8 on a 9x128x128 series at 4.8/0.8 mm gives it whole (%s)"
              % ((err or got.shape),))
        want = reference(own, (4.8, 0.8, 0.8))
        check(same(got, want[None, None]),
              "... and equals the reference resampling %s" % (want.shape,))
        # without --window: HU volumes
        m_hu = import_model(tmp, "vol_hu", "NCHW", windowed=False)
        m_hu_sp = import_model(tmp, "vol_hu_sp", "NCHW", "--spacing", "2.0,0.9,1.1", windowed=False)
        for name in ("CT oblique 5 slices", "enhanced CT 6 frames"):
            paths = series[name]
            got, err = ours_run(m_hu, paths, tmp)
            check(same(got, reference(paths, windowed=False)[None, None]),
                  "%s without --window: the HU volume equals the reference (%s)"
                  % (name, err or got.shape))
            got, err = ours_run(m_hu_sp, paths, tmp)
            check(same(got, reference(paths, (2.0, 0.9, 1.1), windowed=False)[None, None]),
                  "%s without --window, --spacing 2.0,0.9,1.1: HU resampled as the reference (%s)"
                  % (name, err or got.shape))
        # dcmserve dicom --volume: the same volumes and the series' geometry
        paths = series["CT oblique 5 slices"]
        npy = os.path.join(tmp, "cli_vol.npy")
        r = run("dicom", "--volume", *paths, "--out", npy, "--json")
        info = json.loads(r.stdout) if r.returncode == 0 else {}
        check(r.returncode == 0 and same(np.load(npy), reference(paths, windowed=False)),
              "dicom --volume --out: the (D, H, W) HU volume equals the reference (%s)"
              % r.stderr.strip())
        sl = sorted(ref_slices(paths), key=lambda q: q[0])
        first = [float(x) for x in pydicom.dcmread(min(
            paths, key=lambda q: float(np.dot([float(x) for x in pydicom.dcmread(q).ImagePositionPatient],
                                              np.cross(orientation(True)[:3], orientation(True)[3:]))))
        ).ImagePositionPatient]
        check(info.get("shape") == [5, 128, 128] and info.get("files") == 5 and
              abs(info.get("spacing", [0])[0] - (sl[-1][0] - sl[0][0]) / 4) < 1e-5 and
              np.allclose(info.get("spacing", [0, 0, 0])[1:], sl[0][2], atol=1e-6) and
              np.allclose(info.get("first_position", []), first, atol=1e-5) and
              info.get("frames_decoded") == 5,
              "dicom --volume --json: shape, spacing, first position, frames decoded (%s)" % info)
        r = run("dicom", "--volume", *paths, "--out", npy, "--window", "%g,%g" % WINDOW,
                "--spacing", "2.0,0.9,1.1")
        check(r.returncode == 0 and same(np.load(npy), reference(paths, (2.0, 0.9, 1.1))) and
              "slices x rows x columns: 5 x 128 x 128" in r.stdout,
              "dicom --volume --window --spacing: equals the reference (%s)" % r.stderr.strip())
        cta = series["CT axial 7 slices"]
        mixed = os.path.join(tmp, "cli_mixed.dcm")
        ds = pydicom.dcmread(cta[2])
        ds.SeriesInstanceUID = generate_uid()
        ds.save_as(mixed)
        r = run("dicom", "--volume", *(cta[:2] + [mixed]), "--out", npy)
        check(r.returncode == 1 and "mixed series: dicom[2]" in r.stderr,
              "dicom --volume: a mixed series exits 1 naming it (%s)" % r.stderr.strip())
        x2 = os.path.join(tmp, "x2d", "1")
        r = run("import-onnx", os.path.join(tmp, "vol_NCHW.onnx"), "--output_dir", x2,
                "--dicom_input", "image")
        check(r.returncode == 2 and "--window" in r.stderr,
              "import-onnx: a 2-D --dicom_input still needs --window (%s)" % r.stderr.strip())
        one = series["CT axial 7 slices"][:1]
        got, err = ours_run(m_nchw, one, tmp)
        check(same(got, reference(one)[None, None]), "one file: a 1-slice volume (%s)" % err)

        # ---- hostile series ----
        cta = series["CT axial 7 slices"]
        hostile = []
        # mixed series
        p = os.path.join(tmp, "h_mixed.dcm")
        ds = pydicom.dcmread(cta[2])
        ds.SeriesInstanceUID = generate_uid()
        ds.save_as(p)
        hostile.append(("mixed series", cta[:2] + [p] + cta[3:], "mixed series"))
        # duplicate position
        p = os.path.join(tmp, "h_dup.dcm")
        ds = pydicom.dcmread(cta[1])
        ds.SOPInstanceUID = generate_uid()
        ds.save_as(p)
        hostile.append(("duplicate position", cta + [p], "duplicate position"))
        # missing position
        p = os.path.join(tmp, "h_nopos.dcm")
        ds = pydicom.dcmread(cta[3])
        del ds.ImagePositionPatient
        ds.save_as(p)
        hostile.append(("missing position", cta[:3] + [p] + cta[4:], "no ImagePositionPatient"))
        # missing slice: drop the middle one by position
        by_pos = sorted(cta, key=lambda q: float(pydicom.dcmread(q).ImagePositionPatient[2]))
        hostile.append(("missing slice", by_pos[:3] + by_pos[4:], "missing slice"))
        # mixed sizes
        mr = series["MR axial 6 slices"][0]
        ds = pydicom.dcmread(mr)
        ds.SeriesInstanceUID = pydicom.dcmread(cta[0]).SeriesInstanceUID
        p = os.path.join(tmp, "h_size.dcm")
        ds.save_as(p)
        hostile.append(("mixed sizes", cta[:2] + [p], "mixed sizes"))
        # tilted gantry: positions shifted in y along z
        tilted = []
        for i, q in enumerate(by_pos):
            ds = pydicom.dcmread(q)
            ipp = [float(x) for x in ds.ImagePositionPatient]
            ipp[1] += 0.8 * ipp[2]
            ds.ImagePositionPatient = fmt(ipp)
            t = os.path.join(tmp, "h_tilt_%d.dcm" % i)
            ds.save_as(t)
            tilted.append(t)
        hostile.append(("tilted gantry", tilted, "tilted gantry"))
        # mixed orientation
        p = os.path.join(tmp, "h_ori.dcm")
        ds = pydicom.dcmread(cta[4])
        ds.ImageOrientationPatient = fmt(orientation(True))
        ds.save_as(p)
        hostile.append(("mixed orientation", cta[:4] + [p] + cta[5:], "mixed orientation"))
        # a multi-frame file among single-frame ones
        hostile.append(("multi-frame among files", cta[:2] + series["enhanced CT 6 frames"],
                        "frames"))
        # a compressed file of another series whose last fragment is cut short:
        # the series check reads headers only (it stops at the pixel data), so
        # the refusal is the series', not the fragment walk's
        rle = series["CT RLE 5 slices"]
        p = os.path.join(tmp, "h_rle_mixed.dcm")
        ds = pydicom.dcmread(rle[3])
        ds.SeriesInstanceUID = generate_uid()
        ds.save_as(p)
        with open(p, "rb") as fh:
            cut = fh.read()
        with open(p, "wb") as fh:
            fh.write(cut[:-200])
        hostile.append(("mixed series, compressed, cut", rle[:3] + [p] + rle[4:],
                        "mixed series: dicom[3]"))
        # a series whose headers add up to more than the decode limit (1 GiB of
        # float32): refused before any pixel is decoded (the pixel data is short)
        big = []
        ds = pydicom.dcmread(cta[0])
        ds.Rows, ds.Columns = 1024, 1024
        for i in range(260):
            ds.ImagePositionPatient = fmt([0.0, 0.0, float(i)])
            t = os.path.join(tmp, "h_big_%03d.dcm" % i)
            ds.save_as(t)
            big.append(t)
        hostile.append(("series over the size limit", big, "over the limit"))
        # modality guard: an MR series into a CT-only model
        m_ct = import_model(tmp, "vol_ct", "NCHW", "--dicom_modality", "CT")
        got, err = ours_run(m_ct, series["MR axial 6 slices"], tmp)
        check(got is None and "Modality is 'MR'" in (err or ""),
              "--dicom_modality CT refuses an MR series (%s)" % err)
        cli_msg = {}
        for name, paths, needle in hostile:
            got, err = ours_run(m_nchw, paths, tmp)
            check(got is None and needle in (err or ""),
                  "hostile: %s is refused naming it (%s)" % (name, err))
            # the op's own message, as `dcmserve run` prints it after "...: "
            cli_msg[name] = (err or "").split("DcmDecodeVolume")[-1]

        # ---- through the daemon ----
        pb = sc.gen_protos()
        rest = sc.free_port()
        d = sc.Daemon(["--model_name=vol", "--model_base_path=" + os.path.dirname(m_nchw),
                       "--rest_api_port=%d" % rest])
        try:
            d.wait_health()

            def predict(paths):
                req = pb.tfs.PredictRequest()
                req.model_spec.name = "vol"
                t = req.inputs["image"]
                t.dtype = pb.fw.DT_STRING
                t.tensor_shape.dim.add().size = len(paths)
                for q in paths:
                    with open(q, "rb") as fh:
                        t.string_val.append(fh.read())
                return d.stub.Predict(req, timeout=60)

            paths = series["CT oblique 5 slices"]
            resp = predict(paths)
            tp = resp.outputs["vol"]
            got = np.array(tp.float_val if tp.float_val else
                           np.frombuffer(tp.tensor_content, dtype=np.float32), dtype=np.float32)
            got = got.reshape([dd.size for dd in tp.tensor_shape.dim])
            check(same(got, reference(paths)[None, None]),
                  "daemon: Predict with a shuffled 5-file series equals the reference")
            import grpc  # pylint: disable=import-outside-toplevel
            try:
                predict(hostile[0][1])
                check(False, "daemon: a mixed series is refused")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
                      "mixed series" in e.details(),
                      "daemon: a mixed series gets INVALID_ARGUMENT naming it (%s)" % e.details())
            # Refused before any pixel is decoded: the frames counter of /metrics
            # moves by a volume's slices for a good series, by none for a refused one.
            # The pixel counter is the pixel module's own (where file bytes
            # are read), so no path of the op can decode without moving it.
            f0, p0 = decoded(rest)
            predict(series["CT axial 7 slices"])
            f1, p1 = decoded(rest)
            check(f1 - f0 == 7, "daemon: a 7-slice series counts 7 frames decoded (%g)" % (f1 - f0))
            check(p1 - p0 == 7 * 128 * 128,
                  "daemon: ... and 7 x 128 x 128 pixels decoded (%g)" % (p1 - p0))
            predict(series["CT RLE 5 slices"])
            f1, p2 = decoded(rest)
            check(p2 - p1 == 5 * 128 * 128,
                  "daemon: an RLE series (codec path) counts its 5 x 128 x 128 pixels (%g)"
                  % (p2 - p1))
            p1 = p2
            for name, paths, needle in hostile:
                if name == "series over the size limit":
                    continue  # 260 MB of request; refused before decoding by its headers
                try:
                    predict(paths)
                    check(False, "daemon: %s is refused" % name)
                    continue
                except grpc.RpcError as e:
                    msg = e.details()
                f2, p2 = decoded(rest)
                check(f2 == f1 and p2 == p1 and needle in msg,
                      "daemon: %s refused having decoded %g frames, %g pixels (%s)"
                      % (name, f2 - f1, p2 - p1, msg))
                check(cli_msg[name].strip(": ") in msg,
                      "daemon: %s: the same message as `dcmserve run` (%r in %r)"
                      % (name, cli_msg[name], msg))
                f1, p1 = f2, p2
            resp = predict(series["enhanced CT 6 frames"])
            check(list(dd.size for dd in resp.outputs["vol"].tensor_shape.dim) == [1, 1, 6, 128, 128],
                  "daemon: still serving; the enhanced CT gives (1, 1, 6, 128, 128)")
        finally:
            d.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
