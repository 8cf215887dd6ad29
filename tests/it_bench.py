"""it_bench: dcmserve-bench against the real daemon and its own echo server.

Predict and ModelInfer on half_plus_two at a fixed concurrency must all be OK
and counted; a wrongly shaped input must be counted as INVALID_ARGUMENT (and
make the tool exit 1); the open-loop mode must send the asked rate; the echo
server must answer the same bytes; a DICOM folder becomes one request per
file, each carrying the whole file; --target takes localhost:PORT (DNS, as
gRPC resolves it) as well as 127.0.0.1:PORT; and a client that cannot talk to
the server (--tls against the plaintext port) stops after
--max_consecutive_errors failed calls instead of running its whole duration.
All traffic goes to 127.0.0.1 and each run lasts about a second."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, SRC, Daemon, check  # noqa: E402

BIN = os.environ.get("DCM_BIN", os.path.join(SRC, "build"))
BENCH = os.path.join(BIN, "dcmserve-bench")
DICOM = os.path.join(SRC, "tests", "data", "onnx", "ct64.dcm")


def bench(port, *args, want_rc=0, host="127.0.0.1", duration="1"):
    cmd = [BENCH, "--target=%s:%d" % (host, port), "--model=hpt", "--duration=" + duration,
           "--warmup=0.2", "--json"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == want_rc, "%s: rc %d, wanted %d\n%s%s" % (" ".join(args), p.returncode, want_rc,
                                                                   p.stdout, p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


def main():
    check(os.path.exists(BENCH), "no %s (build the dcmserve-bench target)" % BENCH)
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT])
    try:
        d.wait_health(1)
        r, _ = bench(d.port, "--values=1,2,5", "--shape=3,1", "--concurrency=4")
        check(r["calls"] > 0 and r["ok"] == r["calls"] and r["errors"] == {}, "predict: %r" % r)
        check(r["p50_us"] <= r["p90_us"] <= r["p99_us"] <= r["p999_us"] <= r["max_us"], "order: %r" % r)
        r, _ = bench(d.port, "--api=infer", "--values=1,2,5", "--shape=3,1", "--concurrency=2")
        check(r["calls"] > 0 and r["ok"] == r["calls"], "infer: %r" % r)
        # Every call refused: counted by status over the whole run when the
        # wall of errors is off; with it (the default) the run stops early,
        # in the warm-up or after it, depending on how fast the host is.
        r, err = bench(d.port, "--values=1,2,5", "--max_consecutive_errors=0", want_rc=1)
        check(r["ok"] == 0 and r["errors"].get("INVALID_ARGUMENT") == r["calls"] > 0, "bad shape: %r" % r)
        check(not r["stopped_on_errors"], "bad shape, no wall: %r" % r)
        # Long enough for 50 calls on a loaded host: the wall ends it early.
        r, _ = bench(d.port, "--values=1,2,5", "--max_consecutive_errors=50", want_rc=1,
                     duration="30")
        check(r["ok"] == 0 and r["stopped_on_errors"], "bad shape, wall of 50: %r" % r)
        check("expected rank 2" in err, "bad shape: the server's message is not shown: %s" % err)
        r, _ = bench(d.port, "--values=1,2,5", "--shape=3,1", host="localhost")
        check(r["calls"] > 0 and r["ok"] == r["calls"], "--target=localhost:PORT: %r" % r)
        # 30 s asked, but every call fails its TLS handshake: it stops after 50.
        r, err = bench(d.port, "--values=1,2,5", "--shape=3,1", "--tls", "--max_consecutive_errors=50",
                       want_rc=1, duration="30")
        check(r["stopped_on_errors"] is True and r["ok"] == 0 and r["calls"] <= 50,
              "--tls against plaintext: %r" % r)
        check("50 calls in a row failed (last: UNAVAILABLE)" in err and "--tls" in err,
              "--tls against plaintext: %s" % err)
        r, _ = bench(d.port, "--values=1,2,5", "--shape=3,1", "--rate=200")
        # Open loop: the calls sent plus those the client could not send in time
        # (a loaded host) make the schedule, 200 in 1 s.
        check(180 <= r["calls"] + r["unsent"] <= 201 and r["calls"] > 0 and r["mode"] == "rate",
              "rate 200/s for 1 s: %r" % r)
    finally:
        d.close()

    echo = subprocess.Popen([BENCH, "--echo_port=0"], stdout=subprocess.PIPE, text=True)
    tmp = tempfile.mkdtemp(prefix="it_bench_")
    try:
        line = echo.stdout.readline()
        check("listening on" in line, "echo: %r" % line)
        port = int(line.rsplit(":", 1)[1])
        r, _ = bench(port, "--values=1,2,5", "--shape=3,1", "--concurrency=8")
        check(r["calls"] > 0 and r["ok"] == r["calls"], "echo: %r" % r)
        if os.path.exists(DICOM):
            for i in range(3):
                shutil.copy(DICOM, os.path.join(tmp, "f%d.dcm" % i))
            r, _ = bench(port, "--dicom_dir=" + tmp, "--input=dicom")
            size = os.path.getsize(DICOM)
            check(r["ok"] == r["calls"] > 0 and size < r["request_bytes"] < size + 100,
                  "dicom dir: %r (file %d bytes)" % (r, size))
        os.mkdir(os.path.join(tmp, "empty"))
        p = subprocess.run([BENCH, "--target=127.0.0.1:%d" % port, "--dicom_dir=" + os.path.join(tmp, "empty")],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and "holds no files" in p.stderr, "empty dir: %d %s" % (p.returncode, p.stderr))
    finally:
        echo.terminate()
        echo.wait(timeout=30)
        shutil.rmtree(tmp)
    print("it_bench: ok")


if __name__ == "__main__":
    main()
