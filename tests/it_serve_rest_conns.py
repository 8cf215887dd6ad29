"""it_serve_rest_conns: REST connection handling against hostile clients
(issue 33, F3/F4), each phase on its own daemon on 127.0.0.1.

1. 1,100 connections trickle a request line a byte at a time (more than
   libmicrohttpd's default limit of 1,020, which locked REST out): a valid
   REST call and a gRPC call each answer while they trickle, and
   every trickler is cut once --rest_read_timeout_seconds=2 has passed
   without its headers.
2. --max_connections=100 with 300 idle connections and 300 tricklers: a new
   valid REST call still gets through (the connection waiting longest is
   closed to make room).
3. 1,100 clients that each send one byte and close: their sockets do not stay
   in CLOSE-WAIT (the server closes them at once, not after the idle
   timeout), and REST answers; a client that sends a whole request and shuts
   its write side gets the answer and then the end of the connection. Slow
   senders are not cut here (--rest_read_timeout_seconds=0), so only seeing
   the peer's FIN closes them within WAIT (the idle timeout is 300 s):
   libmicrohttpd's edge-triggered epoll misses a FIN that came with the
   last bytes it read, the reaper finds those peers.
5. --max_connections=2 with two endless calls running (it_serve_rest_deadline's
   spinning model): a third connection is answered 503 naming the flag, and
   the two running calls' connections are not closed for it.
6. --rest_api_num_threads=1 with an endless call running: a keep-alive
   connection served by the same libmicrohttpd thread, and a new one, still
   get model status (calls run on workers, their connections
   suspended; before, the thread ran the call and served nobody else).
4. SIGTERM with 300 idle, 300 half-closed (a partial request, then FIN) and
   100 keep-alive connections open, after 300 one-byte-then-close clients:
   the process exits within a minute (drain timeout 1 s; a drain that
   waited for the connections would take the 300 s idle timeout).
Every "answers" is a call with a generous deadline (ANSWER_S): the failures
these phases catch are refused or never-answered calls, not slow ones, and a
loaded machine must not fail them.
"""
import http.client
import json
import os
import resource
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (HPT, WAIT, Daemon, check, free_port, gen_protos,  # noqa: E402
                          hpt_grpc_predict, hpt_rest_predict)
from it_serve_rest_deadline import config, write_spin  # noqa: E402

pb = gen_protos()
MANY = 1100
LINE = b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n"
# The deadline of a call that must be answered (see the docstring).
ANSWER_S = 60.0


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= need


def start(rest, *extra):
    """The daemon, once its REST port answers (it opens after the gRPC one)."""
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest]
               + list(extra))
    end = time.monotonic() + WAIT
    while True:
        try:
            if hpt_rest_predict(rest)[0] == 200:
                return d
        except OSError:
            pass
        check(time.monotonic() < end, "REST did not answer within %g s of the start" % WAIT, d)
        time.sleep(0.1)






def answers_within(d, rest, what, seconds=ANSWER_S):
    """A valid REST call and a gRPC call each answer within `seconds`."""
    t0 = time.monotonic()
    try:
        code, data = hpt_rest_predict(rest, seconds)
    except OSError as e:
        code, data = None, str(e).encode()
    took = time.monotonic() - t0
    check(code == 200 and json.loads(data)["predictions"] == [2.5],
          "%s: REST answers within %g s (got %s %r after %.1f s)" % (what, seconds, code,
                                                                   data[:200], took), d)
    try:
        got = hpt_grpc_predict(d, seconds)
    except Exception as e:  # noqa: BLE001 - reported below
        got = str(e)
    check(got == [2.5], "%s: gRPC answers within %g s: %r" % (what, seconds, got), d)


def connect_many(rest, n, hello=b""):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", rest), timeout=10)
        if hello:
            s.sendall(hello)
        socks.append(s)
    return socks


def one_byte_then_close(rest, n):
    """n clients, one after the other, that send one byte and close (the byte
    and the FIN reach the server together)."""
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", rest), timeout=10)
        s.send(b"G")
        s.close()


class Trickler:
    """Sends LINE one byte per connection per round, every `every` s; a
    connection the server closed is counted (cut) and left alone."""

    def __init__(self, socks, every=0.3):
        self.socks, self.every = socks, every
        self.pos = [1] * len(socks)
        self.cut = [False] * len(socks)
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            for i, s in enumerate(self.socks):
                if self.cut[i]:
                    continue
                try:
                    s.send(LINE[self.pos[i] % len(LINE):][:1])
                    self.pos[i] += 1
                except OSError:
                    self.cut[i] = True
            time.sleep(self.every)

    def closed_by_server(self):
        """How many sockets the server has closed (EOF or reset)."""
        n = 0
        for i, s in enumerate(self.socks):
            if self.cut[i]:
                n += 1
                continue
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    self.cut[i] = True
                    n += 1
            except BlockingIOError:
                pass
            except OSError:
                self.cut[i] = True
                n += 1
        return n

    def close(self):
        self.stop = True
        self.t.join()
        for s in self.socks:
            s.close()


