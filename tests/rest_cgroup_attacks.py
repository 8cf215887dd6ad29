"""rest_cgroup_attacks: the REST attacks of issue 33 (F1-F4) against one daemon
in a 2 GiB memory cgroup, with a probe calling REST :predict and gRPC Predict
every 0.1 s throughout, from a process of its own. Needs root and a writable
memory cgroup (v1 under /sys/fs/cgroup/memory, or v2 with the memory
controller); not a ctest. Prints
one line per attack: what answered, the probe's slowest REST and gRPC call,
and the cgroup's peak memory. Figures: docs/reliability.md, "REST under a
2 GiB memory limit".
"""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import it_serve_rest_conns as conns  # noqa: E402
import rest_probe_split as split  # noqa: E402
from serve_client import HPT, Daemon, free_port  # noqa: E402

MIB = 1 << 20
CG = "/sys/fs/cgroup/memory/dcmserve_rest_attacks"


def cg_read(name):
    with open(os.path.join(CG, name)) as f:
        return int(f.read().split()[0])


def attack(d, rest, name, fn):
    # the probe in a process of its own (rest_probe_split.Probe): in this one
    # it waited for Python's interpreter lock behind the attacking threads
    p = split.Probe(rest, d.port)
    p.start()
    t0 = time.monotonic()
    try:
        what = fn()
    except OSError as e:
        what = "%s: %s" % (type(e).__name__, e)
    took = time.monotonic() - t0
    time.sleep(0.5)
    p.join()
    rest_t = [r[1] + r[2] for r in p.res]
    rest_bad = sum(1 for r in p.res if not r[3] or r[1] + r[2] > 1.0)
    grpc_t = [r[4] for r in p.res]
    grpc_bad = sum(1 for r in p.res if not r[5] or r[4] > 1.0)
    print("%-34s %-48s %5.1f s  probe %d x: REST max %.2f s (%d > 1 s or failed), gRPC max "
          "%.2f s (%d), peak %d MiB, alive %s" % (name, what, took, len(p.res), max(rest_t),
                                                  rest_bad, max(grpc_t), grpc_bad,
                                                  cg_read("memory.max_usage_in_bytes") // MIB,
                                                  d.proc.poll() is None), flush=True)


def uploads(rest, n, size):
    res = []

    def one():
        s = socket.create_connection(("127.0.0.1", rest), timeout=120)
        try:
            s.sendall(b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d"
                      b"\r\n\r\n" % size)
            chunk = b"0," * (MIB // 2)
            sent = 0
            while sent < size:
                s.sendall(chunk[:size - sent])
                sent += min(len(chunk), size - sent)
        except OSError:
            pass
        res.append(conns_status(s))
        s.close()

    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return "answers %s" % sorted(res)


def conns_status(s):
    s.settimeout(60)
    try:
        data = s.recv(200)
        return data.split()[1].decode() if data.startswith(b"HTTP/") else "closed"
    except OSError as e:
        return type(e).__name__


def json_bomb(rest, model):
    s = socket.create_connection(("127.0.0.1", rest), timeout=120)
    body = b"[" + b"0," * (32 * MIB - 1) + b"0]"
    try:
        s.sendall(b"POST /v1/models/%s:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % (model.encode(), len(body)) + body)
    except OSError:
        pass
    return "64 MiB of 0, to %s: %s" % (model, conns_status(s))


def held(rest, n, hello, secs):
    socks = conns.connect_many(rest, n, hello)
    time.sleep(secs)
    for s in socks:
        s.close()
    return "%d connections held %g s" % (n, secs)


def trickle(rest, n, secs):
    tr = conns.Trickler(conns.connect_many(rest, n, conns.LINE[:1]))
    time.sleep(secs)
    cut = tr.closed_by_server()
    tr.close()
    return "%d tricklers, %d cut by the server" % (n, cut)


def one_byte(rest, n):
    conns.one_byte_then_close(rest, n)
    time.sleep(1)
    return "%d clients; CLOSE-WAIT after 1 s: %d" % (n, conns.close_wait(rest))


def main():
    split.use_conns()
    conns.raise_fd_limit(16000)
    os.makedirs(CG, exist_ok=True)
    with open(os.path.join(CG, "memory.limit_in_bytes"), "w") as f:
        f.write(str(2 << 30))
    with open(os.path.join(CG, "memory.max_usage_in_bytes"), "w") as f:
        f.write("0")
    rest = free_port()
    wrap = ["sh", "-c", 'echo $$ > %s/cgroup.procs && exec "$@"' % CG, "sh"]
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest,
                "--drain_timeout_seconds=2"], wrapper=wrap)
    try:
        time.sleep(1)
        print([line[25:] for line in d.log().splitlines() if "REST: at most" in line])
        attack(d, rest, "F2: 10 x 255 MiB uploads", lambda: uploads(rest, 10, 255 * MIB))
        attack(d, rest, "F1: JSON bomb, unknown model", lambda: json_bomb(rest, "nosuch"))
        attack(d, rest, "F1: JSON bomb, hpt", lambda: json_bomb(rest, "hpt"))
        attack(d, rest, "F3: tricklers", lambda: trickle(rest, 1100, 14))
        attack(d, rest, "F3: idle connections", lambda: held(rest, 6000, b"", 5))
        attack(d, rest, "F4: one byte then close", lambda: one_byte(rest, 1100))
        if d.proc.poll() is not None:
            print("daemon dead (rc %s); OOM kills %s" % (d.proc.returncode, open(
                os.path.join(CG, "memory.oom_control")).read().split()[-1]))
            return 1
        socks = conns.connect_many(rest, 1000) + conns.connect_many(rest, 1000, conns.LINE[:20])
        t0 = time.monotonic()
        d.proc.send_signal(15)
        try:
            d.proc.wait(60)
        except Exception:  # noqa: BLE001 - reported below
            d.proc.kill()
            d.proc.wait()
        print("SIGTERM with 2,000 idle and partial connections: exit %d after %.1f s (drain "
              "timeout 2 s); cgroup peak %d MiB, OOM kills %s"
              % (d.proc.returncode, time.monotonic() - t0,
                 cg_read("memory.max_usage_in_bytes") // MIB,
                 open(os.path.join(CG, "memory.oom_control")).read().split()[-1]))
        for s in socks:
            s.close()
    finally:
        d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
