"""it_wild: the real-world SavedModels of ../shared/testdata/wild, end to end.

For every model there, `dcmserve run` (the real binary, $DCMSERVE) is fed the
model's io/input_*.npy and each output is compared with io/expected_*.npy
within the folder README's tolerance |got - expected| <= 1e-5 + 1e-4 *
max|expected|. Models known not to load yet are listed in NOT_YET with the
reason; for those the test checks the load still fails with that reason (so a
fix forces the list to shrink) and prints them. Each model that runs is
then served by the real daemon on 127.0.0.1 (a base directory whose version 1
links to the model) and its Predict answer is held to the same check.
"""
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
WILD = os.path.join(os.environ.get("DCM_SHARED", os.path.join(SRC, "..", "shared")), "testdata",
                    "wild")

# model -> (owner, substring the failing load must print)
NOT_YET = {
}
# The signature the io/ files belong to where it is not serving_default.
SIGNATURE = {"iris_tf1_brianschardt": "predict-iris"}
# Models whose outputs depend on TensorFlow's random stream and the number of
# calls before (augmentation layers at serving time): no expected file; each
# output must have this shape, be finite, and (softmax) rows must sum to 1.
SHAPE_ONLY = {
    "leukemia_aayomis": {"output_0": (2, 2)},
}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, gen_protos  # noqa: E402

if not os.path.isdir(WILD):
    print("it_wild: skipped: ../shared/testdata/wild is absent")
    sys.exit(77)

failures = []
served = []  # (name, {key: input array}, {key: expected array})


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def close(what, got, want):
    check(got.shape == want.shape, "%s: shape %s, expected %s" % (what, got.shape, want.shape))
    if got.shape != want.shape:
        return
    tol = 1e-5 + 1e-4 * float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got - want)))
    check(err <= tol, "%s: max error %g > tolerance %g" % (what, err, tol))
    print("%s: max error %.3g (tolerance %.3g)" % (what, err, tol), flush=True)


def softmax_rows(what, got, shape):
    check(got.shape == shape, "%s: shape %s, expected %s" % (what, got.shape, shape))
    if got.shape != shape:
        return
    ok = bool(np.all(np.isfinite(got))) and bool(np.all((got >= 0) & (got <= 1)))
    sums = got.astype(np.float64).sum(axis=-1)
    check(ok and bool(np.all(np.abs(sums - 1) <= 1e-5)),
          "%s: not softmax rows: %s" % (what, got.tolist()))
    print("%s: shape %s, softmax rows (values unchecked)" % (what, got.shape), flush=True)


models = sorted(d for d in os.listdir(WILD) if os.path.isdir(os.path.join(WILD, d, "model")))
check(len(models) > 0, "no models under " + WILD)
for name in models:
    io = os.path.join(WILD, name, "io")
    feeds = []
    for f in sorted(glob.glob(os.path.join(io, "input_*.npy"))):
        key = os.path.basename(f)[len("input_"):-len(".npy")]
        feeds.append(key + "=" + f)
    with tempfile.TemporaryDirectory() as out:
        args = [DCMSERVE, "run", "--dir", os.path.join(WILD, name, "model"), "--outdir", out]
        if feeds:
            args += ["--inputs", ";".join(feeds)]
        if name in SIGNATURE:
            args += ["--signature_def", SIGNATURE[name]]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=300)
        if name in NOT_YET:
            owner, needle = NOT_YET[name]
            print("%s: expected to fail for now (%s)" % (name, owner), flush=True)
            check(p.returncode != 0 and needle in p.stderr,
                  "%s: expected a failing load naming %r, got rc=%d: %s"
                  % (name, needle, p.returncode, p.stderr.strip()[-300:]))
            continue
        check(p.returncode == 0, "%s: run failed rc=%d: %s" % (name, p.returncode,
                                                               p.stderr.strip()[-300:]))
        if p.returncode != 0:
            continue
        if name in SHAPE_ONLY:
            for key, shape in SHAPE_ONLY[name].items():
                gotf = os.path.join(out, key + ".npy")
                check(os.path.exists(gotf), "%s: output %s not written" % (name, key))
                if os.path.exists(gotf):
                    softmax_rows(name + "/" + key + " run", np.load(gotf), shape)
            served.append((name, {f.split("=", 1)[0]: np.load(f.split("=", 1)[1]) for f in feeds},
                           {key: shape for key, shape in SHAPE_ONLY[name].items()}))
            continue
        expected = sorted(glob.glob(os.path.join(io, "expected_*.npy")))
        check(len(expected) > 0, name + ": no expected outputs and not listed")
        served.append((name, {f.split("=", 1)[0]: np.load(f.split("=", 1)[1]) for f in feeds},
                       {os.path.basename(e)[len("expected_"):-len(".npy")]: np.load(e)
                        for e in expected}))
        for e in expected:
            key = os.path.basename(e)[len("expected_"):-len(".npy")]
            want = np.load(e)
            gotf = os.path.join(out, key + ".npy")
            check(os.path.exists(gotf), "%s: output %s not written" % (name, key))
            if not os.path.exists(gotf):
                continue
            got = np.load(gotf).astype(np.float64)
            check(got.shape == want.shape, "%s/%s: shape %s, expected %s"
                  % (name, key, got.shape, want.shape))
            if got.shape != want.shape:
                continue
            close(name + "/" + key + " run", got, want)