def close_wait(port):
    """Sockets of 127.0.0.1:port in CLOSE-WAIT (the server side of a peer that
    closed), from /proc/net/tcp."""
    n = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if int(cols[1].rsplit(":", 1)[1], 16) == port and cols[3] == "08":
                        n += 1
        except OSError:
            pass
    return n


def tricklers():
    """1. Tricklers: REST and gRPC answer; the tricklers are cut."""
    rest = free_port()
    d = start(rest, "--rest_read_timeout_seconds=2")
    try:
        answers_within(d, rest, "before the tricklers")
        t0 = time.monotonic()
        tr = Trickler(connect_many(rest, MANY, LINE[:1]))
        try:
            answers_within(d, rest, "with %d connections trickling a request line" % MANY)
            cut = 0
            while time.monotonic() < t0 + 2 + WAIT:
                cut = tr.closed_by_server()
                if cut == MANY:
                    break
                time.sleep(0.5)
            check(cut == MANY, "tricklers cut by the server within %g s of their 2 s: %d of %d"
                  % (WAIT, cut, MANY), d)
        finally:
            tr.close()
        answers_within(d, rest, "after the tricklers")
    finally:
        d.close()


def limit_keeps_room():
    """2. The connection limit keeps room for a new client."""
    rest = free_port()
    d = start(rest, "--max_connections=100")
    try:
        idle = connect_many(rest, 300)
        tr = Trickler(connect_many(rest, 300, LINE[:1]))
        try:
            answers_within(d, rest, "--max_connections=100 with 300 idle and 300 trickling")
        finally:
            tr.close()
            for s in idle:
                s.close()
    finally:
        d.close()


