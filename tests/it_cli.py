"""it_cli: `dcmserve show` and `dcmserve run` end to end.

Runs the real binary ($DCMSERVE) on the TensorFlow-written models in
tests/data/savedmodels and on small SavedModels this test writes
itself (protoc compiles the repo's proto/*.proto for Python). Expected values
come from the models' README (y = 0.5 x + 2 and friends) and from numpy.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = os.path.join(SRC, "tests", "data", "savedmodels")
HP2 = os.path.join(MODELS, "saved_model_half_plus_two_cpu", "00000123")
TF2 = os.path.join(MODELS, "saved_model_half_plus_two_tf2_cpu", "00000123")
GPU = os.path.join(MODELS, "saved_model_half_plus_two_gpu", "00000123")
MATRIX = os.path.join(MODELS, "matrix_half_plus_two", "1")
COUNTER = os.path.join(MODELS, "saved_model_counter", "00000123")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def dcm(*args):
    p = subprocess.run([DCMSERVE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def run_ok(*args):
    rc, out, err = dcm(*args)
    check(rc == 0, "dcmserve %s: rc=%d stderr=%s" % (" ".join(args), rc, err.strip()))
    return out


def run_fails(needle, *args):
    """The command must fail with one line on stderr containing needle."""
    rc, out, err = dcm(*args)
    check(rc != 0, "dcmserve %s should fail" % " ".join(args))
    lines = [l for l in err.splitlines() if l.strip()]
    check(len(lines) == 1, "dcmserve %s: want one error line, got %r" % (" ".join(args), err))
    check(needle in err, "dcmserve %s: %r not in %r" % (" ".join(args), needle, err))
    return err


def results(out):
    """Parses `Result for output key k:` blocks into {k: text}."""
    res, key, buf = {}, None, []
    for line in out.splitlines():
        if line.startswith("Result for output key ") and line.endswith(":"):
            if key is not None:
                res[key] = "\n".join(buf)
            key, buf = line[len("Result for output key "):-1], []
        elif line.startswith("Output ") and " is saved to " in line:
            continue
        elif key is not None:
            buf.append(line)
    if key is not None:
        res[key] = "\n".join(buf)
    return res


# ---------------------------------------------------------------- show

def tensor_info_lines(indent, kind, key, name, dtype, shape):
    ind = "  " * indent
    return [ind + "  %s['%s'] tensor_info:" % (kind, key),
            ind + "      dtype: " + dtype,
            ind + "      shape: " + shape,
            ind + "      name: " + name]


def signature_lines(indent, method, inputs, outputs):
    """saved_model_cli's _show_inputs_outputs layout."""
    ind = "  " * indent
    lines = [ind + "The given SavedModel SignatureDef contains the following input(s):"]
    for key, name, dtype, shape in sorted(inputs):
        lines += tensor_info_lines(indent, "inputs", key, name, dtype, shape)
    lines.append(ind + "The given SavedModel SignatureDef contains the following output(s):")
    for key, name, dtype, shape in sorted(outputs):
        lines += tensor_info_lines(indent, "outputs", key, name, dtype, shape)
    lines.append(ind + "Method name is: " + method)
    return lines


# The table of tests/data/savedmodels/README.md for half_plus_two_cpu.
HP2_SIGS = {
    "serving_default": ("tensorflow/serving/predict",
                        [("x", "x:0", "DT_FLOAT", "(-1, 1)")],
                        [("y", "y:0", "DT_FLOAT", "(-1, 1)")]),
    "classify_x_to_y": ("tensorflow/serving/classify",
                        [("inputs", "tf_example:0", "DT_STRING", "unknown_rank")],
                        [("scores", "y:0", "DT_FLOAT", "(-1, 1)")]),
    "regress_x_to_y": ("tensorflow/serving/regress",
                       [("inputs", "tf_example:0", "DT_STRING", "unknown_rank")],
                       [("outputs", "y:0", "DT_FLOAT", "(-1, 1)")]),
    "regress_x_to_y2": ("tensorflow/serving/regress",
                        [("inputs", "tf_example:0", "DT_STRING", "unknown_rank")],
                        [("outputs", "y2:0", "DT_FLOAT", "(-1, 1)")]),
    "regress_x2_to_y3": ("tensorflow/serving/regress",
                         [("inputs", "x2:0", "DT_FLOAT", "(-1, 1)")],
                         [("outputs", "y3:0", "DT_FLOAT", "(-1, 1)")]),
}


