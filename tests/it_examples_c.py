"""it_examples_c: examples/c/predict_dicom.c (built as $DCM_BIN/predict_dicom)
sends two CT files to the real daemon serving the demo model through
TF Serving Predict on the gRPC core API; the outputs it prints are checked
against pydicom + numpy (it_demo_model's reference). An unknown model gives
exit 1 and the NOT_FOUND status (5)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check  # noqa: E402
from it_demo_model import FILES, compare, reference  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BIN_DIR = os.environ.get("DCM_BIN", os.path.join(SRC, "build"))
EXE = os.path.join(BIN_DIR, "predict_dicom")
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")


def parse(stdout):
    """{name: (shape, values)} from lines 'NAME: dtype D shape [a, b] values v...'."""
    out = {}
    for line in stdout.splitlines():
        name, rest = line.split(": ", 1)
        shape_s = rest[rest.index("[") + 1:rest.index("]")]
        shape = [int(x) for x in shape_s.split(",")] if shape_s else []
        values = [float(x) for x in rest.split(" values", 1)[1].split()]
        out[name] = (shape, values)
    return out


def main():
    check(os.access(EXE, os.X_OK), "%s is not built" % EXE)
    refs = [reference(p) for p in FILES]
    d = Daemon(["--model_name=demo_ct", "--model_base_path=" + MODEL_BASE])
    try:
        d.wait_health(want=1)
        target = "127.0.0.1:%d" % d.port
        r = subprocess.run([EXE, "--target", target] + FILES, capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, "predict_dicom failed (%d): %s%s" % (r.returncode, r.stdout, r.stderr))
        out = parse(r.stdout)
        check(out["mean_hu"][0] == [len(FILES)], "mean_hu shape %r" % out["mean_hu"][0])
        check(out["tissue_fraction"][0] == [len(FILES), 4], "shape %r" % out["tissue_fraction"][0])
        frac = out["tissue_fraction"][1]
        compare("C client", out["mean_hu"][1], [frac[4 * i:4 * i + 4] for i in range(len(FILES))],
                refs)
        r = subprocess.run([EXE, "--target", target, "--model", "nosuch", FILES[0]],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 1 and "status 5" in r.stderr, "unknown model: %d %r" % (r.returncode, r.stderr))
        r = subprocess.run([EXE], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "usage" in r.stderr, "no files: %d %r" % (r.returncode, r.stderr))
    finally:
        d.close()
    print("C client: %d files through Predict, values match pydicom" % len(FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