def one_byte_clients():
    """3. One byte, then close: reaped at once."""
    rest = free_port()
    d = start(rest, "--rest_read_timeout_seconds=0")
    try:
        one_byte_then_close(rest, MANY)
        end = time.monotonic() + WAIT
        n = close_wait(rest)
        while n > 10 and time.monotonic() < end:
            time.sleep(0.2)
            n = close_wait(rest)
        check(n <= 10, "%d clients sent one byte and closed: %d sockets still in CLOSE-WAIT "
              "after %g s" % (MANY, n, WAIT), d)
        answers_within(d, rest, "after %d one-byte clients" % MANY)
        s = socket.create_connection(("127.0.0.1", rest), timeout=WAIT)
        s.sendall(b"GET /v1/models/hpt HTTP/1.1\r\nHost: x\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        got = b""
        try:
            while True:
                x = s.recv(4096)
                if not x:
                    break
                got += x
        except socket.timeout:
            check(False, "a request then SHUT_WR: the connection not closed within %g s "
                  "(%d bytes of answer)" % (WAIT, len(got)), d)
        finally:
            s.close()
        check(got.startswith(b"HTTP/1.1 200"), "a request then SHUT_WR: answer %r" % got[:80], d)
    finally:
        d.close()


def sigterm_with_connections():
    """4. SIGTERM with idle, half-closed and keep-alive connections."""
    rest = free_port()
    d = start(rest, "--drain_timeout_seconds=1")
    held = []
    try:
        held += connect_many(rest, 300)
        one_byte_then_close(rest, 300)
        for s in connect_many(rest, 300, LINE[:30]):
            s.shutdown(socket.SHUT_WR)
            held.append(s)
        body = json.dumps({"instances": [1.0]}).encode()
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", rest), timeout=10)
            s.sendall(b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                      b"\r\n%s" % (len(body), body))
            check(s.recv(4096).startswith(b"HTTP/1.1 200"), "keep-alive call answered", d)
            held.append(s)
        t0 = time.monotonic()
        d.proc.send_signal(15)
        try:
            d.proc.wait(timeout=WAIT)
            took = time.monotonic() - t0
        except Exception:  # noqa: BLE001 - reported below
            took = None
        check(took is not None and took < 60,
              "SIGTERM with 700 idle, half-closed and keep-alive REST connections (and 300 "
              "closed ones): exited after "
              "%s s (drain timeout 1 s)" % (None if took is None else round(took, 1)), d)
    finally:
        for s in held:
            s.close()
        d.close()


def refused_when_all_run():
    """5. Every connection runs a call: a new one gets 503."""
    top = tempfile.mkdtemp(prefix="it_rest_conns_")
    write_spin(os.path.join(top, "spin", "1"))
    rest = free_port()
    d = Daemon(["--model_config_file=" + config(os.path.join(top, "spin")),
                "--rest_api_port=%d" % rest, "--max_connections=2",
                "--rest_api_timeout_in_ms=600000", "--enable_model_warmup=false"])
    body = json.dumps({"inputs": [1.0]}).encode()
    spin = (b"POST /v1/models/spin:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))
    running = []
    try:
        end = time.monotonic() + WAIT
        code, data = None, b""
        while time.monotonic() < end:
            running = [s for s in running if s.fileno() >= 0]
            while len(running) < 2:  # (re)start the two endless calls
                try:
                    s = socket.create_connection(("127.0.0.1", rest), timeout=10)
                    s.sendall(spin)
                    running.append(s)
                except OSError:
                    time.sleep(0.2)
            try:
                code, data = hpt_rest_predict(rest, ANSWER_S)
            except OSError as e:
                code, data = None, str(e).encode()
            if code == 503:
                break
            for s in running:
                # An endless call never answers: a connection that was closed
                # for the probe before its call ran, or that was answered (the
                # model not loaded yet: 404), is not running; start another.
                s.setblocking(False)
                try:
                    s.recv(1)
                    s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
            time.sleep(0.2)
        check(code == 503 and b"--max_connections" in data and "error" in json.loads(data),
              "--max_connections=2, both running endless calls: a third connection gets 503 "
              "naming the flag (got %s %r)" % (code, data[:200]), d)
        for s in running:
            s.setblocking(False)
            try:
                gone = s.recv(1) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            check(not gone, "a connection whose call runs was closed for a new one", d)
    finally:
        for s in running:
            s.close()
        d.close()


def long_call_blocks_nobody():
    """6. An endless call holds up no other connection on its thread."""
    top = tempfile.mkdtemp(prefix="it_rest_conns_")
    write_spin(os.path.join(top, "spin", "1"))
    rest = free_port()
    d = Daemon(["--model_config_file=" + config(os.path.join(top, "spin")),
                "--rest_api_port=%d" % rest, "--rest_api_num_threads=1",
                "--rest_api_timeout_in_ms=600000", "--enable_model_warmup=false"])
    body = json.dumps({"inputs": [1.0]}).encode()
    spin = None
    keep = None
    try:
        end = time.monotonic() + WAIT
        while True:  # both models loaded
            try:
                c = http.client.HTTPConnection("127.0.0.1", rest, timeout=ANSWER_S)
                c.request("GET", "/v1/models/spin")
                r = c.getresponse()
                ready = r.status == 200 and b"AVAILABLE" in r.read()
                c.close()
                if ready and hpt_rest_predict(rest, ANSWER_S)[0] == 200:
                    break
            except OSError:
                pass
            check(time.monotonic() < end, "spin and hpt not available within %g s" % WAIT, d)
            time.sleep(0.2)
        keep = http.client.HTTPConnection("127.0.0.1", rest, timeout=ANSWER_S)
        keep.request("GET", "/v1/models/hpt")
        r = keep.getresponse()
        check(r.status == 200 and b"AVAILABLE" in r.read(), "keep-alive status answered", d)
        spin = socket.create_connection(("127.0.0.1", rest), timeout=10)
        spin.sendall(b"POST /v1/models/spin:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.5)
        spin.setblocking(False)
        try:
            early = spin.recv(1)
        except BlockingIOError:
            early = None
        check(early is None, "the endless call runs (got %r)" % early, d)
        for what, conn in (("the keep-alive connection", keep),
                           ("a new connection",
                            http.client.HTTPConnection("127.0.0.1", rest, timeout=ANSWER_S))):
            t0 = time.monotonic()
            try:
                conn.request("GET", "/v1/models/hpt")
                r = conn.getresponse()
                code, data = r.status, r.read()
            except OSError as e:
                code, data = None, str(e).encode()
            check(code == 200 and b"AVAILABLE" in data,
                  "--rest_api_num_threads=1, an endless call running: %s gets model status "
                  "within %g s (got %s %r after %.1f s)"
                  % (what, ANSWER_S, code, data[:200], time.monotonic() - t0), d)
    finally:
        if keep is not None:
            keep.close()
        if spin is not None:
            spin.close()
        d.close()


def main():
    if not raise_fd_limit(MANY + 400):
        print("it_serve_rest_conns: cannot open %d descriptors; skipped" % (MANY + 400))
        return 77
    tricklers()
    limit_keeps_room()
    one_byte_clients()
    refused_when_all_run()
    long_call_blocks_nobody()
    sigterm_with_connections()
    print("it_serve_rest_conns: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
