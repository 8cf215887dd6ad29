"""rest_probe_split: where a valid REST call's time goes while one REST
connection attack runs (issue 33, acceptance 2). Not a ctest: a measuring
tool. For each of ROUNDS rounds it starts the attack against one daemon and
probes with a new connection every 0.1 s, each probe split into
  connect  (SYN to connect() returning: over 1 s means the SYN was dropped,
            the listen queue was full),
  answer   (request sent to the whole answer in: waiting to be accepted by
            libmicrohttpd, then read, run and answered),
and prints per attack the median and max of both, the probes over 1 s, the
kernel's listen-queue overflow counter (TcpExtListenOverflows) over the
attack, and the load average.
  usage: DCMSERVE=build/dcmserve python3 tests/rest_probe_split.py [ROUNDS] [ATTACK...]
attacks: bomb (64 MiB of `0,` to hpt: 413 after the body), conns (6,000 new idle
connections), trickle (8 bodies of 16 MiB sent in 64 KiB pieces then a
byte every 2 s), idle (none: the probe alone for 5 s, the load's share), uploads (F2: 10
connections each sending 255 MiB at once).
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
conns = None  # it_serve_rest_conns, imported in main (not in the probe: protoc)

MIB = 1 << 20
BOMB_MODEL = b"hpt"  # known: the body is read and charged (an unknown model may be cut early)
REQ = (b'POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
       b'Content-Length: 18\r\nConnection: close\r\n\r\n{"instances": [1]}')


def nstat(name):
    with open("/proc/net/netstat") as f:
        rows = [line.split() for line in f]
    for keys, vals in zip(rows[::2], rows[1::2]):
        if name in keys:
            return int(vals[keys.index(name)])
    return 0


def probe_once(rest):
    t0 = time.monotonic()
    return (t0,) + probe_at(rest, t0)


def probe_at(rest, t0):
    s = socket.socket()
    s.settimeout(10)
    try:
        s.connect(("127.0.0.1", rest))
        t1 = time.monotonic()
        s.sendall(REQ)
        data = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
        t2 = time.monotonic()
        return t1 - t0, t2 - t1, data.startswith(b"HTTP/1.1 200")
    except OSError:
        return time.monotonic() - t0, 0.0, False
    finally:
        s.close()


class Probe:
    """The probe in a process of its own: in the attacker's process it would
    wait for Python's interpreter lock behind the attacking threads."""

    def __init__(self, rest, grpc_port=0):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "probe", str(rest),
                                   str(grpc_port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.res = []

    def start(self):
        self.p.stdout.readline()  # ready
        time.sleep(0.3)

    def join(self):
        out, _ = self.p.communicate(b"stop\n")
        self.res = json.loads(out)


def probe_main(rest, grpc_port):
    """Each round: the REST probe, then (with grpc_port) a gRPC Predict of
    half_plus_two on one channel: (start, connect, answer, ok, gRPC s, gRPC ok)."""
    res, stop = [], []
    grpc_to = None
    if grpc_port:
        from serve_client import Stubs, channel, hpt_grpc_predict

        class Target:  # what hpt_grpc_predict takes from a Daemon
            stub = Stubs(channel(grpc_port))
        grpc_to = Target()
    print("ready", flush=True)
    threading.Thread(target=lambda: stop.append(sys.stdin.readline()), daemon=True).start()
    while not stop:
        r = probe_once(rest)
        if grpc_to is not None:
            t0 = time.monotonic()
            try:
                ok = hpt_grpc_predict(grpc_to, 5) == [2.5]
            except Exception:  # noqa: BLE001 - counted as failed
                ok = False
            r += (time.monotonic() - t0, ok)
        res.append(r)
        time.sleep(0.1)
    print(json.dumps(res))


def bomb(rest):
    s = socket.create_connection(("127.0.0.1", rest), timeout=120)
    body = b"[" + b"0," * (32 * MIB - 1) + b"0]"
    try:
        s.sendall(b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % (BOMB_MODEL, len(body)) + body)
        s.recv(100)
    except OSError:
        pass
    s.close()


def many(rest):
    socks = conns.connect_many(rest, 6000)
    time.sleep(1)
    for s in socks:
        s.close()


def trickle(rest):
    socks = []
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", rest), timeout=30)
        s.sendall(b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % (64 * MIB))
        socks.append(s)
    piece = b"0," * (32 << 10)
    for _ in range(256):
        for s in socks:
            try:
                s.sendall(piece)
            except OSError:
                pass
    for _ in range(3):
        time.sleep(2)
        for s in socks:
            try:
                s.send(b"0")
            except OSError:
                pass
    for s in socks:
        s.close()


def uploads(rest, res=None):
    """F2: 10 connections each declaring and sending 255 MiB at once. With
    res, each one's answer (its first 12 bytes, or the error's name) and when
    it came (time.monotonic()) are appended to it."""
    def one():
        s = socket.create_connection(("127.0.0.1", rest), timeout=120)
        try:
            s.sendall(b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                      b"\r\n\r\n" % (255 * MIB))
            chunk = b"0," * (MIB // 2)
            for _ in range(255):
                s.sendall(chunk)
            got = s.recv(100)[:12].decode(errors="replace")
        except OSError as e:
            got = type(e).__name__
        if res is not None:
            res.append((got, time.monotonic()))
        s.close()
    ts = [threading.Thread(target=one) for _ in range(10)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def idle(rest):
    time.sleep(5)


ATTACKS = {"bomb": bomb, "conns": many, "trickle": trickle, "idle": idle, "uploads": uploads}


def measure(rest, attack, rounds, verbose=False, grpc_port=0):
    """Runs attack(rest) `rounds` times with the probe going; returns the
    probes, each (start after its round's attack began, connect s, answer s,
    answered 200), the listen-queue overflows and the median load."""
    res, ovf, loads = [], 0, []
    for _ in range(rounds):
        p = Probe(rest, grpc_port)
        o0 = nstat("ListenOverflows")
        p.start()
        ta = time.monotonic()
        attack(rest)
        tb = time.monotonic()
        p.join()
        ovf += nstat("ListenOverflows") - o0
        loads.append(os.getloadavg()[0])
        if verbose:
            print("  attack %.2f s; slow probes (start after the attack's, connect, answer): %s"
                  % (tb - ta, ["%.2f %.2f %.2f" % (r[0] - ta, r[1], r[2]) for r in p.res
                               if r[1] + r[2] > 0.5]))
        res += [(r[0] - ta,) + tuple(r[1:]) for r in p.res]
        time.sleep(1)
    return res, ovf, statistics.median(loads)


def summary(name, rounds, res, ovf, load):
    allc = [r[1] for r in res]
    alla = [r[2] for r in res]
    out = ("%-8s %d rounds, %d probes: REST connect median %.3f max %.2f s; answer median %.3f "
           "max %.2f s; %d over 1 s, %d failed; listen overflows %d; load %.1f"
           % (name, rounds, len(res), statistics.median(allc), max(allc),
              statistics.median(alla), max(alla), sum(r[1] + r[2] > 1.0 for r in res),
              sum(not r[3] for r in res), ovf, load))
    g = [r[4] for r in res if len(r) > 4]
    if g:
        out += "; gRPC median %.3f max %.2f s, %d over 1 s, %d failed" % (
            statistics.median(g), max(g), sum(x > 1.0 for x in g),
            sum(not r[5] for r in res if len(r) > 4))
    return out


def use_conns():
    global conns
    import it_serve_rest_conns
    conns = it_serve_rest_conns
    return conns


def main():
    if sys.argv[1:2] == ["probe"]:
        return probe_main(int(sys.argv[2]), int(sys.argv[3]))
    from serve_client import free_port
    use_conns().raise_fd_limit(16000)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or ["bomb", "conns"]
    verbose = "-v" in names
    names = [n for n in names if n != "-v"]
    rest = free_port()
    d = conns.start(rest)
    try:
        for name in names:
            print(summary(name, rounds, *measure(rest, ATTACKS[name], rounds, verbose, d.port)),
                  flush=True)
    finally:
        d.close()


if __name__ == "__main__":
    sys.exit(main())
