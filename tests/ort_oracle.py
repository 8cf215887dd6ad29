"""ONNX Runtime as an independent reference for the ONNX tests (not a test itself).

onnxruntime-node from npm, installed by bench/install_ort.sh into the
git-ignored bench/node_modules (CPU build only); tests/tools/ort_run.js runs
one model. `make test` does not install it: tests that use it say whether it
was there and fall back on their own numpy reference when it is not.
"""
import json
import os
import shutil
import subprocess
import tempfile

import numpy as np

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
NODE_MODULES = os.path.join(SRC, "bench", "node_modules")
RUNNER = os.path.join(SRC, "tests", "tools", "ort_run.js")
# numpy dtype -> ORT tensor type (ort_run.js)
TYPES = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64",
         "uint8": "uint8", "int8": "int8", "bool": "bool"}


def available():
    """'' when onnxruntime-node can run here, else why not."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not os.path.isdir(os.path.join(NODE_MODULES, "onnxruntime-node")):
        return "onnxruntime-node is not installed (sh bench/install_ort.sh)"
    r = subprocess.run(["node", "-e", "require('onnxruntime-node')"], capture_output=True,
                       text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES), timeout=120)
    if r.returncode != 0:
        return "onnxruntime-node does not load: " + r.stderr.strip()[-300:]
    return ""


def run(model_path, inputs, opt="all"):
    """Runs model_path on {name: numpy array} with ORT's graph optimisation
    level opt ("all", "extended", "basic", "disabled"); {output name: array}."""
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"model": os.path.abspath(model_path), "inputs": [], "outdir": tmp, "opt": opt}
        for k, (name, arr) in enumerate(inputs.items()):
            p = os.path.join(tmp, "in%d.bin" % k)
            np.ascontiguousarray(arr).tofile(p)
            spec["inputs"].append({"name": name, "dims": list(arr.shape), "file": p,
                                   "type": TYPES[str(arr.dtype)]})
        r = subprocess.run(["node", RUNNER], input=json.dumps(spec), capture_output=True,
                           text=True, env=dict(os.environ, NODE_PATH=NODE_MODULES), timeout=600)
        if r.returncode != 0:
            raise RuntimeError("ort_run.js failed on %s:\n%s" % (model_path, r.stderr))
        back = {v: np.dtype("bool" if v == "bool" else k) for k, v in TYPES.items()}
        return {o["name"]: np.fromfile(o["file"], back[o["type"]]).reshape(o["dims"])
                for o in json.loads(r.stdout)["outputs"]}
