"""it_serve_churn: connection churn does not grow the daemon's memory.

30,000 short connections (HTTP/2 preface + SETTINGS, read the server's
SETTINGS, close) against the plaintext gRPC port: without the accept loop's
malloc_trim (server/transport/srv_listen.c) glibc's arenas kept the freed memory and
RSS grew (measured with this test: +8.4 MB with the earlier
grpc_server_add_channel_from_fd adoption, +1.8 MB with gRPC's external
handler but no trim, +0.3 MB with both) (docs/reliability.md: 30,000 connections
left 7.9 MB in the arenas, 0.96 MB of it in use). The daemon's RSS
(/proc/PID/status VmRSS) is read after 5,000 warm-up connections and again
after 25,000 more, each time once the listener's trim period (10 s) has
passed (after the churn up to three times, one period apart, the lowest
reading counting); the growth must stay below 1.25 MB (runs with the trim: +0.3 to +0.8 MB), or,
when it does not once (a one-off step of the allocator beside a loaded
parallel suite), the growth over 25,000 more connections must, and a
Predict is answered after.
Under ASan (its own allocator; malloc_trim does nothing for it) the bound is
not checked, only the answer and the exit. Expected Predict values come from
half_plus_two's definition y = 0.5 x + 2.
"""
import os
import socket
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, Daemon, check, float_tensor, gen_protos,  # noqa: E402
                          tensor_values)

pb = gen_protos()
ASAN = bool(os.environ.get("DCM_ASAN")) or "asan" in DCMSERVE
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\x04\0\0\0\0\0"
TRIM_WAIT_S = 11.0
BOUND_MB = 1.25


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmRSS")


def churn(port, n):
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s.sendall(PREFACE)
            s.recv(64)
        except OSError:
            pass
        s.close()


def settled_rss(d, base):
    """RSS once the churn is over: gRPC may still be closing the last
    connections when the first trim after it runs (seen under a parallel
    suite), so the lowest of up to three readings, one trim period apart,
    counts (fewer once one is under the bound above base)."""
    low = None
    for _ in range(3):
        time.sleep(TRIM_WAIT_S)
        r = rss_mb(d.proc.pid)
        low = r if low is None else min(low, r)
        if low - base < BOUND_MB:
            break
    return low


def main():
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT])
    try:
        d.wait_health(1)
        churn(d.port, 5000)
        time.sleep(TRIM_WAIT_S)
        r0 = rss_mb(d.proc.pid)
        churn(d.port, 25000)
        r1 = settled_rss(d, r0)
        print("it_serve_churn: RSS %.1f MB after 5,000 connections, %.1f MB after 30,000" % (r0, r1))
        if not ASAN and r1 - r0 >= BOUND_MB:
            # Over the bound once (seen beside the full parallel suite: +1.5 MB
            # in one run): a leak grows again with the next 25,000
            # connections, a one-off step of the allocator does not. The
            # second round must stay below the bound on its own.
            base = r1
            churn(d.port, 25000)
            r2 = settled_rss(d, base)
            print("it_serve_churn: over the bound once; %.1f MB after 25,000 more" % r2)
            check(r2 - base < BOUND_MB,
                  "RSS grew %.1f MB over 25,000 connections and %.1f MB over 25,000 more "
                  "(%.1f -> %.1f -> %.1f MB; bound %.1f MB)"
                  % (base - r0, r2 - base, r0, base, r2, BOUND_MB), d)
        r = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
        r.inputs["x"].CopyFrom(float_tensor([1.0, 2.0], [2, 1]))
        got = tensor_values(d.stub.Predict(r, timeout=10).outputs["y"])
        check(np.allclose(got, [2.5, 3.0]), "Predict after the churn gave %s" % got, d)
        check(d.stop() == 0, "exit code after the churn", d)
    finally:
        d.close()
    print("it_serve_churn: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
