"""it_entrypoint: the container entrypoint and `dcmserve health`, as the images
run them. deploy/install.sh installs into a temporary PREFIX (as the Dockerfile
does into /opt/dcmserve); PREFIX/bin/dcmserve-entrypoint is started with
MODEL_NAME / MODEL_BASE_PATH / GRPC_PORT / REST_API_PORT in its environment
and extra arguments (passed through to `dcmserve serve`); `dcmserve health`
(the image's HEALTHCHECK) must exit 0 and print SERVING once the model is
loaded, and 1 for NOT_SERVING, an unknown service or a closed port."""
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import START_TIMEOUT, check, free_port  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(__file__), ".."))
BIN_DIR = os.environ.get("DCM_BIN", os.path.join(SRC, "build"))
# How long a start may take on a loaded machine (a limit, not an expectation).
TIMEOUT = START_TIMEOUT


class Entrypoint:
    """PREFIX/bin/dcmserve-entrypoint with env and args; stderr to a log."""

    def __init__(self, prefix, env, args):
        self.log = tempfile.NamedTemporaryFile(prefix="dcm_entry_", suffix=".log", delete=False)
        full_env = dict(os.environ, GRPC_PORT="0", REST_API_PORT="0")
        for k in ("MODEL_NAME", "MODEL_BASE_PATH"):
            full_env.pop(k, None)
        full_env.update(env)
        self.proc = subprocess.Popen([os.path.join(prefix, "bin", "dcmserve-entrypoint")] + args,
                                     stdout=subprocess.PIPE, stderr=self.log, env=full_env)
        line = b""
        end = time.monotonic() + TIMEOUT
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n") and time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                b = os.read(fd, 1)
                if not b:
                    break
                line += b
        text = line.decode(errors="replace")
        check("listening on" in text, "entrypoint printed %r, log:\n%s" % (text, self.log_text()))
        self.port = int(text.rsplit(":", 1)[1])

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.proc.stdout.close()
            os.unlink(self.log.name)


def health(exe, *args):
    r = subprocess.run([exe, "health"] + list(args), capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout.strip(), r.stderr.strip()


def wait_serving(exe, port, service=""):
    end = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < end:
        last = health(exe, "--port=%d" % port, "--service=" + service)
        if last[0] == 0:
            return last
        time.sleep(0.2)
    raise AssertionError("health never SERVING on port %d: %r" % (port, last))


def main():
    with tempfile.TemporaryDirectory() as prefix:
        r = subprocess.run(["/bin/sh", os.path.join(SRC, "deploy", "install.sh"), prefix, BIN_DIR],
                           cwd=SRC, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "install.sh failed: %s%s" % (r.stdout, r.stderr))
        exe = os.path.join(prefix, "bin", "dcmserve")
        models = os.path.join(prefix, "models")

        # Flag errors are exit 2; nothing listening is exit 1.
        rc, _, err = health(exe, "--port=notaport")
        check(rc == 2 and "--port" in err, "bad --port: rc %d %r" % (rc, err))
        rc, _, err = health(exe, "--port=%d" % free_port(), "--timeout_ms=2000")
        check(rc == 1 and err, "closed port: rc %d %r" % (rc, err))

        # MODEL_NAME + MODEL_BASE_PATH -> --model_name, --model_base_path=BASE/NAME;
        # an extra argument is passed through.
        e = Entrypoint(prefix, {"MODEL_NAME": "demo_ct", "MODEL_BASE_PATH": models},
                       ["--bind_address=127.0.0.1"])
        try:
            rc, out, err = wait_serving(exe, e.port)
            check(out == "SERVING", "health printed %r" % out)
            rc, out, _ = health(exe, "--port=%d" % e.port, "--service=demo_ct")
            check(rc == 0 and out == "SERVING", "service demo_ct: rc %d %r" % (rc, out))
            rc, out, err = health(exe, "--host=127.0.0.1", "--port=%d" % e.port, "--service=nosuch")
            check(rc == 1 and "NOT_FOUND (gRPC status 5): unknown service" in err,
                  "unknown service: rc %d %r %r" % (rc, out, err))
            check("/models/demo_ct" in e.log_text() or "demo_ct" in e.log_text(),
                  "the log does not name the model:\n" + e.log_text())
        finally:
            code = e.stop()
        check(code == 0, "entrypoint's daemon exited %s on SIGTERM" % code)

        # A model name whose folder does not exist: the daemon runs, NOT_SERVING.
        e = Entrypoint(prefix, {"MODEL_NAME": "absent", "MODEL_BASE_PATH": models},
                       ["--bind_address=127.0.0.1"])
        try:
            rc, out, _ = health(exe, "--port=%d" % e.port)
            check(rc == 1 and out == "NOT_SERVING", "absent model: rc %d %r" % (rc, out))
        finally:
            e.stop()

        # --model_config_file in the arguments: MODEL_NAME/MODEL_BASE_PATH are
        # not added (dcmserve refuses both together), the config is served.
        cfg = os.path.join(prefix, "models.config")
        with open(cfg, "w") as f:
            f.write('model_config_list { config { name: "ct" base_path: "%s/demo_ct" '
                    'model_platform: "tensorflow" } }\n' % models)
        e = Entrypoint(prefix, {"MODEL_NAME": "ignored", "MODEL_BASE_PATH": "/nonexistent"},
                       ["--bind_address=127.0.0.1", "--model_config_file=" + cfg])
        try:
            wait_serving(exe, e.port, service="ct")
        finally:
            code = e.stop()
        check(code == 0, "config-file daemon exited %s" % code)
    print("entrypoint: env -> flags, arguments passed through; health SERVING / NOT_SERVING")
    return 0


if __name__ == "__main__":
    sys.exit(main())
