"""it_examples_rest: examples/rest/predict_b64.sh (curl, TF Serving REST :predict
with base64 DICOM files) against the real daemon serving the demo model; the
values are checked against pydicom + numpy (it_demo_model's reference). An
unknown model makes the script fail with the server's message."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import Daemon, check, free_port  # noqa: E402
from it_demo_model import FILES, compare, reference  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRIPT = os.path.join(SRC, "examples", "rest", "predict_b64.sh")
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")


def main():
    refs = [reference(p) for p in FILES]
    rest = free_port()
    d = Daemon(["--model_name=demo_ct", "--model_base_path=" + MODEL_BASE,
                "--rest_api_port=%d" % rest])
    try:
        d.wait_health(want=1)
        url = "http://127.0.0.1:%d" % rest
        r = subprocess.run(["/bin/sh", SCRIPT, "-u", url] + FILES, capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0, "predict_b64.sh failed: %s%s" % (r.stdout, r.stderr), d)
        preds = json.loads(r.stdout)["predictions"]
        check(len(preds) == len(FILES), "%d predictions for %d files" % (len(preds), len(FILES)))
        compare("REST b64", [p["mean_hu"] for p in preds], [p["tissue_fraction"] for p in preds],
                refs)
        r = subprocess.run(["/bin/sh", SCRIPT, "-u", url, "-m", "nosuch", FILES[0]],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "nosuch" in r.stdout, "unknown model: %r %r" % (r.stdout, r.stderr))
    finally:
        d.close()
    print("predict_b64.sh: %d files, values match pydicom" % len(FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
