"""it_serve_rest_buffered: a global bound on buffered REST request bodies
(issue 33, F2; --max_rest_buffered_bytes).

With --max_rest_buffered_bytes=64 MiB, 8 clients each declare a 40 MiB body
and send 32 MiB of it at once (256 MiB in all, for a model that does not
exist, so nothing but the bodies costs memory). While they hold, a ninth
client that declares 40 MiB is answered 503 with a JSON {"error"} naming the
flag before it sends any of its body; once the 8 finish, those past the
bound got 503 (or were cut) and the others 404; RSS comes back within 32 MiB
of where it was, and a valid REST and gRPC call answer. Before, all 256 MiB
were buffered (10 such clients of 255 MiB were OOM-killed in a 2 GiB cgroup).
A body declared larger than the bound itself is answered 413 at once.

Then a trickle (--max_rest_buffered_bytes=16 MiB, --rest_read_timeout_seconds=2):
a client declares 12 MiB, sends 8 MiB at once and then one byte every 0.5 s
(never pausing as long as the read timeout). It is cut (it brings less than
64 KiB per read timeout) within 20 s, and a 12 MiB body sent after that is
answered 200. Before, the trickle held its part of the bound as long as it
went on (12 MiB: the whole declared body): not cut within 20 s.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (HPT, WAIT, Daemon, check, free_port, gen_protos,  # noqa: E402
                          hpt_grpc_predict, hpt_rest_predict)

pb = gen_protos()
MIB = 1 << 20
BOUND = 64 * MIB
DECLARED = 40 * MIB
FIRST = 32 * MIB
CLIENTS = 8
PATH = "/v1/models/nosuch:predict"
# Under ASan (DCM_ASAN=1, or a build-asan binary) freed blocks wait in a 256 MiB
# quarantine before reuse, so the memory bounds get that much more room there
# (the refusals are checked the same).
ASAN = bool(os.environ.get("DCM_ASAN")) or "asan" in os.environ.get("DCMSERVE", "") or \
    "asan" in os.environ.get("DCM_BIN", "")
SLACK = 256 * MIB if ASAN else 0


def mem(pid):
    """VmRSS and VmHWM of pid, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) * 1024
    return out["VmRSS"], out["VmHWM"]


def head_for(path, n):
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), n))


def head(n):
    return head_for(PATH, n)


def read_status(s, timeout):
    """The HTTP status and body of the answer on s; (None, why) when there is
    none (closed or reset before an answer)."""
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            b = s.recv(65536)
            if not b:
                break
            data += b
        if b"\r\n\r\n" not in data:
            return None, b"closed without an answer"
        hdr, _, body = data.partition(b"\r\n\r\n")
        n = 0
        for line in hdr.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(body) < n:
            b = s.recv(65536)
            if not b:
                break
            body += b
        return int(hdr.split()[1]), body
    except OSError as e:
        return None, str(e).encode()


class Upload(threading.Thread):
    """Declares DECLARED bytes, sends FIRST, waits for `go`, sends the rest and
    reads the answer."""

    def __init__(self, rest, sent, go):
        super().__init__(daemon=True)
        self.rest, self.sent, self.go = rest, sent, go
        self.result = None

    def run(self):
        payload = b'{"instances": [1.0], "pad": "' + b"x" * (DECLARED - 31) + b'"}'
        assert len(payload) == DECLARED
        s = socket.create_connection(("127.0.0.1", self.rest), timeout=30)
        try:
            try:
                s.sendall(head(DECLARED) + payload[:FIRST])
            except OSError:
                pass  # refused at once: the answer (or a reset) is read below
            self.sent.release()
            self.go.wait(60)
            try:
                s.sendall(payload[FIRST:])
            except OSError:
                pass
            self.result = read_status(s, 30)
        finally:
            s.close()