def test_show():
    want = ["", "MetaGraphDef with tag-set: 'serve' contains the following SignatureDefs:"]
    for key in sorted(HP2_SIGS):
        method, ins, outs = HP2_SIGS[key]
        want += ["", "signature_def['%s']:" % key] + signature_lines(1, method, ins, outs)
    out = run_ok("show", "--dir", HP2, "--all")
    check(out == "\n".join(want) + "\n", "show --all layout:\n" + out)
    check(out.count("signature_def['") == 5, "show --all lists five signatures")

    out = run_ok("show", "--dir", HP2)
    check(out == "The given SavedModel contains the following tag-sets:\n'serve'\n",
          "show tag-sets: " + out)
    out = run_ok("show", "--dir", HP2, "--tag_set", "serve")
    want = ["The given SavedModel MetaGraphDef contains SignatureDefs with the following keys:"]
    want += ['SignatureDef key: "%s"' % k for k in sorted(HP2_SIGS)]
    check(out == "\n".join(want) + "\n", "show --tag_set keys: " + out)
    out = run_ok("show", "--dir", TF2, "--tag_set=serve", "--signature_def=serving_default")
    want = signature_lines(0, "tensorflow/serving/predict",
                           [("x", "serving_default_x:0", "DT_FLOAT", "(1)")],
                           [("y", "StatefulPartitionedCall_5:0", "DT_FLOAT", "(1)")])
    check(out == "\n".join(want) + "\n", "show one signature: " + out)
    # Counter outputs are stored as DT_FLOAT_REF; show prints what is stored
    # (as saved_model_cli), shapes of scalars are ().
    out = run_ok("show", "--dir", COUNTER, "--tag_set", "serve", "--signature_def", "get_counter")
    want = signature_lines(0, "tensorflow/serving/predict", [],
                           [("output", "counter:0", "DT_FLOAT_REF", "()")])
    check(out == "\n".join(want) + "\n", "show counter: " + out)

    run_fails("could not be found", "show", "--dir", HP2, "--tag_set", "gpu")
    run_fails('Serving signature key "nope" not found.', "show", "--dir", HP2, "--tag_set",
              "serve", "--signature_def", "nope")
    run_fails("saved_model.pb", "show", "--dir", os.path.join(MODELS, "nonexistent"))
    run_fails("unknown flag", "show", "--dir", HP2, "--bogus")


# ---------------------------------------------------------------- run

def test_run_models(tmp):
    # half_plus_two: y = 0.5 x + 2.
    out = run_ok("run", "--dir", HP2, "--tag_set", "serve", "--signature_def", "serving_default",
                 "--input_exprs", "x=[[1],[2],[5]]")
    want = np.array([[2.5], [3.0], [4.5]], dtype=np.float32)
    check(results(out) == {"y": str(want)}, "half_plus_two printed: " + out)

    outdir = os.path.join(tmp, "out")
    run_ok("run", "--dir", HP2, "--tag_set", "serve", "--signature_def", "serving_default",
           "--input_exprs", "x=[[1],[2],[5]]", "--outdir", outdir)
    y = np.load(os.path.join(outdir, "y.npy"))
    check(y.dtype == np.float32 and np.array_equal(y, want), "y.npy: %r" % (y,))
    # No clobbering without --overwrite; with it, the file is replaced.
    run_fails("--overwrite", "run", "--dir", HP2, "--input_exprs", "x=[[7]]", "--outdir", outdir)
    check(np.array_equal(np.load(os.path.join(outdir, "y.npy")), want), "y.npy kept")
    run_ok("run", "--dir", HP2, "--input_exprs", "x=[[7]]", "--outdir", outdir, "--overwrite")
    check(np.array_equal(np.load(os.path.join(outdir, "y.npy")),
                         np.array([[5.5]], dtype=np.float32)), "y.npy overwritten")

    # saved_model_cli's numpy forms, and left-out unit dimensions as REST takes them.
    for expr, x in (("x=[1, 2, 5]", [[1], [2], [5]]),
                    ("x=np.ones((2,1))", np.ones((2, 1))),
                    ("x=np.zeros((3,))", np.zeros((3, 1))),
                    ("x=np.full((2, 1), 7, dtype=np.float32)", np.full((2, 1), 7)),
                    ("x=numpy.full(shape=(1,1), fill_value=3)", [[3]]),
                    ("x=np.array([[1],[5]])", [[1], [5]]),
                    ("x=np.array([1, 5], dtype='float32')", [[1], [5]])):
        out = run_ok("run", "--dir", HP2, "--input_exprs", expr)
        y = 0.5 * np.array(x, dtype=np.float32) + 2
        check(results(out) == {"y": str(y)}, "%s printed: %s" % (expr, out))

    # regress_x2_to_y3: y3 = 0.5 x2 + 3, input from an .npy file.
    x2 = np.array([[1.0], [2.0], [5.0]], dtype=np.float32)
    np.save(os.path.join(tmp, "x2.npy"), x2)
    out = run_ok("run", "--dir", HP2, "--tag_set", "serve", "--signature_def",
                 "regress_x2_to_y3", "--inputs", "inputs=" + os.path.join(tmp, "x2.npy"))
    check(results(out) == {"outputs": str(0.5 * x2 + 3)}, "regress_x2_to_y3: " + out)

    # TF2 model: x=[1.0] -> [2.5]; x omitted -> default [0.0] -> [2.0].
    out = run_ok("run", "--dir", TF2, "--tag_set", "serve", "--signature_def", "serving_default",
                 "--input_exprs", "x=[1.0]")
    check(results(out) == {"y": str(np.array([2.5], dtype=np.float32))}, "tf2 x=[1.0]: " + out)
    out = run_ok("run", "--dir", TF2, "--tag_set", "serve", "--signature_def", "serving_default")
    check(results(out) == {"y": str(np.array([2.0], dtype=np.float32))}, "tf2 default: " + out)

    # matrix_half_plus_two: (-1, 3, 3), input from an .npz member.
    xm = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    np.savez(os.path.join(tmp, "m.npz"), other=np.zeros(2), xm=xm)
    out = run_ok("run", "--dir", MATRIX, "--tag_set", "serve", "--signature_def",
                 "serving_default", "--inputs", "x=%s[xm]" % os.path.join(tmp, "m.npz"))
    check(results(out) == {"y": str(0.5 * xm + 2)}, "matrix_half_plus_two: " + out)

    # The GPU-pinned model runs on the CPU.
    out = run_ok("run", "--dir", GPU, "--tag_set", "serve", "--signature_def", "serving_default",
                 "--input_exprs", "x=[[1],[2],[5]]")
    check(results(out) == {"y": str(want)}, "gpu model on cpu: " + out)

    # Scalar output of the counter model (a fresh load each time: 0 then 1).
    out = run_ok("run", "--dir", COUNTER, "--signature_def", "get_counter")
    check(results(out) == {"output": "0.0"}, "counter get: " + out)
    out = run_ok("run", "--dir", COUNTER, "--signature_def", "incr_counter_by",
                 "--input_exprs", "delta=2.5")
    check(results(out) == {"output": "2.5"}, "counter incr_by: " + out)


