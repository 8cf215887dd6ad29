"""it_tfs_client: TF Serving's and KServe's Python client code, unchanged,
against the real daemon.

scripts/gen_python_stubs.sh writes the stubs (with each compiler installed:
Debian's protoc + grpc_python_plugin, and python3-grpc-tools); every module
it promises under TF Serving's, TensorFlow's and KServe's names imports; then
the two snippets of docs/api.md ("Python: TF Serving's and KServe's module
names") run as they are written, only their port changed, against dcmserve
serving TF Serving's half_plus_two test model as "half_plus_two"; their
printed answers are checked against y = x / 2 + 2."""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, stub_compilers  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GEN = os.path.join(SRC, "scripts", "gen_python_stubs.sh")
API_MD = os.path.join(SRC, "docs", "api.md")
MODULES = [
    "tensorflow_serving.apis.predict_pb2", "tensorflow_serving.apis.prediction_service_pb2_grpc",
    "tensorflow_serving.apis.prediction_service_pb2", "tensorflow_serving.apis.model_pb2",
    "tensorflow_serving.apis.get_model_metadata_pb2", "tensorflow_serving.apis.get_model_status_pb2",
    "tensorflow_serving.apis.model_service_pb2_grpc", "tensorflow_serving.apis.classification_pb2",
    "tensorflow_serving.apis.regression_pb2", "tensorflow_serving.apis.inference_pb2",
    "tensorflow_serving.apis.input_pb2", "tensorflow_serving.apis.model_management_pb2",
    "tensorflow_serving.config.model_server_config_pb2", "tensorflow_serving.util.status_pb2",
    "tensorflow.core.framework.tensor_pb2", "tensorflow.core.framework.tensor_shape_pb2",
    "tensorflow.core.framework.types_pb2", "tensorflow.core.example.example_pb2",
    "tensorflow.core.example.feature_pb2", "tensorflow.core.protobuf.meta_graph_pb2",
    "grpc_predict_v2_pb2", "grpc_predict_v2_pb2_grpc",
]



def snippets():
    text = open(API_MD, encoding="utf-8").read()
    m = re.search(r"^### Python: TF Serving's and KServe's module names$(.*?)(?=^#)", text, re.S | re.M)
    check(m is not None, "docs/api.md lacks the section the snippets are in")
    blocks = re.findall(r"```python\n(.*?)```", m.group(1), re.S)
    check(len(blocks) == 2, "expected 2 python snippets in the section, found %d" % len(blocks))
    return blocks


def run(stubs, code, port):
    check(code.count('"localhost:8500"') == 1, "snippet does not connect to localhost:8500")
    code = code.replace('"localhost:8500"', '"localhost:%d"' % port)
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=dict(os.environ, PYTHONPATH=stubs),
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "snippet failed (rc %d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return r.stdout


def main():
    modes = stub_compilers()
    check(modes, "neither protoc + grpc_python_plugin nor python3 grpc_tools is installed")
    tfs, kserve = snippets()
    d = Daemon(["--model_name=half_plus_two", "--model_base_path=" + HPT])
    try:
        d.wait_health()
        with tempfile.TemporaryDirectory() as tmp:
            for mode in modes:
                stubs = os.path.join(tmp, mode)
                r = subprocess.run(["/bin/sh", GEN, stubs], env=dict(os.environ, PROTOC=mode),
                                   capture_output=True, text=True, timeout=120)
                check(r.returncode == 0, "gen_python_stubs.sh (%s):\n%s%s" % (mode, r.stdout, r.stderr))
                r = subprocess.run(["/usr/bin/python3", "-c",
                                    "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)",
                                    *MODULES], env=dict(os.environ, PYTHONPATH=stubs),
                                   capture_output=True, text=True, timeout=120)
                check(r.returncode == 0, "%s: a module does not import:\n%s" % (mode, r.stderr))
                out = run(stubs, tfs, d.port)
                check("y: [2.5, 3.0, 4.5]" in out, "%s: TF Serving Predict printed %r" % (mode, out), d)
                check("inputs: ['x']" in out, "%s: metadata Unpack printed %r" % (mode, out), d)
                check("versions: [(123, 30)]" in out, "%s: GetModelStatus printed %r" % (mode, out), d)
                out = run(stubs, kserve, d.port)
                check("ready: True" in out and "y: y [2.5, 3.0, 4.5]" in out,
                      "%s: KServe ModelInfer printed %r" % (mode, out), d)
                print("%s: %d modules import; the TF Serving and KServe snippets ran" % (mode, len(MODULES)))
        check(d.stop() == 0, "daemon exit", d)
    finally:
        d.close()
    print("it_tfs_client: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