def trickle_holds_its_share():
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest,
                "--max_rest_buffered_bytes=%d" % (16 * MIB), "--rest_read_timeout_seconds=2"])
    t = None
    try:
        wait_rest(d, rest)
        t = socket.create_connection(("127.0.0.1", rest), timeout=10)
        t.sendall(head_for("/v1/models/hpt:predict", 12 * MIB) + b" " * (8 * MIB))
        t0 = time.monotonic()
        cut = False
        while not cut and time.monotonic() - t0 < 60:
            try:
                t.sendall(b" ")
                t.setblocking(False)
                try:
                    cut = t.recv(1 << 16) == b""
                except BlockingIOError:
                    pass
                t.setblocking(True)
            except OSError:  # reset: cut
                cut = True
            time.sleep(0.5)
        took = time.monotonic() - t0
        check(cut, "a body trickling a byte every 0.5 s after 8 MiB is cut within 60 s "
              "(--rest_read_timeout_seconds=2)", d)
        body = b'{"instances": [1.0]}'
        body += b" " * (12 * MIB - len(body))
        s = socket.create_connection(("127.0.0.1", rest), timeout=10)
        try:
            s.sendall(head_for("/v1/models/hpt:predict", len(body)) + body)
        except OSError:
            pass
        code, data = read_status(s, 30)
        s.close()
        check(code == 200, "a 12 MiB body after the trickle was cut: 200 (got %s %r)"
              % (code, data[:200]), d)
        print("it_serve_rest_buffered: the trickle was cut after %.1f s of trickling; a 12 MiB "
              "body then: %s" % (took, code))
    finally:
        if t is not None:
            t.close()
        d.close()


def wait_rest(d, rest):
    end = time.monotonic() + WAIT
    while True:
        try:
            if hpt_rest_predict(rest)[0] == 200:
                return
        except OSError:
            pass
        check(time.monotonic() < end, "REST did not answer within %g s" % WAIT, d)
        time.sleep(0.1)


def main():
    trickle_holds_its_share()
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest,
                "--max_rest_buffered_bytes=%d" % BOUND])
    try:
        wait_rest(d, rest)
        s = socket.create_connection(("127.0.0.1", rest), timeout=10)
        s.sendall(head(2 * BOUND))
        code, body = read_status(s, 5)
        s.close()
        check(code == 413 and b"max_rest_buffered_bytes" in body,
              "a body declared larger than the bound itself: 413 at once (got %s %r)"
              % (code, body[:200]), d)
        rss0, hwm0 = mem(d.proc.pid)
        sent, go = threading.Semaphore(0), threading.Event()
        ups = [Upload(rest, sent, go) for _ in range(CLIENTS)]
        for u in ups:
            u.start()
        for _ in ups:
            check(sent.acquire(timeout=60), "the uploads did not send their first part in 60 s", d)
        # the 8 hold their bodies half-sent: a new one is refused before its body
        s = socket.create_connection(("127.0.0.1", rest), timeout=10)
        s.sendall(head(DECLARED))
        code, body = read_status(s, 5)
        s.close()
        check(code == 503 and b"max_rest_buffered_bytes" in body and
              "error" in json.loads(body),
              "a 40 MiB body declared while %d MiB of bodies are held: 503 at once with "
              "{\"error\"} (got %s %r)" % (CLIENTS * FIRST // MIB, code, body[:200]), d)
        go.set()
        for u in ups:
            u.join(90)
        _, hwm = mem(d.proc.pid)
        results = [u.result for u in ups]
        codes = sorted(str(r[0]) if r else "none" for r in results)
        refused = sum(1 for r in results if r and (r[0] == 503 or r[0] is None))
        check(all(r and r[0] in (404, 503, None) for r in results) and refused >= CLIENTS - 2,
              "8 uploads of 40 MiB against a 64 MiB bound: at least 6 refused (503 or cut), the "
              "rest 404: got %s" % codes, d)
        for r in results:
            if r and r[0] == 503:
                check("error" in json.loads(r[1]), "a 503 body is {\"error\": ...}: %r"
                      % r[1][:200], d)
        check(hwm - hwm0 < 160 * MIB + SLACK,
              "peak RSS grew by %d MiB while 8 x 40 MiB were sent (bound 64 MiB; %d MiB allowed)"
              % ((hwm - hwm0) // MIB, (160 * MIB + SLACK) // MIB), d)
        check(d.proc.poll() is None, "the daemon is alive", d)
        rss = rss0
        for _ in range(50):
            rss, _ = mem(d.proc.pid)
            if rss < rss0 + 32 * MIB + SLACK:
                break
            time.sleep(0.1)
        check(rss < rss0 + 32 * MIB + SLACK, "RSS back within 32 MiB: %d MiB before, %d MiB after"
              % (rss0 // MIB, rss // MIB), d)
        code, data = hpt_rest_predict(rest)
        check(code == 200, "REST answers after: %s %r" % (code, data[:200]), d)
        check(hpt_grpc_predict(d) == [2.5], "gRPC answers after", d)
        print("it_serve_rest_buffered: 8 uploads -> %s; peak RSS +%d MiB; RSS %d -> %d MiB"
              % (codes, (hwm - hwm0) // MIB, rss0 // MIB, rss // MIB))
    finally:
        d.close()
    print("it_serve_rest_buffered: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
