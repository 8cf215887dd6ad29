"""it_serve_h2flood: HTTP/2 floods on the gRPC port, as raw frames on loopback
(finding 4 of the hostile-clients issue).

Frames are built by hand (HPACK by python3-hpack, which comes with
python3-h2), so that the client ignores the limits the server announces, as
an attacker would. Each flood runs against a fresh daemon:
  1. header-only streams: 100,000 HEADERS frames (a Predict call each, no
     DATA, no END_STREAM) over 4 connections;
  2. zero window: connections that announce an initial window of 0 and send
     4,000 complete Predict requests each;
  3. header-only streams from a client that never acknowledges SETTINGS:
     40,000 over 2 connections;
  4. rapid reset: 50,000 streams opened and reset at once (HEADERS then
     RST_STREAM CANCEL) over 2 connections.
For 1 and 2 the server announces MAX_CONCURRENT_STREAMS = 128 (the default
of --grpc_max_concurrent_streams), closes every flooding connection, and the
daemon's peak RSS (VmHWM in /proc/PID/status) grows less than 80 MB over
its RSS before the flood (release build: 5 MB; the binary before this limit:
136 and 157 MB, connections left open). 3 and 4 are not stopped by gRPC core
1.51 (docs/security.md): their growth is checked against 1000 MB, and a
new client must be answered again once the flood stops
(within 180 s: the daemon may first work through the backlog, which is the
denial of service 1.51 leaves open); for 1 and 2 a new client's Predict is
answered during the flood too.
"""
import os
import socket
import struct
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (DCMSERVE, HPT, Daemon, Stubs, check, float_tensor, gen_protos,  # noqa: E402
                          tensor_values)

try:
    import hpack
except ImportError:
    print("SKIP: python3-hpack (python3-h2) not installed (scripts/install_deps.sh all)")
    sys.exit(77)

pb = gen_protos()
# Bounds on the growth of the daemon's peak RSS over its RSS before the flood.
PEAK_MB = 1000   # floods gRPC 1.51 does not stop
# Under ASan every queued stream costs more (redzones, quarantine): the floods
# gRPC 1.51 does not stop send fewer streams there, and their peak is not bounded.
ASAN = bool(os.environ.get("DCM_ASAN")) or "asan" in DCMSERVE
UNSTOPPED_SCALE = 0.5 if ASAN else 1.0
LIMITED_MB = 80   # floods the stream limit stops
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 7, 8


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def headers_block():
    enc = hpack.Encoder()
    return enc.encode([(":method", "POST"), (":scheme", "http"), (":path", "/tensorflow.serving.PredictionService/Predict"),
                       (":authority", "127.0.0.1"), ("content-type", "application/grpc"), ("te", "trailers")])


def predict_bytes():
    r = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
    r.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))
    m = r.SerializeToString()
    return b"\x00" + struct.pack(">I", len(m)) + m


def vm(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def predict_ok(d):
    ch = grpc.insecure_channel("127.0.0.1:%d" % d.port)
    try:
        r = pb.tfs.PredictRequest(model_spec=pb.tfs.ModelSpec(name="hpt"))
        r.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))
        got = tensor_values(Stubs(ch).Predict(r, timeout=60).outputs["y"])
        check(got == [2.5, 3.0, 4.5], "Predict during a flood gave %s" % got, d)
    finally:
        ch.close()


class Conn:
    def __init__(self, port, settings=b"", ack=True):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.s.sendall(PREFACE + frame(SETTINGS, 0, 0, settings))
        self.got = b""
        self.dead = False
        # Acknowledge the server's SETTINGS, as every HTTP/2 client does: gRPC
        # enforces MAX_CONCURRENT_STREAMS only once the peer acknowledged it.
        while len(self.got) < 9 or len(self.got) < 9 + int.from_bytes(self.got[:3], "big"):
            b = self.s.recv(65536)
            if not b:
                break
            self.got += b
        if ack and self.got[3:4] == bytes([SETTINGS]):
            self.s.sendall(frame(SETTINGS, 0x1, 0))

    def send(self, data):
        try:
            self.s.sendall(data)
        except OSError:
            self.dead = True

    def drain(self):
        """Reads what the server sent so far (so it never blocks on us)."""
        self.s.setblocking(False)
        try:
            while True:
                b = self.s.recv(1 << 20)
                if not b:
                    self.dead = True
                    break
                if len(self.got) < 1 << 16:
                    self.got += b
        except (BlockingIOError, OSError):
            pass
        self.s.setblocking(True)

    def server_settings(self):
        buf, out = self.got, {}
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if buf[3] == SETTINGS and not buf[4] & 1:
                p = buf[9:9 + n]
                for i in range(0, len(p) - 5, 6):
                    out[int.from_bytes(p[i:i + 2], "big")] = int.from_bytes(p[i + 2:i + 6], "big")
            buf = buf[9 + n:]
        return out

    def close(self):
        self.s.close()


