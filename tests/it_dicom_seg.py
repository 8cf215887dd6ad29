#!/usr/bin/python3
"""it_dicom_seg: a label volume out as a DICOM Segmentation (DcmEncodeSeg,
`import-onnx --dicom_volume --dicom_seg_output NAME`).

The series: tests/data/onnx/ct64.dcm turned into 9 slices by
serve_client.shifted_dicoms (pixels shifted per slice), each given its own
SOP Instance UID and an ImagePositionPatient 2.5 mm further along z, one
Series and Frame of Reference UID; sent in shuffled order. The model (built
here in ONNX) thresholds the HU volume into labels 0, 1, 2 (uint8). The
daemon answers the labels and the SEG; pydicom reads the SEG back and the
test checks, against the series and a numpy computation of the same
thresholds on pydicom's HU: SOP class, BINARY, frame count (one frame per
segment and slice holding it), segment numbers and labels, each frame's
ImagePositionPatient equal to its source slice's, each frame's referenced SOP
Instance UID the source's, Referenced Series Sequence = every source
instance, Frame of Reference and Study UIDs copied, orientation and pixel
spacing, the pixel bits equal to the label masks. Refusals: a label value
above the configured segments, labels not on the series' grid (a model that
drops a slice; import-onnx refuses --spacing with it), a float output. dciodvfy (Debian's dicom3tools)
is run on the file when installed; its errors fail the test.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import warnings
from io import BytesIO

import numpy as np
import onnx
import pydicom
from onnx import TensorProto, helper
from pydicom.uid import generate_uid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client as sc  # noqa: E402

warnings.filterwarnings("ignore")

DCMSERVE = sc.DCMSERVE
CT64 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "onnx", "ct64.dcm")
FAILS = []
T1 = 0.0  # HU threshold of label 1; label 2's (T2) is set from the series


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def run(*args):
    return subprocess.run([DCMSERVE] + list(args), capture_output=True, text=True, timeout=300)


def make_series(n, gap):
    """n slices of ct64, pixels shifted, positions along z: (bytes, datasets)."""
    series, frame = generate_uid(), generate_uid()
    out = []
    for k, raw in enumerate(sc.shifted_dicoms(CT64, n, 37, -150)):
        ds = pydicom.dcmread(BytesIO(raw))
        ds.SOPInstanceUID = generate_uid()
        ds.SeriesInstanceUID = series
        ds.FrameOfReferenceUID = frame
        ds.ImageOrientationPatient = ["1", "0", "0", "0", "1", "0"]
        ds.ImagePositionPatient = ["-40", "-32.5", "%.1f" % (-10.0 + gap * k)]
        ds.PixelSpacing = ["0.75", "0.75"]
        ds.SliceThickness = "%.1f" % gap
        ds.PatientName = "Test^Seg"
        ds.PatientID = "SEG-1"
        buf = BytesIO()
        ds.save_as(buf)
        out.append((buf.getvalue(), ds))
    return out


def hu(ds):
    sv = ds.pixel_array.astype(np.float32)
    return sv * np.float32(float(ds.get("RescaleSlope", 1))) + \
        np.float32(float(ds.get("RescaleIntercept", 0)))


def label_model(path, t2, out_dtype=TensorProto.UINT8, cut=False):
    """[1, 1, D, H, W] HU -> labels (x > T1) + (x > t2), cast to out_dtype;
    cut: the last slice dropped (labels off the series' grid)."""
    dims = [1, 1, 9, 64, 64] if cut else [1, 1, "D", "H", "W"]  # Slice wants a static axis
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("labels", out_dtype, [1, 1, 8, 64, 64] if cut else dims)
    t1 = helper.make_tensor("t1", TensorProto.FLOAT, [], [T1])
    t2 = helper.make_tensor("t2", TensorProto.FLOAT, [], [t2])
    nodes = [
        helper.make_node("Greater", ["image", "t1"], ["g1"]),
        helper.make_node("Greater", ["image", "t2"], ["g2"]),
        helper.make_node("Cast", ["g1"], ["f1"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["g2"], ["f2"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["f1", "f2"], ["s"]),
        helper.make_node("Cast", ["sc" if cut else "s"], ["labels"], to=out_dtype),
    ]
    inits = [t1, t2]
    if cut:
        inits += [helper.make_tensor("st", TensorProto.INT64, [1], [0]),
                  helper.make_tensor("en", TensorProto.INT64, [1], [-1]),
                  helper.make_tensor("ax", TensorProto.INT64, [1], [2])]
        nodes.insert(-1, helper.make_node("Slice", ["s", "st", "en", "ax"], ["sc"]))
    g = helper.make_graph(nodes, "seg", [x], [y], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def main():
    if not os.path.exists(CT64):
        print("SKIP: tests/data/onnx/ct64.dcm not found")
        return sc.SKIP_RC
    rng = random.Random(32)
    with tempfile.TemporaryDirectory(prefix="dcm_seg_") as tmp:
        series = make_series(9, 2.5)
        order = list(range(len(series)))
        rng.shuffle(order)
        blobs = [series[i][0] for i in order]
        # the reference: slices by position (z here), the model's thresholds;
        # label 2 above the brightest pixel of slice 4, so that slices 0-4
        # (pixels shifted less) have no segment-2 frame
        by_z = sorted(range(len(series)),
                      key=lambda i: float(series[i][1].ImagePositionPatient[2]))
        vol = np.stack([hu(series[i][1]) for i in by_z])
        t2 = float(vol[4].max())
        want = ((vol > np.float32(T1)).astype(np.float32) +
                (vol > np.float32(t2)).astype(np.float32)).astype(np.uint8)
        check(set(np.unique(want)) == {0, 1, 2} and
              all((want[k] == 1).any() for k in range(9)) and
              [bool((want[k] == 2).any()) for k in range(9)] == [False] * 5 + [True] * 4,
              "reference: segment 1 on every slice, segment 2 on slices 5-8 only")
        onnx_path = os.path.join(tmp, "seg.onnx")
        label_model(onnx_path, t2)
        mdir = os.path.join(tmp, "seg", "1")
        r = run("import-onnx", onnx_path, "--output_dir", mdir, "--dicom_input", "image",
                "--dicom_volume", "--dicom_seg_output", "labels",
                "--dicom_seg_labels", "soft tissue,dense", "--dicom_seg_uid_root",
                "1.2.826.0.1.3680043.10.1234")
        check(r.returncode == 0, "import-onnx --dicom_seg_output labels (%s)" % r.stderr.strip())
        # usage errors and refusals at import
        r2 = run("import-onnx", onnx_path, "--output_dir", os.path.join(tmp, "x1", "1"),
                 "--dicom_input", "image", "--dicom_volume", "--dicom_seg_output", "labels",
                 "--spacing", "1,1,1")
        check(r2.returncode == 2 and "--spacing" in r2.stderr,
              "import-onnx: --dicom_seg_output with --spacing is a usage error (%s)"
              % r2.stderr.strip())
        r2 = run("import-onnx", onnx_path, "--output_dir", os.path.join(tmp, "x2", "1"),
                 "--dicom_input", "image", "--dicom_volume", "--dicom_seg_output", "nope")
        check(r2.returncode != 0 and "no output of that name" in r2.stderr,
              "import-onnx: --dicom_seg_output naming no output is refused (%s)"
              % r2.stderr.strip())
        fpath = os.path.join(tmp, "segf.onnx")
        label_model(fpath, t2, TensorProto.FLOAT)
        r2 = run("import-onnx", fpath, "--output_dir", os.path.join(tmp, "x3", "1"),
                 "--dicom_input", "image", "--dicom_volume", "--dicom_seg_output", "labels")
        check(r2.returncode != 0 and "labels (uint8, int32 or int64)" in r2.stderr,
              "import-onnx: a float output is refused for a SEG (%s)" % r2.stderr.strip())
        # a model whose one segment cannot hold label 2
        m1 = os.path.join(tmp, "seg1", "1")
        r2 = run("import-onnx", onnx_path, "--output_dir", m1, "--dicom_input", "image",
                 "--dicom_volume", "--dicom_seg_output", "labels", "--dicom_seg_labels", "one")
        check(r2.returncode == 0, "import-onnx with one segment label")
        cpath = os.path.join(tmp, "segc.onnx")
        label_model(cpath, t2, cut=True)
        mc = os.path.join(tmp, "segc", "1")
        r2 = run("import-onnx", cpath, "--output_dir", mc, "--dicom_input", "image",
                 "--dicom_volume", "--dicom_seg_output", "labels")
        check(r2.returncode == 0, "import-onnx of a model whose labels drop a slice (%s)"
              % r2.stderr.strip())

        pb = sc.gen_protos()
        base = os.path.dirname(mdir)
        d = sc.Daemon(["--model_config_file=" + write_config(tmp, base, os.path.dirname(m1), os.path.dirname(mc)),
                       "--log_level=debug"])
        try:
            d.wait_health()

            def predict(model, files):
                req = pb.tfs.PredictRequest()
                req.model_spec.name = model
                t = req.inputs["image"]
                t.dtype = pb.fw.DT_STRING
                t.tensor_shape.dim.add().size = len(files)
                for b in files:
                    t.string_val.append(b)
                return d.stub.Predict(req, timeout=120)

            resp = predict("seg", blobs)
            lab = resp.outputs["labels"]
            got = np.frombuffer(lab.tensor_content, dtype=np.uint8) if lab.tensor_content \
                else np.array(lab.int_val, dtype=np.uint8)
            check(got.size == want.size and np.array_equal(got.reshape(want.shape), want),
                  "the model's labels equal the numpy thresholds")
            sp = resp.outputs["dicom_seg"]
            check(sp.dtype == pb.fw.DT_STRING and len(sp.string_val) == 1 and
                  len(sp.tensor_shape.dim) == 0, "dicom_seg is a DT_STRING scalar")
            raw = sp.string_val[0]
            segp = os.path.join(tmp, "out_seg.dcm")
            with open(segp, "wb") as fh:
                fh.write(raw)
            seg = pydicom.dcmread(segp)
            check_seg(seg, series, by_z, want)
            # dciodvfy, when installed
            if shutil.which("dciodvfy"):
                v = subprocess.run(["dciodvfy", segp], capture_output=True, text=True)
                out = (v.stdout + v.stderr).strip()
                errors = [ln for ln in out.splitlines() if ln.startswith("Error")]
                print("dciodvfy says:\n" + out)
                check(not errors, "dciodvfy: no errors (%d)" % len(errors))
            else:
                print("dciodvfy not installed: not run")
            # no label anywhere: one empty frame, still valid
            cold = [sc_series_offset(b, -3000) for b in blobs]
            resp = predict("seg", cold)
            seg0 = pydicom.dcmread(BytesIO(resp.outputs["dicom_seg"].string_val[0]))
            check(int(seg0.NumberOfFrames) == 1 and not seg0.pixel_array.any(),
                  "no labels: one empty frame")
            # refusals: label 2 with one segment; a mixed series
            import grpc  # pylint: disable=import-outside-toplevel
            try:
                predict("seg1", blobs)
                check(False, "a label above the segments is refused")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
                      "label value 2" in e.details() and "Test^Seg" not in e.details(),
                      "a label above the segments is refused naming it (%s)" % e.details())
            try:
                predict("segc", blobs)
                check(False, "labels off the series' grid are refused")
            except grpc.RpcError as e:
                check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and
                      "the series is 9x64x64" in e.details(),
                      "labels off the series' grid are refused naming both shapes (%s)"
                      % e.details())
            other = pydicom.dcmread(BytesIO(blobs[3]))
            other.SeriesInstanceUID = generate_uid()
            buf = BytesIO()
            other.save_as(buf)
            try:
                predict("seg", blobs[:3] + [buf.getvalue()] + blobs[4:])
                check(False, "a mixed series is refused")
            except grpc.RpcError as e:
                check("mixed series: dicom[3]" in e.details(),
                      "a mixed series is refused (%s)" % e.details())
            log = d.log()
            check("Test^Seg" not in log and "SEG-1" not in log,
                  "patient name and ID are not in the daemon's log")
        finally:
            d.close()
    print("%d failures" % len(FAILS))
    return 1 if FAILS else 0


def sc_series_offset(blob, offset):
    """The file with RescaleIntercept moved by offset (every HU below T1)."""
    ds = pydicom.dcmread(BytesIO(blob))
    ds.RescaleIntercept = str(float(ds.get("RescaleIntercept", 0)) + offset)
    buf = BytesIO()
    ds.save_as(buf)
    return buf.getvalue()


def write_config(tmp, base, base1, basec):
    p = os.path.join(tmp, "models.config")
    with open(p, "w") as fh:
        fh.write('model_config_list {\n'
                 '  config { name: "seg" base_path: "%s" model_platform: "tensorflow" }\n'
                 '  config { name: "seg1" base_path: "%s" model_platform: "tensorflow" }\n'
                 '  config { name: "segc" base_path: "%s" model_platform: "tensorflow" }\n'
                 '}\n' % (base, base1, basec))
    return p


def check_seg(seg, series, by_z, want):
    D, H, W = want.shape
    src = [series[i][1] for i in by_z]
    check(seg.SOPClassUID == "1.2.840.10008.5.1.4.1.1.66.4" and seg.Modality == "SEG" and
          seg.SegmentationType == "BINARY" and int(seg.BitsAllocated) == 1 and
          seg.file_meta.TransferSyntaxUID == "1.2.840.10008.1.2.1",
          "SEG IOD, BINARY, 1 bit, Explicit VR LE")
    check(seg.SOPInstanceUID.startswith("1.2.826.0.1.3680043.10.1234.") and
          seg.SeriesInstanceUID.startswith("1.2.826.0.1.3680043.10.1234.") and
          len(seg.SOPInstanceUID) <= 64 and seg.SeriesInstanceUID != src[0].SeriesInstanceUID,
          "new UIDs under the root (%s)" % seg.SOPInstanceUID)
    check(seg.FrameOfReferenceUID == src[0].FrameOfReferenceUID and
          seg.StudyInstanceUID == src[0].StudyInstanceUID and
          str(seg.PatientName) == "Test^Seg" and seg.PatientID == "SEG-1",
          "Frame of Reference, study and patient copied from the source")
    segs = seg.SegmentSequence
    check([int(s.SegmentNumber) for s in segs] == [1, 2] and
          [s.SegmentLabel for s in segs] == ["soft tissue", "dense"],
          "segments 1 and 2 with the configured labels")
    # frames: segment-major, every slice where that segment is present
    want_frames = [(s, k) for s in (1, 2) for k in range(D) if (want[k] == s).any()]
    check(int(seg.NumberOfFrames) == len(want_frames),
          "%d frames, one per segment and slice holding it (%s)"
          % (len(want_frames), seg.NumberOfFrames))
    pf = seg.PerFrameFunctionalGroupsSequence
    shared = seg.SharedFunctionalGroupsSequence[0]
    check([float(x) for x in shared.PlaneOrientationSequence[0].ImageOrientationPatient] ==
          [float(x) for x in src[0].ImageOrientationPatient] and
          [float(x) for x in shared.PixelMeasuresSequence[0].PixelSpacing] ==
          [float(x) for x in src[0].PixelSpacing],
          "shared Plane Orientation and Pixel Measures are the source's")
    pos_ok = ref_ok = seg_ok = dim_ok = True
    for f, (s, k) in enumerate(want_frames):
        it = pf[f]
        pos_ok &= [float(x) for x in it.PlanePositionSequence[0].ImagePositionPatient] == \
            [float(x) for x in src[k].ImagePositionPatient]
        ref = it.DerivationImageSequence[0].SourceImageSequence[0]
        ref_ok &= ref.ReferencedSOPInstanceUID == src[k].SOPInstanceUID and \
            ref.ReferencedSOPClassUID == src[k].SOPClassUID
        seg_ok &= int(it.SegmentIdentificationSequence[0].ReferencedSegmentNumber) == s
        dim_ok &= [int(x) for x in it.FrameContentSequence[0].DimensionIndexValues] == [s, k + 1]
    check(pos_ok, "each frame's ImagePositionPatient is its source slice's")
    check(ref_ok, "each frame references its source SOP Instance")
    check(seg_ok and dim_ok, "each frame's segment number and dimension index values")
    rs = seg.ReferencedSeriesSequence
    check(len(rs) == 1 and rs[0].SeriesInstanceUID == src[0].SeriesInstanceUID and
          sorted(x.ReferencedSOPInstanceUID for x in rs[0].ReferencedInstanceSequence) ==
          sorted(x.SOPInstanceUID for x in src),
          "Referenced Series Sequence: the source series and every instance")
    px = seg.pixel_array.reshape(len(want_frames), H, W)
    bits = all(np.array_equal(px[f].astype(bool), want[k] == s)
               for f, (s, k) in enumerate(want_frames))
    check(bits, "the frames' bits equal the label masks")


if __name__ == "__main__":
    sys.exit(main())
