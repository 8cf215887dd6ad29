#!/usr/bin/python3
"""it_demo_model: the bundled DICOM demo model models/demo_ct/1 against
pydicom + numpy on real CT files.

Files (Debian's python3-pydicom test data, both uncompressed real CT):
    CT_small.dcm                          128 x 128
    dicomdirtests/77654033/CT2/17106       16 x 16
a batch of two files of different sizes, so DcmDecodeHU pads the smaller one
and the model must use each file's own pixels only.

Reference, per file (pydicom + numpy, independent of dcmserve):
    hu   = np.float32(pixel_array) * np.float32(slope) + np.float32(intercept)
    mean_hu = float32(float64 sum of hu) / float32(pixel count)
    counts  = pixels with hu < -400, -400 <= hu < 0, 0 <= hu < 300, hu >= 300
    tissue_fraction = float32(counts) / float32(pixel count)
The fractions are ratios of exact integer counts, correctly rounded either
way, so they must be equal; mean_hu is compared within 1e-5 of mean |hu|
(the model sums in double and rounds to float32 once, as the reference).

Checks:
  1. the committed model is what `dcmserve make-demo-model` writes now, its
     signature is as documented (`dcmserve show`), and its MetaGraphDef
     carries DcmDecodeHU's OpDef in stripped_op_list;
  2. `dcmserve run --input_files 'dicom=a,b' --outdir D` prints and saves
     the expected outputs; a corrupt second file fails naming dicom[1];
  3. the daemon (`dcmserve serve`) answers Predict with a DT_STRING batch in
     both orders and KServe ModelInfer with a BYTES batch; a corrupt file in
     the batch gives INVALID_ARGUMENT naming its index, and the next request
     is served again.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import grpc
import numpy as np
import pydicom

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, dicom_request, gen_protos, tensor_values  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")
MODEL = os.path.join(MODEL_BASE, "1")
TEST_FILES = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files")
FILES = [os.path.join(TEST_FILES, "CT_small.dcm"),
         os.path.join(TEST_FILES, "dicomdirtests", "77654033", "CT2", "17106")]
THRESHOLDS = (-400.0, 0.0, 300.0)


def reference(path):
    """(mean_hu float32, tissue_fraction float32[4], mean |hu|) from pydicom + numpy."""
    ds = pydicom.dcmread(path)
    check(ds.Modality == "CT" and int(ds.get("SamplesPerPixel", 1)) == 1,
          "%s: not a grey CT file" % path)
    slope = np.float32(float(ds.get("RescaleSlope", 1.0)))
    intercept = np.float32(float(ds.get("RescaleIntercept", 0.0)))
    hu = ds.pixel_array.astype(np.float32) * slope + intercept
    check(hu.dtype == np.float32 and hu.ndim == 2, "%s: hu %s %s" % (path, hu.dtype, hu.shape))
    n = hu.size
    lo, mid, hi = (np.float32(t) for t in THRESHOLDS)
    counts = np.array([np.count_nonzero(hu < lo),
                       np.count_nonzero((hu >= lo) & (hu < mid)),
                       np.count_nonzero((hu >= mid) & (hu < hi)),
                       np.count_nonzero(hu >= hi)], dtype=np.int64)
    check(counts.sum() == n, "%s: bins do not partition the pixels" % path)
    mean = np.float32(np.float32(hu.astype(np.float64).sum()) / np.float32(n))
    frac = counts.astype(np.float32) / np.float32(n)
    return mean, frac, float(np.abs(hu.astype(np.float64)).mean()), hu.shape


def compare(tag, mean_got, frac_got, refs):
    mean_got = np.asarray(mean_got, dtype=np.float32).reshape(-1)
    frac_got = np.asarray(frac_got, dtype=np.float32).reshape(-1, 4)
    check(mean_got.shape == (len(refs),), "%s: mean_hu shape %s" % (tag, mean_got.shape))
    check(frac_got.shape == (len(refs), 4), "%s: tissue_fraction shape %s" % (tag, frac_got.shape))
    for i, (mean, frac, scale, _) in enumerate(refs):
        check(abs(float(mean_got[i]) - float(mean)) <= 1e-5 * max(scale, 1.0),
              "%s: mean_hu[%d] = %r, pydicom+numpy %r" % (tag, i, mean_got[i], mean))
        check(np.array_equal(frac_got[i], frac),
              "%s: tissue_fraction[%d] = %r, pydicom+numpy %r" % (tag, i, frac_got[i], frac))


def dcm(*args):
    p = subprocess.run([DCMSERVE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def check_model_files(tmp):
    """The committed model equals a fresh make-demo-model; signature; op list."""
    fresh = os.path.join(tmp, "fresh")
    rc, out, err = dcm("make-demo-model", fresh)
    check(rc == 0, "make-demo-model: rc=%d %s" % (rc, err))
    with open(os.path.join(fresh, "saved_model.pb"), "rb") as f:
        fresh_pb = f.read()
    with open(os.path.join(MODEL, "saved_model.pb"), "rb") as f:
        committed_pb = f.read()
    check(fresh_pb == committed_pb,
          "models/demo_ct/1/saved_model.pb is stale: run scripts/make_demo_model.sh")
    check(sorted(os.listdir(MODEL)) == ["saved_model.pb"],
          "models/demo_ct/1 holds %s (the model has no variables)" % sorted(os.listdir(MODEL)))

    rc, out, err = dcm("show", "--dir", MODEL, "--tag_set", "serve", "--signature_def",
                       "serving_default")
    check(rc == 0, "show: rc=%d %s" % (rc, err))
    flat = " ".join(out.split())
    for needle in ("inputs['dicom'] tensor_info: dtype: DT_STRING shape: (-1) name: dicom:0",
                   "outputs['mean_hu'] tensor_info: dtype: DT_FLOAT shape: (-1) name: mean_hu:0",
                   "outputs['tissue_fraction'] tensor_info: dtype: DT_FLOAT shape: (-1, 4) "
                   "name: tissue_fraction:0",
                   "Method name is: tensorflow/serving/predict"):
        check(needle in flat, "show output lacks %r:\n%s" % (needle, out))

    pb = gen_protos()
    sm = pb.sm.SavedModel.FromString(committed_pb)
    mg = sm.meta_graphs[0]
    check(list(mg.meta_info_def.tags) == ["serve"], "tags %s" % mg.meta_info_def.tags)
    ops = {o.name: o for o in mg.meta_info_def.stripped_op_list.op}
    check("DcmDecodeHU" in ops, "stripped_op_list lacks DcmDecodeHU: %s" % list(ops))
    if "DcmDecodeHU" in ops:
        od = ops["DcmDecodeHU"]
        check([(a.name, a.type) for a in od.input_arg] == [("contents", pb.fw.DT_STRING)],
              "DcmDecodeHU inputs %s" % od.input_arg)
        check([(a.name, a.type) for a in od.output_arg] ==
              [("hu", pb.fw.DT_FLOAT), ("mask", pb.fw.DT_FLOAT)],
              "DcmDecodeHU outputs %s" % od.output_arg)
        check(sorted((a.name, a.type) for a in od.attr) ==
              [("frame", "int"), ("pad_value", "float"), ("size", "list(int)")],
              "DcmDecodeHU attrs %s" % od.attr)
    used = {n.op for n in mg.graph_def.node}
    for op in ("DcmDecodeHU", "Less", "GreaterEqual", "LogicalAnd", "Cast", "Sum"):
        check(op in used, "graph does not use %s: %s" % (op, sorted(used)))


def check_run(tmp, refs, corrupt):
    outdir = os.path.join(tmp, "run_out")
    rc, out, err = dcm("run", "--dir", MODEL, "--input_files", "dicom=" + ",".join(FILES),
                       "--outdir", outdir)
    check(rc == 0, "run: rc=%d %s" % (rc, err))
    check("Result for output key mean_hu:" in out and
          "Result for output key tissue_fraction:" in out, "run printed:\n" + out)
    if rc == 0:
        compare("run", np.load(os.path.join(outdir, "mean_hu.npy")),
                np.load(os.path.join(outdir, "tissue_fraction.npy")), refs)
        check(np.load(os.path.join(outdir, "tissue_fraction.npy")).dtype == np.float32,
              "tissue_fraction.npy dtype")
    rc, out, err = dcm("run", "--dir", MODEL, "--input_files",
                       "dicom=%s,%s" % (FILES[0], corrupt))
    check(rc != 0, "run with a corrupt file should fail")
    check("dicom[1]:" in err, "run with a corrupt file: %r lacks dicom[1]:" % err)


def check_daemon(refs, corrupt):
    pb = gen_protos()
    blobs = []
    for f in FILES:
        with open(f, "rb") as fh:
            blobs.append(fh.read())
    with open(corrupt, "rb") as fh:
        bad = fh.read()
    d = Daemon(["--model_name=demo_ct", "--model_base_path=" + MODEL_BASE])
    try:
        d.wait_health(1)

        def predict_ok(order, tag):
            resp = d.stub.Predict(dicom_request([blobs[i] for i in order]), timeout=30)
            m, f = resp.outputs["mean_hu"], resp.outputs["tissue_fraction"]
            check([x.size for x in m.tensor_shape.dim] == [len(order)], "%s mean_hu shape" % tag, d)
            check([x.size for x in f.tensor_shape.dim] == [len(order), 4],
                  "%s tissue_fraction shape" % tag, d)
            check(m.dtype == pb.fw.DT_FLOAT and f.dtype == pb.fw.DT_FLOAT, "%s dtypes" % tag, d)
            compare(tag, tensor_values(m), tensor_values(f), [refs[i] for i in order])

        predict_ok([0, 1], "Predict")
        predict_ok([1, 0], "Predict small first")

        # KServe v2: the same batch as a BYTES tensor.
        r = pb.ks.ModelInferRequest(model_name="demo_ct")
        t = r.inputs.add(name="dicom", datatype="BYTES", shape=[2])
        t.contents.bytes_contents.extend(blobs)
        resp = d.stub.ModelInfer(r, timeout=30)
        outs = {}
        for i, o in enumerate(resp.outputs):
            v = (np.frombuffer(resp.raw_output_contents[i], dtype="<f4")
                 if resp.raw_output_contents else np.array(o.contents.fp32_contents, np.float32))
            check(o.datatype == "FP32", "ModelInfer %s datatype %s" % (o.name, o.datatype), d)
            outs[o.name] = v.reshape(list(o.shape))
        check(sorted(outs) == ["mean_hu", "tissue_fraction"], "ModelInfer outputs %s" % outs, d)
        compare("ModelInfer", outs.get("mean_hu", []), outs.get("tissue_fraction", []), refs)
        try:
            d.stub.Predict(dicom_request([blobs[0], bad]), timeout=30)
            check(False, "Predict with a corrupt file succeeded", d)
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT,
                  "corrupt file: %s %s" % (e.code(), e.details()), d)
            check("dicom[1]:" in e.details(), "corrupt file message %r" % e.details(), d)
        predict_ok([0, 1], "Predict after an error")
        check(d.proc.poll() is None, "daemon exited", d)
        rc = d.stop()
        check(rc == 0, "daemon exit status %s" % rc, d)
    finally:
        d.close()


def main():
    for f in FILES:
        check(os.path.exists(f), "missing pydicom test file %s" % f)
    refs = [reference(f) for f in FILES]
    check(refs[0][3] != refs[1][3], "the two files should differ in size")
    tmp = tempfile.mkdtemp(prefix="it_demo_model_")
    try:
        # A truncated CT: the header parses, the pixel data is cut short.
        corrupt = os.path.join(tmp, "truncated.dcm")
        with open(FILES[0], "rb") as src, open(corrupt, "wb") as dst:
            data = src.read()
            dst.write(data[:len(data) - 5000])
        check_model_files(tmp)
        check_run(tmp, refs, corrupt)
        check_daemon(refs, corrupt)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for i, (mean, frac, _, shape) in enumerate(refs):
        print("%s %s: mean_hu %.4f tissue_fraction %s" % (os.path.basename(FILES[i]), shape,
                                                          mean, frac))
    print("it_demo_model: OK")


if __name__ == "__main__":
    main()
