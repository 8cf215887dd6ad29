"""it_examples_python: scripts/gen_python_stubs.sh and examples/python/predict_dicom.py
against the real daemon serving the demo model.

- the stubs are generated with every compiler installed (Debian's protoc +
  grpc_python_plugin, and python3-grpc-tools' protoc 3.5), and the example
  sends a folder of CT files (plus one named file; a non-DICOM file in the
  folder is skipped) through Predict and ModelInfer; every value is checked
  against pydicom + numpy (it_demo_model's reference);
- the `optional` handling: a proto3 tree with `optional` fields and an import
  chain compiles with both compilers, the files under the tree are unchanged,
  and presence is kept where the compiler supports it;
- the Python snippets of README.md and docs/demo.md run against the daemon
  (gRPC and REST).
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, free_port, stub_compilers  # noqa: E402
from it_demo_model import TEST_FILES, compare, reference  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GEN = os.path.join(SRC, "scripts", "gen_python_stubs.sh")
EXAMPLE = os.path.join(SRC, "examples", "python", "predict_dicom.py")
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")
CT_DIR = os.path.join(TEST_FILES, "dicomdirtests", "77654033", "CT2")
CT_SMALL = os.path.join(TEST_FILES, "CT_small.dcm")



def gen(mode, out, *args):
    r = subprocess.run(["/bin/sh", GEN, out] + list(args), env=dict(os.environ, PROTOC=mode),
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "gen_python_stubs.sh (%s) failed:\n%s%s" % (mode, r.stdout, r.stderr))
    return r.stdout


def py(stubs, *args, code=None, env_extra=None):
    env = dict(os.environ, PYTHONPATH=stubs, **(env_extra or {}))
    cmd = ["/usr/bin/python3"] + (["-c", code] if code is not None else list(args))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def check_optional(mode, tmp):
    """A proto3 tree using `optional`, laid out like an upstream one."""
    root = os.path.join(tmp, "upstream_" + mode)
    os.makedirs(os.path.join(root, "pkg", "apis"))
    os.makedirs(os.path.join(root, "fw"))
    files = {
        "fw/tensor.proto": 'syntax = "proto3";\npackage fw;\nmessage Tensor { repeated float v = 1; }\n',
        "pkg/apis/predict.proto": (
            'syntax = "proto3";\npackage pkg;\nimport "fw/tensor.proto";\n'
            'import "google/protobuf/wrappers.proto";\n'
            'message Req {\n  map<string, fw.Tensor> inputs = 2;\n'
            '  optional bytes client_id = 6;\n  google.protobuf.Int64Value version = 3;\n'
            '  message Opt {\n    optional int64 max_len = 6;\n  }\n  optional Opt opt = 7;\n}\n'
            'service S {\n  rpc Predict(Req) returns (Req);\n}\n'),
    }
    digests = {}
    for rel, text in files.items():
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
        digests[rel] = hashlib.sha256(text.encode()).hexdigest()
    out = os.path.join(tmp, "stubs_opt_" + mode)
    log = gen(mode, out, root, "pkg/apis/predict.proto")
    for rel in files:
        with open(os.path.join(root, rel), "rb") as f:
            check(hashlib.sha256(f.read()).hexdigest() == digests[rel], "%s: %s changed" % (mode, rel))
    code = ("from pkg.apis import predict_pb2 as p, predict_pb2_grpc as g\n"
            "r = p.Req(client_id=b'c'); r.opt.max_len = 5; r.inputs['x'].v.append(1.5)\n"
            "r.version.value = 3\n"
            "b = r.SerializeToString(); q = p.Req.FromString(b)\n"
            "assert q.client_id == b'c' and q.opt.max_len == 5 and q.inputs['x'].v[0] == 1.5\n"
            "try:\n    pres = str(p.Req().HasField('client_id'))\n"
            "except ValueError:\n    pres = 'lost'\n"
            "print(pres, b.hex(), g.SStub.__name__)\n")
    r = py(out, code=code)
    check(r.returncode == 0, "%s: generated code for the optional tree: %s" % (mode, r.stderr))
    presence, wire, _ = r.stdout.split()
    stripped = "label removed" in log
    if mode == "grpc_tools":
        check(stripped, "grpc_tools (protoc 3.5) compiled `optional` without the rewrite?\n" + log)
    # Presence tracking is what the rewrite gives up, and only that.
    check(presence == ("lost" if stripped else "False"), "%s: presence %s" % (mode, presence))
    # Wire bytes are the same whichever way the tree was compiled.
    return wire, stripped


def check_example(stubs, port, tmp):
    folder = os.path.join(tmp, "study")
    os.makedirs(folder)
    for name in sorted(os.listdir(CT_DIR)):
        shutil.copy(os.path.join(CT_DIR, name), os.path.join(folder, name))
    with open(os.path.join(folder, "README.txt"), "w") as f:
        f.write("not a DICOM file: the example skips it\n")
    expect = [os.path.join(folder, n) for n in sorted(os.listdir(CT_DIR))] + [CT_SMALL]
    refs = [reference(p) for p in expect]
    r = py(stubs, EXAMPLE, "--target", "127.0.0.1:%d" % port, "--json", folder, CT_SMALL)
    check(r.returncode == 0, "predict_dicom.py failed: %s%s" % (r.stdout, r.stderr))
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    for api in ("predict", "infer"):
        got = [x for x in rows if x["api"] == api]
        check([x["file"] for x in got] == expect, "%s: files %r" % (api, [x["file"] for x in got]))
        compare("example " + api, [x["mean_hu"] for x in got],
                [x["tissue_fraction"] for x in got], refs)
    # A wrong model name is reported, not a traceback.
    r = py(stubs, EXAMPLE, "--target", "127.0.0.1:%d" % port, "--model", "nosuch", CT_SMALL)
    check(r.returncode != 0 and "NOT_FOUND" in r.stderr, "unknown model: %r" % r.stderr)
    return len(expect)


def doc_snippets():
    """(name, code) of the ```python blocks of README.md and docs/demo.md."""
    out = []
    for rel in ("README.md", os.path.join("docs", "demo.md")):
        with open(os.path.join(SRC, rel)) as f:
            text = f.read()
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", text, re.S)):
            out.append(("%s#%d" % (rel, i + 1), block))
    return out


def check_snippets(stubs, port, rest, tmp):
    n = 0
    for name, code in doc_snippets():
        by_env = 'os.environ.get("REST_PORT", "8501")' in code
        check("localhost:8500" in code or "localhost:8501" in code or by_env,
              "%s: the snippet calls neither localhost:8500 (gRPC) nor :8501 (REST), nor takes "
              "REST_PORT" % name)
        path = os.path.join(tmp, "snippet%d.py" % n)
        with open(path, "w") as f:
            f.write(code.replace("localhost:8500", "127.0.0.1:%d" % port)
                    .replace("localhost:8501", "127.0.0.1:%d" % rest))
        # A snippet that reads REST_PORT (the README's) runs as written, the
        # port in its environment as `make run REST_PORT=...` would set it.
        env = {"REST_PORT": str(rest)} if by_env else None
        r = py(stubs, path, CT_SMALL, env_extra=env)
        check(r.returncode == 0, "%s failed:\n%s%s" % (name, r.stdout, r.stderr))
        check("mean_hu" in r.stdout and "-119.07" in r.stdout,
              "%s printed no mean_hu of CT_small.dcm:\n%s" % (name, r.stdout))
        if by_env:  # and it shows the server's {"error": ...} for a file that is not DICOM
            r = py(stubs, path, os.path.join(SRC, "README.md"), env_extra=env)
            check(r.returncode != 0 and re.search(r"HTTP 400: .*DICOM", r.stderr),
                  "%s on a non-DICOM file: rc %d, %s%s" % (name, r.returncode, r.stdout, r.stderr))
        n += 1
    check(n >= 3, "expected the README's and demo.md's snippets, found %d" % n)
    return n


def main():
    modes = stub_compilers()
    check(modes, "neither protoc + grpc_python_plugin nor python3 grpc_tools is installed")
    with tempfile.TemporaryDirectory() as tmp:
        wires = {}
        for mode in modes:
            wires[mode] = check_optional(mode, tmp)
        check(len({w for w, _ in wires.values()}) == 1, "wire bytes differ: %r" % wires)
        rest = free_port()
        d = Daemon(["--model_name=demo_ct", "--model_base_path=" + MODEL_BASE,
                    "--rest_api_port=%d" % rest])
        try:
            d.wait_health(want=1)
            for mode in modes:
                stubs = os.path.join(tmp, "stubs_" + mode)
                gen(mode, stubs)
                n = check_example(stubs, d.port, os.path.join(tmp, "ex_" + mode))
                print("%s stubs: %d files through Predict and ModelInfer match pydicom" % (mode, n))
            s = check_snippets(os.path.join(tmp, "stubs_" + modes[0]), d.port, rest, tmp)
            print("%d doc snippets ran" % s)
        finally:
            d.close()
    print("compilers: %s" % ", ".join("%s (optional %s)" % (m, "rewritten" if wires[m][1] else "kept")
                                      for m in modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
