"""it_model_folder: a model load reads nothing from outside its version folder
(docs/security.md, "Model folders"), seen through `dcmserve check` and
`dcmserve import-onnx`, so it runs against any build (DCMSERVE):

- a table model whose InitializeTableFromTextFileV2 reads a Const file name:
  inside the folder it loads; an absolute name outside, a '..' name, an asset
  (assets/vocab.txt, fed by asset_file_def) that is a link to a file outside,
  an asset under a folder link, an asset FIFO (no hang) and an asset link to
  /dev/zero are refused, and the message names the file without quoting it;
- half_plus_two with its graph, a variables shard, or variables/ itself linked
  to a copy outside, a shard FIFO, the index linked to /dev/zero: refused;
- import-onnx of mobile.onnx whose mobile.weights is a link to a copy outside,
  or a FIFO: refused.
- F8: three float_val [1.0] Consts of shape [2e8] (2.4 GB in memory from a
  few hundred bytes) are refused by the load budget (--max_model_memory_bytes),
  before anything is allocated; small broadcasts load.
A hard link to a file outside is read (docs/security.md says why).
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import gen_protos, serve_graph  # noqa: E402

DCMSERVE = os.environ["DCMSERVE"]
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HP2 = os.path.join(SRC, "tests", "data", "savedmodels", "saved_model_half_plus_two_cpu",
                   "00000123")
ONNX = os.path.join(SRC, "tests", "data", "onnx")
SECRET = "SECRETLINE"
pb = gen_protos()
failures = []


def write_table_model(d, fname, asset=None):
    """HashTableV2 string->int64 from a text file (key: whole line, value: line
    number); the file name is a Const `fname`, or with asset= the tensor fed
    with <d>/assets/<asset> through asset_file_def."""
    os.makedirs(d, exist_ok=True)
    sm, mg, node = serve_graph()
    q = node("q", "Placeholder", dtype=pb.fw.DT_STRING)
    del q
    fn = node("fname", "Const", dtype=pb.fw.DT_STRING)
    fn.attr["value"].tensor.dtype = pb.fw.DT_STRING
    fn.attr["value"].tensor.string_val.append(fname.encode())
    if asset:
        a = mg.asset_file_def.add(filename=asset)
        a.tensor_info.name = "fname:0"
    t = node("tbl", "HashTableV2", key_dtype=pb.fw.DT_STRING, value_dtype=pb.fw.DT_INT64)
    t.attr["shared_name"].s = b"tbl"
    init = node("init", "InitializeTableFromTextFileV2", ["tbl", "fname"])
    init.attr["key_index"].i = -1
    init.attr["value_index"].i = -2
    init.attr["vocab_size"].i = -1
    init.attr["delimiter"].s = b"\t"
    dflt = node("dflt", "Const", dtype=pb.fw.DT_INT64)
    dflt.attr["value"].tensor.dtype = pb.fw.DT_INT64
    dflt.attr["value"].tensor.int64_val.append(-1)
    node("find", "LookupTableFindV2", ["tbl", "q", "dflt"], Tin=pb.fw.DT_STRING,
         Tout=pb.fw.DT_INT64)
    mg.collection_def["legacy_init_op"].node_list.value.append("init")
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["q"].name = "q:0"
    sig.inputs["q"].dtype = pb.fw.DT_STRING
    sig.outputs["y"].name = "find:0"
    sig.outputs["y"].dtype = pb.fw.DT_INT64
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def write_broadcast_model(d, n_consts, dim):
    """x + c0 + c1 ... where each ci is a Const float_val [1.0] of shape [dim]:
    a few hundred bytes on disk, n_consts * dim * 4 bytes in memory (F8)."""
    os.makedirs(d, exist_ok=True)
    sm = pb.sm.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    g = mg.graph_def
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = pb.fw.DT_FLOAT
    prev = "x"
    for i in range(n_consts):
        c = g.node.add(name="c%d" % i, op="Const")
        c.attr["dtype"].type = pb.fw.DT_FLOAT
        t = c.attr["value"].tensor
        t.dtype = pb.fw.DT_FLOAT
        t.tensor_shape.dim.add(size=dim)
        t.float_val.append(1.0)
        a = g.node.add(name="add%d" % i, op="AddV2", input=[prev, "c%d" % i])
        a.attr["T"].type = pb.fw.DT_FLOAT
        prev = "add%d" % i
    sig = mg.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name = "x:0"
    sig.inputs["x"].dtype = pb.fw.DT_FLOAT
    sig.outputs["y"].name = prev + ":0"
    sig.outputs["y"].dtype = pb.fw.DT_FLOAT
    with open(os.path.join(d, "saved_model.pb"), "wb") as f:
        f.write(sm.SerializeToString())


def run(args, timeout=20):
    try:
        p = subprocess.run([DCMSERVE] + args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "hung", ""


def expect(what, args, ok, name=None):
    rc, out = run(args)
    good = (rc == 0) if ok else (rc not in (0, "hung") and (name is None or name in out)
                                 and SECRET not in out)
    print(("ok   " if good else "FAIL ") + "%s: rc=%s" % (what, rc))
    if not good:
        failures.append(what)
        print("    " + out.strip().replace("\n", "\n    ")[-600:])


def main():
    top = tempfile.mkdtemp(prefix="it_model_folder_")
    try:
        secret = os.path.join(top, "secret.txt")
        with open(secret, "w") as f:
            f.write(SECRET + "\n")
        os.makedirs(os.path.join(top, "odir"))
        shutil.copy(secret, os.path.join(top, "odir", "vocab.txt"))
        m = os.path.join(top, "m", "1")

        def table(what, fname, asset=None, make=None, ok=False, name=None):
            shutil.rmtree(os.path.join(top, "m"), ignore_errors=True)
            write_table_model(m, fname(m), asset)
            os.makedirs(os.path.join(m, "assets"), exist_ok=True)
            if make:
                make(os.path.join(m, "assets"))
            expect("table: " + what, ["check", m], ok, name)

        def vocab(a):
            with open(os.path.join(a, "vocab.txt"), "w") as f:
                f.write("cat\ndog\n")

        table("Const name inside the folder", lambda d: d + "/assets/vocab.txt", make=vocab,
              ok=True)
        table("asset inside the folder", lambda d: "ignored", asset="vocab.txt", make=vocab,
              ok=True)
        table("Const absolute name outside", lambda d: secret, name=secret)
        table("Const '..' name", lambda d: d + "/assets/../../../secret.txt", name="secret.txt")
        table("asset link to a file outside", lambda d: "x", asset="vocab.txt",
              make=lambda a: os.symlink(secret, os.path.join(a, "vocab.txt")), name="vocab.txt")
        table("Const name under a folder link", lambda d: d + "/assets/d/vocab.txt",
              make=lambda a: os.symlink(os.path.join(top, "odir"), os.path.join(a, "d")),
              name="vocab.txt")
        table("asset FIFO", lambda d: "x", asset="vocab.txt",
              make=lambda a: os.mkfifo(os.path.join(a, "vocab.txt")), name="vocab.txt")
        table("asset link to /dev/zero", lambda d: "x", asset="vocab.txt",
              make=lambda a: os.symlink("/dev/zero", os.path.join(a, "vocab.txt")),
              name="vocab.txt")
        table("asset hard link (read: the operator's doing)", lambda d: "x", asset="vocab.txt",
              make=lambda a: os.link(secret, os.path.join(a, "vocab.txt")), ok=True)

        out = os.path.join(top, "out")
        shutil.copytree(HP2, out)
        shard = "variables/variables.data-00000-of-00001"

        def hp2(what, rel, make, name, ok=False):
            shutil.rmtree(m, ignore_errors=True)
            shutil.copytree(HP2, m)
            p = os.path.join(m, rel)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
            make(p)
            expect("half_plus_two: " + what, ["check", m], ok, name)

        hp2("graph link outside", "saved_model.pb",
            lambda p: os.symlink(os.path.join(out, "saved_model.pb"), p), "saved_model.pb")
        hp2("shard link outside", shard, lambda p: os.symlink(os.path.join(out, shard), p),
            "variables.data")
        hp2("variables/ folder link outside", "variables",
            lambda p: os.symlink(os.path.join(out, "variables"), p), "variables")
        hp2("shard FIFO", shard, os.mkfifo, "not a regular file")
        hp2("index link to /dev/zero", "variables/variables.index",
            lambda p: os.symlink("/dev/zero", p), "variables.index")

        shutil.rmtree(m, ignore_errors=True)
        write_broadcast_model(m, 3, 200000000)
        expect("three float_val [1.0] Consts of shape [2e8] (F8): refused by the load budget",
               ["check", m], False, "--max_model_memory_bytes")
        shutil.rmtree(m, ignore_errors=True)
        write_broadcast_model(m, 3, 1000)
        expect("three small broadcast Consts load", ["check", m], True)

        o = os.path.join(top, "onnx")
        os.makedirs(o)
        shutil.copy(os.path.join(ONNX, "mobile.onnx"), o)
        shutil.copy(os.path.join(ONNX, "mobile.weights"), top)
        os.symlink(os.path.join(top, "mobile.weights"), os.path.join(o, "mobile.weights"))
        expect("import-onnx: external data link outside",
               ["import-onnx", os.path.join(o, "mobile.onnx"), "--output_dir",
                os.path.join(top, "imp", "1")], False, "mobile.weights")
        os.remove(os.path.join(o, "mobile.weights"))
        os.mkfifo(os.path.join(o, "mobile.weights"))
        expect("import-onnx: external data FIFO",
               ["import-onnx", os.path.join(o, "mobile.onnx"), "--output_dir",
                os.path.join(top, "imp", "2")], False, "mobile.weights")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    if failures:
        print("%d failed: %s" % (len(failures), "; ".join(failures)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
