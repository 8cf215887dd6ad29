#!/usr/bin/python3
"""it_image: the cpu container image, run as a hardened orchestrator runs it.

`make test-image` runs it (DCM_IMAGE_TEST=1) after `make image`; under plain
ctest / `make test` it skips (exit 77) with one line, and so it does without
podman. The image is $DCM_IMAGE (default dcmserve:cpu); when podman does not
have it, scripts/build_image.sh builds it first.

1. The image's configuration: the HEALTHCHECK asks grpc.health service
   "liveness" (kept because the image is built in Docker's format), a
   non-root USER, the entrypoint; no .deb file and no apt package list left
   in the image.
2. It runs with --read-only --user 65532 --cap-drop=ALL
   --security-opt=no-new-privileges on the host's network (the daemon bound
   to 127.0.0.1 on free ports): gRPC health "liveness" and "readiness" turn
   SERVING, the image's own HEALTHCHECK passes (`podman healthcheck run`),
   the process has uid 65532, no capabilities and cannot write its root.
3. A DICOM Predict on the demo model (pydicom's CT_small.dcm) answers what
   pydicom + numpy compute (it_demo_model's reference).
4. `podman stop` sends SIGTERM: the daemon drains ("draining", "shutdown
   complete" in its log) and exits 0 well before podman's SIGKILL.
"""
import json
import os
import subprocess
import sys
import time

SKIP_RC = 77
if os.environ.get("DCM_IMAGE_TEST") != "1":
    print("SKIP: it_image runs with `make test-image` (it builds and runs a container image)")
    sys.exit(SKIP_RC)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("DCMSERVE", os.path.join(SRC, "build", "dcmserve"))
import grpc  # noqa: E402
from serve_client import (Stubs, channel, check, dicom_request, free_port, gen_protos,  # noqa: E402
                          tensor_values)
from it_demo_model import FILES, compare, reference  # noqa: E402

IMAGE = os.environ.get("DCM_IMAGE", "dcmserve:cpu")
START_TIMEOUT = 120.0
# podman stop's grace period before SIGKILL; the daemon's drain default is
# far below it, so an exit by SIGKILL (137) means no clean drain.
STOP_GRACE = 60
NAME = "dcm_it_image_%d" % os.getpid()