def test_run_errors(tmp, pb):
    # A hand-made model with half_plus_two's signature shape: x (-1, 1) DT_FLOAT.
    HP2 = os.path.join(tmp, "float_identity")
    write_identity_model(pb, HP2, 1, [-1, 1])
    # Never cast silently: a float64 file for a DT_FLOAT input is refused.
    np.save(os.path.join(tmp, "x64.npy"), np.array([[1.0]]))
    run_fails("expected dtype DT_FLOAT, got DT_DOUBLE", "run", "--dir", HP2, "--inputs",
              "x=" + os.path.join(tmp, "x64.npy"))
    run_fails("dimension 1 must be 1", "run", "--dir", HP2, "--input_exprs", "x=[[1, 2]]")
    run_fails("expected rank 2", "run", "--dir", HP2, "--input_exprs", "x=5")
    run_fails("expected rank 2", "run", "--dir", HP2, "--input_exprs", "x=[[[1]]]")
    run_fails("dtype=np.int32, but the signature input is DT_FLOAT", "run", "--dir", HP2,
              "--input_exprs", "x=np.ones((2,1), dtype=np.int32)")
    run_fails("only np.ones(shape), np.zeros(shape), np.full(shape, value) and np.array(list)",
              "run", "--dir", HP2, "--input_exprs", "x=np.eye(2)")
    run_fails("expected np.full(shape, value)", "run", "--dir", HP2, "--input_exprs",
              "x=np.full((2,1))")
    run_fails("negative dimension", "run", "--dir", HP2, "--input_exprs", "x=np.zeros((-1,1))")
    run_fails('"z" is not an input of signature "serving_default"', "run", "--dir", HP2,
              "--input_exprs", "z=[[1]]")
    run_fails("Missing but required: {x}.", "run", "--dir", HP2)
    run_fails("ragged", "run", "--dir", HP2, "--input_exprs", "x=[[1], [2, 3]]")
    run_fails("given more than once", "run", "--dir", HP2, "--input_exprs", "x=[[1]]",
              "--inputs", "x=" + os.path.join(tmp, "x64.npy"))
    run_fails('Serving signature key "nope" not found.', "run", "--dir", HP2, "--signature_def",
              "nope", "--input_exprs", "x=[[1]]")
    run_fails("No such file", "run", "--dir", HP2, "--inputs", "x=" + os.path.join(tmp, "no.npy"))
    run_fails("files can only feed a DT_STRING input", "run", "--dir", HP2, "--input_files",
              "x=" + os.path.join(tmp, "x64.npy"))


