#!/usr/bin/python3
"""ONNX's own backend conformance suite (the "node" tests) through the importer.

For every test folder of ../shared/testdata/onnx_node whose graph inputs and
outputs are tensors (1,773 of them; README there): the worker
(tests/tools/onnx_conf_run.c, many tests per process) imports model.onnx,
runs it on input_K.pb and writes the outputs, which are compared with
output_K.pb by ONNX's rule: same shape and dtype, floats within
numpy.testing.assert_allclose(rtol=1e-3, atol=1e-7) (NaN equal to NaN),
integers, bools and strings exact (bfloat16, which numpy lacks, compared as
float32 values, the form onnx's numpy_helper reads it in). The low-precision
types (ONNX 17-26: float8, float4, e8m0, int4, int2), which neither numpy nor
this onnx package decodes, are read here from raw_data: float8 / float4 / e8m0
compared by their values (decoded by each format's formula, NaN equal to
NaN), int4 / int2 exactly.

Each test ends as one of
    pass     imported, ran, every output matched
    refused  the import refused it (the message names what is missing)
    run-refused  imported, and then the run refused it as not implemented: what
             is missing must be refused at import, so this is a failure too
    wrong    imported, and then the run failed or an output differed
    crash    the worker died or hung on it
The test FAILS on any run-refused, wrong or crash, and when a test listed in
tests/data/onnx_conformance_pass.txt (the expected-pass list) does not pass.

Options (for maintainers, not needed by ctest):
    --update     rewrite the expected-pass list and docs/onnx_conformance.md
    --only SUBSTR  run only the tests whose name contains SUBSTR
    -v           print every test's result, not only the failing ones
"""
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
import onnx.defs
from onnx import numpy_helper

SRC = os.environ.get("DCM_SRC", ".")
BIN = os.environ.get("DCM_BIN", "build")
SHARED = os.environ.get("DCM_SHARED", os.path.join(SRC, "..", "shared"))
SUITE = os.path.join(SHARED, "testdata", "onnx_node")
PASS_LIST = os.path.join(SRC, "tests", "data", "onnx_conformance_pass.txt")
DOC = os.path.join(SRC, "docs", "onnx_conformance.md")
WORKER = os.path.join(BIN, "onnx_conf_run")
TEST_TIMEOUT_S = 120  # one test (import + run); the slowest take about a second

# The vision / medical-imaging subset: single-node tests of these ops.
VISION_OPS = sorted([
    # convolutions, normalisation, pooling, resampling
    "Conv", "ConvTranspose", "BatchNormalization", "InstanceNormalization",
    "LayerNormalization", "GroupNormalization", "MaxPool", "AveragePool",
    "GlobalAveragePool", "GlobalMaxPool", "Resize", "Upsample",
    # dense
    "Gemm", "MatMul", "Einsum",
    # activations
    "Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
    "Selu", "Celu", "Gelu", "Softplus", "Softsign", "Mish", "Clip", "Softmax", "LogSoftmax",
    "Erf",
    # elementwise arithmetic
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Abs", "Neg", "Reciprocal",
    "Floor", "Ceil", "Max", "Min", "Sum", "Mean",
    # reductions
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin",
    # shape ops and data movement
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Shape",
    "Size", "Identity", "Tile", "Gather", "GatherElements", "Slice", "Pad", "Expand",
    "Where", "Cast", "Constant", "ConstantOfShape", "TopK", "Dropout",
])


def skip(msg):
    print(msg)
    sys.exit(77)


def is_tensor_value(vi):
    return vi.type.HasField("tensor_type")