# iris_tf1_brianschardt's classify signature (serving_default): DT_STRING
# tf.Example input. classes and scores must be (2, 3); scores row i is the
# predict-iris output for the same features sorted in descending order and
# classes[i][j] the label of that class (README of the wild folder).
IRIS = "iris_tf1_brianschardt"
IRIS_X = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]
IRIS_LABELS = [b"Iris-setosa", b"Iris-versicolor", b"Iris-virginica"]
iris_examples = []
if IRIS in models and IRIS not in NOT_YET:
    io = os.path.join(WILD, IRIS, "io", "serving_default")
    files = [os.path.join(io, "input_inputs_%d.bin" % i) for i in range(2)]
    for f in files:
        with open(f, "rb") as fh:
            iris_examples.append(fh.read())
    with tempfile.TemporaryDirectory() as out:
        model = os.path.join(WILD, IRIS, "model")
        p = subprocess.run([DCMSERVE, "run", "--dir", model, "--outdir", out, "--input_files",
                            "inputs=" + ",".join(files)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        check(p.returncode == 0, "%s classify run failed: %s" % (IRIS, p.stderr.strip()[-300:]))
        p2 = subprocess.run([DCMSERVE, "run", "--dir", model, "--outdir", out + "/p",
                             "--signature_def", "predict-iris", "--input_exprs",
                             "inputs=" + repr(IRIS_X)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        check(p2.returncode == 0, "%s predict-iris run failed: %s" % (IRIS, p2.stderr.strip()[-300:]))
        if p.returncode == 0 and p2.returncode == 0:
            classes = np.load(os.path.join(out, "classes.npy"))
            scores = np.load(os.path.join(out, "scores.npy"))
            pred = np.load(os.path.join(out, "p", "prediction.npy"))
            check(classes.shape == (2, 3) and scores.shape == (2, 3),
                  "%s classify: shapes %s %s" % (IRIS, classes.shape, scores.shape))
            order = np.argsort(-pred, axis=1, kind="stable")
            close(IRIS + "/scores run", scores.astype(np.float64),
                  np.take_along_axis(pred, order, axis=1).astype(np.float64))
            want = [[IRIS_LABELS[j] for j in row] for row in order]
            check(classes.tolist() == want, "%s classify: classes %s, expected %s"
                  % (IRIS, classes.tolist(), want))
            iris_pred = pred

pb = gen_protos()
for name, inputs, expected in served:
    with tempfile.TemporaryDirectory() as base:
        os.symlink(os.path.abspath(os.path.join(WILD, name, "model")), os.path.join(base, "1"))
        d = Daemon(["--model_name=" + name, "--model_base_path=" + base])
        try:
            d.wait_health()  # SERVING once the version has loaded
            req = pb.tfs.PredictRequest()
            req.model_spec.name = name
            if name in SIGNATURE:
                req.model_spec.signature_name = SIGNATURE[name]
            for key, arr in inputs.items():
                t = req.inputs[key]
                t.dtype = pb.fw.DT_FLOAT
                for n in arr.shape:
                    t.tensor_shape.dim.add(size=n)
                t.tensor_content = np.ascontiguousarray(arr, dtype="<f4").tobytes()
            resp = d.stub.Predict(req, timeout=120)
            if name in SHAPE_ONLY:
                # Twice: the seed state the first call advanced must serve the second.
                for call in range(2):
                    if call:
                        resp = d.stub.Predict(req, timeout=120)
                    for key, shape in expected.items():
                        check(key in resp.outputs, "%s: Predict has no output %s" % (name, key))
                        if key in resp.outputs:
                            tp = resp.outputs[key]
                            got = (np.frombuffer(tp.tensor_content, dtype="<f4") if tp.tensor_content
                                   else np.asarray(tp.float_val, dtype=np.float32))
                            dims = tuple(x.size for x in tp.tensor_shape.dim)
                            check(got.size == int(np.prod(dims)), "%s/%s: %d values for %s"
                                  % (name, key, got.size, dims))
                            if got.size == int(np.prod(dims)):
                                softmax_rows("%s/%s Predict %d" % (name, key, call + 1),
                                             got.reshape(dims), shape)
                continue
            for key, want in expected.items():
                check(key in resp.outputs, "%s: Predict has no output %s" % (name, key))
                if key not in resp.outputs:
                    continue
                tp = resp.outputs[key]
                shape = tuple(x.size for x in tp.tensor_shape.dim)
                vals = (np.frombuffer(tp.tensor_content, dtype="<f4") if tp.tensor_content
                        else np.asarray(tp.float_val, dtype=np.float32))
                check(vals.size == int(np.prod(shape)), "%s/%s: %d values for shape %s"
                      % (name, key, vals.size, shape))
                if vals.size == int(np.prod(shape)):
                    close(name + "/" + key + " Predict", vals.reshape(shape).astype(np.float64), want)
            if name == IRIS and iris_examples:
                # Predict on the classify signature: DT_STRING tf.Example input.
                req = pb.tfs.PredictRequest()
                req.model_spec.name = name
                req.model_spec.signature_name = "serving_default"
                t = req.inputs["inputs"]
                t.dtype = pb.fw.DT_STRING
                t.tensor_shape.dim.add(size=2)
                t.string_val.extend(iris_examples)
                resp = d.stub.Predict(req, timeout=120)
                sc = resp.outputs["scores"]
                got = np.asarray(sc.float_val, dtype=np.float32) if not sc.tensor_content else \
                    np.frombuffer(sc.tensor_content, dtype="<f4")
                check(tuple(x.size for x in sc.tensor_shape.dim) == (2, 3) and got.size == 6,
                      "%s: Predict scores shape %s" % (name, sc.tensor_shape))
                cl = resp.outputs["classes"]
                check(tuple(x.size for x in cl.tensor_shape.dim) == (2, 3)
                      and len(cl.string_val) == 6, "%s: Predict classes shape" % name)
                if got.size == 6:
                    close(name + "/scores Predict", got.reshape(2, 3).astype(np.float64),
                          -np.sort(-iris_pred, axis=1).astype(np.float64))
                # TF Serving's Classify API on the same examples.
                creq = pb.tfs.ClassificationRequest()
                creq.model_spec.name = name
                for b in iris_examples:
                    creq.input.example_list.examples.add().ParseFromString(b)
                cres = d.stub.Classify(creq, timeout=120)
                rows = [[(c.label.encode(), c.score) for c in cl.classes]
                        for cl in cres.result.classifications]
                check(len(rows) == 2 and all(len(r) == 3 for r in rows),
                      "%s: Classify gave %r" % (name, rows))
                if len(rows) == 2 and all(len(r) == 3 for r in rows):
                    order = np.argsort(-iris_pred, axis=1, kind="stable")
                    check([[lab for lab, _ in r] for r in rows]
                          == [[IRIS_LABELS[j] for j in o] for o in order],
                          "%s: Classify labels %r" % (name, rows))
                    close(name + "/Classify scores",
                          np.asarray([[sc for _, sc in r] for r in rows], dtype=np.float64),
                          -np.sort(-iris_pred, axis=1).astype(np.float64))
                # MultiInference with one classify task: the same answer as Classify.
                mreq = pb.tfs.MultiInferenceRequest()
                task = mreq.tasks.add()
                task.model_spec.name = name
                task.method_name = "tensorflow/serving/classify"
                mreq.input.CopyFrom(creq.input)
                mres = d.stub.MultiInference(mreq, timeout=120)
                mrows = [[(c.label.encode(), c.score) for c in cl.classes]
                         for r in mres.results for cl in r.classification_result.classifications]
                check(len(mres.results) == 1 and mrows == rows and
                      mres.results[0].model_spec.signature_name == "serving_default",
                      "%s: MultiInference gave %r, Classify %r" % (name, mrows, rows))
        except Exception as e:  # a failed RPC is a failure of this model, not of the test
            check(False, "%s: Predict failed: %s\n%s" % (name, e, d.log_tail()))
        finally:
            d.stop()
            d.close()

if failures:
    print("it_wild: %d failure(s)" % len(failures))
    sys.exit(1)
print("it_wild: ok")