def flood(d, name, per_conn, nconn, make, settings=b"", read=True, ack=True, peak_mb=None, strict=True):
    block = headers_block()
    base = vm(d.proc.pid, "VmRSS")
    conns = [Conn(d.port, settings, ack) for _ in range(nconn)]
    stop = threading.Event()
    probe_errors = []

    def prober():
        while not stop.is_set():
            try:
                predict_ok(d)
            except Exception as e:  # noqa: BLE001
                probe_errors.append(repr(e)[:300])
            time.sleep(0.5)
    t = threading.Thread(target=prober, daemon=True)
    t.start()
    t0 = time.monotonic()
    for c in conns:
        sid = 1
        batch = []
        for i in range(per_conn):
            batch.append(make(sid, block))
            sid += 2
            if len(batch) == 500:
                c.send(b"".join(batch))
                batch = []
                if read:
                    c.drain()
                if c.dead:
                    break
        if batch:
            c.send(b"".join(batch))
        if read:
            c.drain()
    time.sleep(4.0)  # the daemon keeps working through what it read: let it
    for c in conns:
        if read:
            c.drain()
    peak = vm(d.proc.pid, "VmHWM")
    rss = vm(d.proc.pid, "VmRSS")
    settings_seen = conns[0].server_settings() if read else {}
    dead = sum(c.dead for c in conns)
    stop.set()
    t.join(timeout=60)
    for c in conns:
        c.close()
    check(d.proc.poll() is None, "%s: the daemon died" % name, d)
    # Once the flood stops the daemon must serve again (for the floods gRPC
    # 1.51 does not stop it may first have to work through the backlog).
    t1 = time.monotonic()
    while True:
        try:
            predict_ok(d)
            break
        except grpc.RpcError as e:
            check(strict is False and time.monotonic() - t1 < 180,
                  "%s: no answer after the flood: %s" % (name, e.code()), d)
    recovered = time.monotonic() - t1
    print("it_serve_h2flood: %s: %d streams over %d connections in %.1f s; peak RSS %.0f MB, RSS %.0f MB; "
          "%d connection(s) closed by the server; probe errors %d; answered again after %.1f s"
          % (name, per_conn * nconn, nconn, time.monotonic() - t0, peak, rss, dead, len(probe_errors),
             recovered))
    if strict:
        check(not probe_errors, "%s: a client's Predict failed during the flood: %s"
              % (name, probe_errors[:3]), d)
    bound = peak_mb or PEAK_MB
    # The floods gRPC 1.51 does not stop grow with how far the sender gets
    # ahead of the daemon's drain; under ASan (several times slower, and
    # beside other tests under ctest -j) that has no useful bound: there the
    # test only requires that the daemon answers again and exits cleanly.
    check((ASAN and not strict) or peak - base < bound, "%s: peak RSS %.0f MB grew %.0f MB over %.0f MB before the flood (bound %d MB)"
          % (name, peak, peak - base, base, bound), d)
    return settings_seen, dead


def main():
    msg = predict_bytes()
    headers_only = lambda sid, blk: frame(HEADERS, 0x4, sid, blk)  # noqa: E731
    # name, streams per connection, connections, frames of one stream, our SETTINGS,
    # acknowledge the server's SETTINGS, peak RSS bound (MB), must the server cut us off
    cases = [
        ("header-only streams", 25000, 4, headers_only, b"", True, LIMITED_MB, True),
        # SETTINGS_INITIAL_WINDOW_SIZE (4) = 0: the server may not send any DATA back.
        ("zero window", 4000, 3, lambda sid, blk: frame(HEADERS, 0x4, sid, blk) + frame(DATA, 0x1, sid, msg),
         struct.pack(">HI", 4, 0), True, LIMITED_MB, True),
        # Not covered by gRPC core 1.51 (docs/security.md): a client that never
        # acknowledges SETTINGS escapes MAX_CONCURRENT_STREAMS, and rapid reset
        # has no GOAWAY; what bounds both is how fast the daemon drains calls.
        ("header-only streams, SETTINGS never acknowledged", int(20000 * UNSTOPPED_SCALE), 2,
         headers_only, b"", False,
         PEAK_MB, False),
        ("rapid reset", int(25000 * UNSTOPPED_SCALE), 2,
         lambda sid, blk: frame(HEADERS, 0x4, sid, blk) + frame(RST_STREAM, 0, sid, struct.pack(">I", 8)),
         b"", True, PEAK_MB, False),
    ]
    for name, per_conn, nconn, make, settings, ack, peak_mb, cut in cases:
        # A fresh daemon per flood: VmHWM is the process's peak.
        d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--grpc_max_threads=2"])
        try:
            d.wait_health(1)
            print("it_serve_h2flood: baseline RSS %.0f MB" % vm(d.proc.pid, "VmRSS"))
            s, dead = flood(d, name, per_conn, nconn, make, settings=settings, ack=ack, peak_mb=peak_mb,
                            strict=cut)
            if ack:
                check(s.get(3) == 128, "server SETTINGS: MAX_CONCURRENT_STREAMS %s, want 128 (%s)"
                      % (s.get(3), s), d)
            if cut:
                check(dead == nconn, "%s: %d of %d flooding connections were not closed by the server"
                      % (name, nconn - dead, nconn), d)
            # The drain may wait for calls of a backlog still being worked through.
            check(d.stop(timeout=180) == 0, "exit code", d)
        finally:
            d.close()
    print("it_serve_h2flood: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