def load_tests(only):
    """[(name, folder, [input names], [output names], [op types], opset)] of
    the applicable tests (tensor inputs and outputs)."""
    tests, other = [], 0
    for name in sorted(os.listdir(SUITE)):
        folder = os.path.join(SUITE, name)
        if not name.startswith("test_") or not os.path.isdir(folder):
            continue
        if only and only not in name:
            continue
        m = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
        g = m.graph
        inits = {t.name for t in g.initializer}
        ins = [vi for vi in g.input if vi.name not in inits]
        if not all(is_tensor_value(vi) for vi in list(ins) + list(g.output)):
            other += 1
            continue
        opset = max([o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] or [0])
        ops = [(n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type
               for n in g.node]
        tests.append((name, folder, [vi.name for vi in ins], [vi.name for vi in g.output],
                      ops, opset))
    return tests, other


# ONNX's low-precision types: data_type -> (name, bits per element, kind),
# kind "f" for floating (compared by value), "i" / "u" for signed / unsigned
# integers.
LOWP = {17: ("FLOAT8E4M3FN", 8, "f"), 18: ("FLOAT8E4M3FNUZ", 8, "f"),
        19: ("FLOAT8E5M2", 8, "f"), 20: ("FLOAT8E5M2FNUZ", 8, "f"), 21: ("UINT4", 4, "u"),
        22: ("INT4", 4, "i"), 23: ("FLOAT4E2M1", 4, "f"), 24: ("FLOAT8E8M0", 8, "f"),
        25: ("UINT2", 2, "u"), 26: ("INT2", 2, "i")}


def lowp_elements(t):
    """The elements of a low-precision TensorProto one per byte: float bits
    as uint8, integers as int8 / uint8 values (the worker's form)."""
    _, bits, kind = LOWP[t.data_type]
    n = int(np.prod(t.dims)) if len(t.dims) else 1
    if t.raw_data:
        packed = np.frombuffer(t.raw_data, dtype=np.uint8)
    elif len(t.int32_data) == n:  # one element per value
        packed, bits = np.array(t.int32_data, dtype=np.uint32).astype(np.uint8), 8
    else:  # packed bytes, one per value
        packed = np.array(t.int32_data, dtype=np.uint32).astype(np.uint8)
    per = 8 // bits
    if len(packed) != (n * bits + 7) // 8:
        raise ValueError("%s: %d bytes for %d elements" % (LOWP[t.data_type][0], len(packed), n))
    idx = np.arange(n)
    v = (packed[idx // per] >> ((idx % per) * bits).astype(np.uint8)) & ((1 << bits) - 1) \
        if per > 1 else packed[:n].copy()
    v = v.astype(np.uint8)
    if kind == "i":  # sign-extend
        v = np.where(v >= (1 << (bits - 1)), v.astype(np.int16) - (1 << bits),
                     v.astype(np.int16)).astype(np.int8)
    return v.reshape(tuple(t.dims))


def lowp_values(data_type, b):
    """float64 values of low-precision float elements b (uint8 bits), by each
    format's definition: sign, exponent with bias, implicit leading one,
    subnormals at exponent 0; its NaN / Inf codes."""
    name = LOWP[data_type][0]
    b = b.astype(np.int64)
    if name == "FLOAT8E8M0":
        return np.where(b == 0xFF, np.nan, np.ldexp(1.0, (b - 127).astype(np.int32)))
    ebits, mbits, bias = {"FLOAT8E4M3FN": (4, 3, 7), "FLOAT8E4M3FNUZ": (4, 3, 8),
                          "FLOAT8E5M2": (5, 2, 15), "FLOAT8E5M2FNUZ": (5, 2, 16),
                          "FLOAT4E2M1": (2, 1, 1)}[name]
    nb = 1 + ebits + mbits
    sign = np.where((b >> (nb - 1)) & 1, -1.0, 1.0)
    e = (b >> mbits) & ((1 << ebits) - 1)
    m = b & ((1 << mbits) - 1)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias - mbits),
                   (1 + m / 2.0 ** mbits) * np.ldexp(1.0, (e - bias).astype(np.int32)))
    v = sign * mag
    emax = (1 << ebits) - 1
    if name == "FLOAT8E4M3FN":
        v = np.where((e == emax) & (m == (1 << mbits) - 1), np.nan, v)
    elif name == "FLOAT8E5M2":
        v = np.where((e == emax) & (m == 0), sign * np.inf, v)
        v = np.where((e == emax) & (m != 0), np.nan, v)
    elif name.endswith("FNUZ"):
        v = np.where(b == 0x80, np.nan, v)
    return v


def read_pb(path, bf16_bits=False):
    """The tensor as numpy reads it; bfloat16 (which numpy lacks) as float32,
    or with bf16_bits as its bits in a uint16 array (the worker's form); the
    low-precision types one element per byte (lowp_elements)."""
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    if t.data_type in LOWP:
        return lowp_elements(t)
    if bf16_bits and t.data_type == onnx.TensorProto.BFLOAT16:
        bits = np.frombuffer(t.raw_data, dtype="<u2") if t.raw_data else \
            np.array(t.int32_data, dtype=np.uint16)
        return bits.reshape(tuple(t.dims)).copy()
    return numpy_helper.to_array(t)


def pb_type(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.data_type


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def npy_able(a):
    return a.dtype.kind in "fiub" and a.dtype.itemsize in (1, 2, 4, 8)


def as_bytes(a):
    """An object array of str / bytes as numpy bytes, str encoded as UTF-8
    (the worker's form; numpy's own "S" conversion takes ASCII only)."""
    if not a.size:
        return np.zeros(a.shape, "S1")
    flat = [v.encode("utf-8") if isinstance(v, str) else v for v in a.ravel().tolist()]
    return np.array(flat, dtype="S").reshape(a.shape)


def write_inputs(test, work):
    """Writes in_K.npy; returns the expected outputs (or raise)."""
    name, folder, ins, outs, _, _ = test
    ds = os.path.join(folder, "test_data_set_0")
    for k in range(len(ins)):
        a = read_pb(os.path.join(ds, "input_%d.pb" % k), bf16_bits=True)
        if a.dtype == object:
            a = as_bytes(a)
        if a.dtype.kind == "S" or npy_able(a):
            np.save(os.path.join(work, "in_%d.npy" % k), a)
    return [(read_pb(os.path.join(ds, "output_%d.pb" % k)),
             pb_type(os.path.join(ds, "output_%d.pb" % k))) for k in range(len(outs))]


def compare(want, got):
    """None when got matches want by ONNX's rule, else why not."""
    if want.dtype == object:
        want = as_bytes(want)
    if got.shape != want.shape:
        return "shape %s, expected %s" % (got.shape, want.shape)
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype)
    if want.dtype.kind == "f":
        try:
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True)
        except AssertionError:
            with np.errstate(invalid="ignore"):
                d = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))) \
                    if want.size else 0
            return "values differ (max abs diff %g)" % d
        return None
    if not np.array_equal(got, want):
        return "values differ"
    return None


