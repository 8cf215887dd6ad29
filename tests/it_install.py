"""it_install: deploy/install.sh into a temporary PREFIX, then the installed
binary, started from there, resolves its libraries, loads the installed demo
model and reports health SERVING."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client  # noqa: E402
from serve_client import Daemon, check  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(__file__), ".."))
BIN_DIR = os.environ.get("DCM_BIN", os.path.join(SRC, "build"))


def main():
    with tempfile.TemporaryDirectory() as prefix:
        r = subprocess.run(["/bin/sh", os.path.join(SRC, "deploy", "install.sh"), prefix, BIN_DIR],
                           cwd=SRC, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "install.sh failed: %s%s" % (r.stdout, r.stderr))
        exe = os.path.join(prefix, "bin", "dcmserve")
        model = os.path.join(prefix, "models", "demo_ct")
        check(os.access(exe, os.X_OK), "no executable %s" % exe)
        check(os.path.isfile(os.path.join(model, "1", "saved_model.pb")), "demo model not installed")
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(prefix, "lib"))
        ldd = subprocess.run(["ldd", exe], capture_output=True, text=True, env=env, timeout=30)
        check("not found" not in ldd.stdout, "unresolved libraries:\n" + ldd.stdout)
        serve_client.DCMSERVE = exe
        d = Daemon(["--model_name=demo_ct", "--model_base_path=" + model], env=env)
        try:
            d.wait_health(want=1)
            rc = d.stop()
            check(rc == 0, "installed daemon exited %s on SIGTERM" % rc, d)
        finally:
            d.close()
    print("installed daemon served the demo model: SERVING")
    return 0


if __name__ == "__main__":
    sys.exit(main())