def podman_cmd():
    """podman with the options scripts/build_image.sh uses on this machine."""
    out = subprocess.run(["sh", os.path.join(SRC, "scripts", "build_image.sh"), "--podman-opts"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    return ["podman"] + out


def ulimit_opts():
    return subprocess.run(["sh", os.path.join(SRC, "scripts", "build_image.sh"), "--ulimit-opts"],
                          stdout=subprocess.PIPE, text=True, check=True).stdout.split()


def run(cmd, timeout=60, ok=(0,)):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    check(p.returncode in ok, "%s: rc=%d\n%s" % (" ".join(cmd), p.returncode, p.stdout))
    return p


def check_config(podman):
    info = json.loads(run(podman + ["image", "inspect", IMAGE]).stdout)[0]
    cfg = info.get("Config") or {}
    # podman shows the HEALTHCHECK at the top level, Docker under Config.
    hc = " ".join((info.get("Healthcheck") or cfg.get("Healthcheck") or {}).get("Test") or [])
    check("dcmserve health" in hc and "--service=liveness" in hc,
          "HEALTHCHECK %r: expected `dcmserve health ... --service=liveness`" % hc)
    user = cfg.get("User", "")
    check(user and not user.startswith(("0", "root")), "USER %r" % user)
    check(cfg.get("Entrypoint") == ["/opt/dcmserve/bin/dcmserve-entrypoint"],
          "ENTRYPOINT %r" % cfg.get("Entrypoint"))
    left = run(podman + ["run", "--rm", "--network=none", "--no-healthcheck", "--user=0"] +
               ulimit_opts() + ["--entrypoint", "sh", IMAGE, "-c",
                "find / -xdev \\( -name '*.deb' -o -path '/var/lib/apt/lists/*' \\) "
                "! -name lock ! -path '/var/lib/apt/lists/partial' -print"]).stdout.split()
    check(not left, "files apt-get clean should have removed: %s" % left[:10])
    return int(info.get("Size", 0))


def logs(podman):
    return subprocess.run(podman + ["logs", NAME], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30).stdout


def wait_serving(stubs, pb, podman):
    end = time.monotonic() + START_TIMEOUT
    state = {}
    for service in ("liveness", "readiness"):
        while True:
            try:
                r = stubs.Check(pb.health.HealthCheckRequest(service=service), timeout=5)
                state[service] = r.status
                if r.status == pb.health.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError as e:
                state[service] = e.code()
            check(time.monotonic() < end, "health %s not SERVING in %gs: %s\n%s" %
                  (service, START_TIMEOUT, state, logs(podman)))
            time.sleep(0.5)


def main():
    try:
        subprocess.run(["podman", "--version"], stdout=subprocess.DEVNULL, check=True)
    except (OSError, subprocess.CalledProcessError):
        print("SKIP: no podman (sh scripts/install_deps.sh image)")
        sys.exit(SKIP_RC)
    podman = podman_cmd()
    if subprocess.run(podman + ["image", "exists", IMAGE]).returncode != 0:
        subprocess.run(["sh", os.path.join(SRC, "scripts", "build_image.sh"), IMAGE], check=True)
    size = check_config(podman)
    refs = [reference(FILES[0])]

    grpc_port, rest_port = free_port(), free_port()
    run(podman + ["run", "-d", "--name", NAME, "--read-only", "--user", "65532",
                  "--cap-drop=ALL", "--security-opt=no-new-privileges", "--network=host",
                  "-e", "GRPC_PORT=%d" % grpc_port, "-e", "REST_API_PORT=%d" % rest_port] +
        ulimit_opts() + [IMAGE, "--bind_address=127.0.0.1"])
    try:
        pb = gen_protos()
        ch = channel(grpc_port)
        stubs = Stubs(ch)
        wait_serving(stubs, pb, podman)
        hc = run(podman + ["healthcheck", "run", NAME], ok=(0, 1))
        check(hc.returncode == 0, "the image's HEALTHCHECK failed: %s\n%s" % (hc.stdout, logs(podman)))
        ident = run(podman + ["exec", NAME, "sh", "-c",
                              "id -u; grep CapEff /proc/1/status; touch /opt/x 2>&1; echo rc=$?"]).stdout
        check(ident.split()[0] == "65532", "uid in the container: %r" % ident)
        check("CapEff:\t0000000000000000" in ident, "capabilities left: %r" % ident)
        check("Read-only file system" in ident and "rc=0" not in ident,
              "the root file system is writable: %r" % ident)

        with open(FILES[0], "rb") as f:
            resp = stubs.Predict(dicom_request([f.read()]), timeout=30)
        compare("image Predict", tensor_values(resp.outputs["mean_hu"]),
                tensor_values(resp.outputs["tissue_fraction"]), refs)

        t0 = time.monotonic()
        run(podman + ["stop", "--time", str(STOP_GRACE), NAME], timeout=STOP_GRACE + 30)
        took = time.monotonic() - t0
        state = json.loads(run(podman + ["inspect", NAME]).stdout)[0]["State"]
        log = logs(podman)
        check(state.get("ExitCode") == 0, "exit code %s after SIGTERM (%.1fs)\n%s" %
              (state.get("ExitCode"), took, log))
        check("draining" in log and "shutdown complete" in log, "no drain in the log:\n" + log)
        ch.close()
    finally:
        subprocess.run(podman + ["rm", "-f", NAME], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    print("it_image: %s (%.1f MB): read-only, uid 65532, no capabilities; healthy; DICOM Predict "
          "as pydicom; SIGTERM drained, exit 0 in %.1f s" % (IMAGE, size / 1e6, took))
    print("it_image: OK")


if __name__ == "__main__":
    main()