class Worker:
    """One onnx_conf_run process."""

    def __init__(self):
        self.p = subprocess.Popen([WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def ask(self, line, timeout):
        """The answer line, or None when the worker died or hung."""
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        ans = self.p.stdout.readline()
        return ans.rstrip("\n") if ans else None

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def run_one(worker, test, tmp):
    """(status, detail, worker) for one test; replaces a dead worker."""
    name, folder, ins, outs, _, _ = test
    work = tempfile.mkdtemp(prefix=name[:40] + "_", dir=tmp)
    try:
        want, unreadable = write_inputs(test, work), None
    except Exception as e:  # noqa: BLE001 - data types this onnx package cannot decode
        want, unreadable = None, "onnx %s cannot decode the test data (%r)" % (
            onnx.__version__, e)
    line = "\t".join([os.path.join(folder, "model.onnx"), work, str(len(ins))] + ins +
                     [str(len(outs))] + outs)
    ans = worker.ask(line, TEST_TIMEOUT_S)
    if ans is None:
        rc = worker.p.poll()
        worker.p.kill()
        worker.close()
        return "crash", ("worker exited with %s" % rc) if rc is not None else \
            "no answer within %d s" % TEST_TIMEOUT_S, Worker()
    kind, _, msg = ans.partition("\t")
    if kind in ("refused", "run-refused"):
        return kind, msg, worker
    if kind != "ok":
        return "wrong", msg, worker
    if want is None:  # imported, but its answer cannot be checked: counts against us
        return "wrong", unreadable, worker
    for k, (w, ty) in enumerate(want):
        got = np.load(os.path.join(work, "out_%d.npy" % k))
        if ty == onnx.TensorProto.BFLOAT16:  # the worker writes bfloat16 as its bits
            if got.dtype != np.uint16:
                return "wrong", "output %s: dtype %s, expected bfloat16" % (outs[k], got.dtype), \
                    worker
            got = bf16_to_f32(got)
        elif ty in LOWP:  # one element per byte, as lowp_elements reads w
            if got.dtype != w.dtype:
                return "wrong", "output %s: dtype %s, expected %s (as %s)" % (
                    outs[k], got.dtype, LOWP[ty][0], w.dtype), worker
            if LOWP[ty][2] == "f":
                got, w = lowp_values(ty, got), lowp_values(ty, w)
        why = compare(w, got)
        if why:
            return "wrong", "output %s: %s" % (outs[k], why), worker
    return "pass", "", worker


def run_all(tests, nworkers):
    results = {}
    q = queue.Queue()
    for t in tests:
        q.put(t)
    tmp = tempfile.mkdtemp(prefix="onnx_conf_")

    def loop():
        w = Worker()
        while True:
            try:
                t = q.get_nowait()
            except queue.Empty:
                break
            st, msg, w = run_one(w, t, tmp)
            results[t[0]] = (st, msg)
        w.close()

    th = [threading.Thread(target=loop) for _ in range(nworkers)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    subprocess.run(["rm", "-rf", tmp], check=False)
    return results


def read_pass_list():
    if not os.path.exists(PASS_LIST):
        return []
    with open(PASS_LIST) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def op_of(test, all_ops):
    """The op a test is about: the single node's op, else the ONNX op whose
    snake_case name is the longest prefix of the test name."""
    name, _, _, _, ops, _ = test
    if len(ops) == 1:
        return ops[0]
    best, blen = None, 0
    for op, snake_name in all_ops.items():
        for form in (snake_name, op.lower()) + TEST_ALIASES.get(op, ()):
            if (name == "test_" + form or name.startswith("test_" + form + "_")) and \
                    len(form) > blen:
                best, blen = op, len(form)
    return best or "(other)"


# Test-name forms of ops that the suite does not spell as the op's name.
TEST_ALIASES = {"NegativeLogLikelihoodLoss": ("nllloss",),
                "SoftmaxCrossEntropyLoss": ("sce",),
                "MeanVarianceNormalization": ("mvn",),
                "DynamicQuantizeLinear": ("dynamicquantizelinear",)}


def snake(op):
    out = ""
    for i, ch in enumerate(op):
        if ch.isupper() and i and (not op[i - 1].isupper() or
                                   (i + 1 < len(op) and op[i + 1].islower())):
            out += "_"
        out += ch.lower()
    return out


def accepted_opsets():
    """{op: "a-b, ..."} from the worker's --opsets listing."""
    out = subprocess.run([WORKER, "--opsets"], capture_output=True, text=True, check=False)
    table = {}
    for ln in out.stdout.splitlines():
        op, _, rng = ln.partition("\t")
        if op:
            table[op] = rng
    return table


def write_doc(tests, results):
    ops_in_suite = set(TEST_ALIASES)
    ops_in_suite.update(s.name for s in onnx.defs.get_all_schemas() if s.domain == "")
    for t in tests:
        ops_in_suite.update(t[4])
    all_ops = {op: snake(op) for op in ops_in_suite}
    per = {}
    for t in tests:
        op = op_of(t, all_ops)
        p, n = per.get(op, (0, 0))
        per[op] = (p + (results[t[0]][0] == "pass"), n + 1)
    acc = accepted_opsets()
    total = len(tests)
    npass = sum(1 for t in tests if results[t[0]][0] == "pass")
    vis = [t for t in tests if len(t[4]) == 1 and t[4][0] in VISION_OPS]
    vpass = sum(1 for t in vis if results[t[0]][0] == "pass")
    lines = [
        "# ONNX conformance (generated)",
        "",
        "Generated by `tests/it_onnx_conformance.py --update` from ONNX's backend node tests",
        "(`../shared/testdata/onnx_node`, README there): each test's `model.onnx` imported with",
        "`import-onnx`'s converter, run on the CPU backend on its inputs and compared with the",
        "expected outputs by ONNX's rule (same shape and dtype; floats `rtol=1e-3, atol=1e-7`, NaN",
        "equal to NaN; integers, bools and strings exact). A test that does not pass is refused at",
        "import with a message naming what is missing; `make test` (test `it_onnx_conformance`)",
        "fails on any refusal by the run instead of the import, wrong answer or crash and when a",
        "test of",
        "`tests/data/onnx_conformance_pass.txt` stops passing.",
        "",
        "- All applicable tests (tensor inputs and outputs): **%d of %d pass** (%.1f %%)."
        % (npass, total, 100.0 * npass / max(total, 1)),
        "- Vision / medical single-node subset: **%d of %d pass** (%.1f %%). Ops: %s."
        % (vpass, len(vis), 100.0 * vpass / max(len(vis), 1), ", ".join(VISION_OPS)),
        "",
        "Opsets accepted: the model opsets at which the importer converts the op (per op, after",
        "ONNX's operator changelog: an opset is accepted when the op's definition in force at it",
        "is one whose semantics the converter implements). `-`: the op is not converted.",
        "A test is counted under the op it is named after (`*_expanded` tests hold the op's",
        "function body and count under that op too).",
        "",
        "| op | opsets accepted | tests passed / total |",
        "|---|---|---|",
    ]
    for op in sorted(per, key=str.lower):
        p, n = per[op]
        lines.append("| %s | %s | %d / %d |" % (op, acc.get(op, "-"), p, n))
    with open(DOC, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    args = sys.argv[1:]
    update = "--update" in args
    verbose = "-v" in args
    only = args[args.index("--only") + 1] if "--only" in args else None
    if not os.path.isdir(SUITE):
        skip("skipped: %s not found (ONNX backend node tests)" % SUITE)
    if not os.access(WORKER, os.X_OK):
        print("FAIL: worker %s not built" % WORKER)
        return 1
    t0 = time.time()
    tests, other = load_tests(only)
    nworkers = max(1, min(2, os.cpu_count() or 1))
    results = run_all(tests, nworkers)
    counts = {}
    for t in tests:
        st, msg = results[t[0]]
        counts[st] = counts.get(st, 0) + 1
        if verbose or st in ("run-refused", "wrong", "crash"):
            print("%-8s %s %s" % (st.upper(), t[0], msg))
    vis = [t for t in tests if len(t[4]) == 1 and t[4][0] in VISION_OPS]
    vpass = sum(1 for t in vis if results[t[0]][0] == "pass")
    print("onnx conformance: %d of %d pass, %d refused, %d run-refused, %d wrong, %d crash "
          "(%d tests with sequence/optional values not counted); vision subset %d of %d; %.0f s"
          % (counts.get("pass", 0), len(tests), counts.get("refused", 0),
             counts.get("run-refused", 0), counts.get("wrong", 0), counts.get("crash", 0),
             other, vpass, len(vis), time.time() - t0))
    bad = counts.get("run-refused", 0) + counts.get("wrong", 0) + counts.get("crash", 0)
    names = {t[0] for t in tests}
    lost = [n for n in read_pass_list() if (only is None or only in n) and
            (n not in names or results[n][0] != "pass")]
    for n in lost:
        print("FAIL: %s is on the expected-pass list and did not pass: %s"
              % (n, results.get(n, ("missing", ""))))
    passed = sorted(t[0] for t in tests if results[t[0]][0] == "pass")
    new = sorted(set(passed) - set(read_pass_list()))
    if new and not update:
        print("note: %d tests pass that are not on the expected-pass list (run with --update)"
              % len(new))
    if update and only is None:
        with open(PASS_LIST, "w") as f:
            f.write("# ONNX backend node tests that pass (tests/it_onnx_conformance.py "
                    "--update)\n")
            for n in passed:
                f.write(n + "\n")
        write_doc(tests, results)
    if bad or lost:
        print("FAIL: %d refused at run time, wrong answers or crashes, %d expected passes lost"
              % (bad, len(lost)))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