# ------------------------------------------- hand-made models (protoc + python)

def build_protos(tmp):
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen)
    proto_dir = os.path.join(SRC, "proto")
    protos = [f for f in os.listdir(proto_dir) if f.startswith("tf_") and f.endswith(".proto")]
    subprocess.run(["protoc", "-I" + proto_dir, "--python_out=" + gen] + protos, check=True)
    sys.path.insert(0, gen)
    import tf_savedmodel_pb2  # noqa: E402
    return tf_savedmodel_pb2


def write_identity_model(pb, path, dtype, shape):
    """x: Placeholder(dtype, shape) -> y: Identity(x), one signature."""
    sm = pb.SavedModel()
    sm.saved_model_schema_version = 1
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    x = mg.graph_def.node.add()
    x.name, x.op = "x", "Placeholder"
    x.attr["dtype"].type = dtype
    for d in shape:
        x.attr["shape"].shape.dim.add().size = d
    y = mg.graph_def.node.add()
    y.name, y.op = "y", "Identity"
    y.input.append("x")
    y.attr["T"].type = dtype
    sd = mg.signature_def["serving_default"]
    sd.method_name = "tensorflow/serving/predict"
    for info, key, name in ((sd.inputs, "x", "x:0"), (sd.outputs, "y", "y:0")):
        info[key].name = name
        info[key].dtype = dtype
        for d in shape:
            info[key].tensor_shape.dim.add().size = d
    os.makedirs(path)
    with open(os.path.join(path, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def test_handmade(tmp, pb):
    i32 = os.path.join(tmp, "int32")
    write_identity_model(pb, i32, 3, [-1])  # DT_INT32
    out = run_ok("run", "--dir", i32, "--input_exprs", "x=[1, -2, 2147483647]")
    check(results(out) == {"y": str(np.array([1, -2, 2147483647], dtype=np.int32))},
          "int32 identity: " + out)
    # A float literal for DT_INT32 is an error, as is an out-of-range int.
    run_fails("is a float literal", "run", "--dir", i32, "--input_exprs", "x=[1.5]")
    run_fails("is a float literal", "run", "--dir", i32, "--input_exprs", "x=[2.0]")
    run_fails("out of range for DT_INT32", "run", "--dir", i32, "--input_exprs",
              "x=[2147483648]")

    s = os.path.join(tmp, "string")
    write_identity_model(pb, s, 7, [-1])  # DT_STRING
    a, b = os.path.join(tmp, "a.bin"), os.path.join(tmp, "b.bin")
    with open(a, "wb") as f:
        f.write(b"DICM\x00\x01'x")
    with open(b, "wb") as f:
        f.write(b"hello")
    outdir = os.path.join(tmp, "sout")
    out = run_ok("run", "--dir", s, "--input_files", "x=%s,%s" % (a, b), "--outdir", outdir)
    want = np.array([b"DICM\x00\x01'x", b"hello"])
    check(results(out) == {"y": str(want)}, "string identity: " + out)
    got = np.load(os.path.join(outdir, "y.npy"))
    # numpy's S dtype drops trailing NULs only; these bytes have none.
    check(got.tolist() == want.tolist(), "string y.npy: %r" % (got,))
    out = run_ok("run", "--dir", s, "--input_exprs", "x=['ab', b'c\\x00d']")
    check(results(out) == {"y": str(np.array([b"ab", b"c\x00d"]))}, "string literal: " + out)

    f64 = os.path.join(tmp, "double")
    write_identity_model(pb, f64, 2, [2, 2])  # DT_DOUBLE
    out = run_ok("run", "--dir", f64, "--input_exprs", "x=[[1e-5, 2], [3, 1/3]]".replace(
        "1/3", "0.3333333333333333"))
    check(results(out) == {"y": str(np.array([[1e-5, 2], [3, 1 / 3]]))}, "double: " + out)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        pb = build_protos(tmp)
        for name, fn in (("show", lambda: test_show()), ("run_models", lambda: test_run_models(tmp)),
                         ("run_errors", lambda: test_run_errors(tmp, pb)),
                         ("handmade", lambda: test_handmade(tmp, pb))):
            try:
                fn()
            except Exception as e:  # one broken part must not hide the others
                check(False, "%s raised %r" % (name, e))
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("it_cli: all checks passed")


if __name__ == "__main__":
    main()
