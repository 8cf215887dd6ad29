#!/usr/bin/python3
"""Measures dcmserve's start-up time to SERVING and its idle resident memory.

    /usr/bin/python3 scripts/bench_serve.py [--bin build/dcmserve] [--model models/demo_ct] [-n 20]

Each run starts `dcmserve serve --port=0 --bind_address=127.0.0.1 --model_name=demo_ct
--model_base_path=<model>`, then calls grpc.health.v1.Health/Check every millisecond
until it answers SERVING. Reported per run:
  wall:    process start (just before exec) -> first SERVING answer seen by the client
  daemon:  the daemon's own figure (entry of `serve` -> every model available), from its log
  cpu:     user + system CPU time the daemon used up to that point (/proc/<pid>/stat,
           10 ms ticks): what the start costs when the machine is not shared
  rss:     VmRSS of the idle daemon 2 s after SERVING (model loaded, no traffic)
Prints the median and the range of each, plus the machine's load average.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def health_stub(port):
    # HealthCheckRequest{} is the empty message; HealthCheckResponse{status=1} is b"\x08\x01".
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    return ch, ch.unary_unary("/grpc.health.v1.Health/Check")


def one_run(binary, model, idle_s):
    log = tempfile.NamedTemporaryFile(prefix="bench_serve_", delete=False)
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "serve", "--port=0", "--bind_address=127.0.0.1",
                          "--model_name=demo_ct", "--model_base_path=" + model],
                         stdout=subprocess.PIPE, stderr=log)
    line = p.stdout.readline().decode()
    port = int(line.rsplit(":", 1)[1])
    ch, check = health_stub(port)
    while True:
        try:
            if check(b"", timeout=1) == b"\x08\x01":
                break
        except grpc.RpcError:
            pass
        time.sleep(0.001)
    wall = (time.monotonic() - t0) * 1e3
    with open("/proc/%d/stat" % p.pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")  # utime + stime
    ch.close()
    time.sleep(idle_s)
    with open("/proc/%d/status" % p.pid) as f:
        rss = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024.0
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    p.stdout.close()
    with open(log.name) as f:
        text = f.read()
    os.unlink(log.name)
    m = re.search(r"\(([\d.]+) ms after start\)", text)
    return wall, float(m.group(1)) if m else float("nan"), cpu, rss, rc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "dcmserve"))
    ap.add_argument("--model", default=os.path.join(SRC, "models", "demo_ct"))
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--idle", type=float, default=2.0)
    a = ap.parse_args()
    walls, daemons, cpus, rsss = [], [], [], []
    for _ in range(a.n):
        w, d, c, r, rc = one_run(a.bin, a.model, a.idle)
        if rc != 0:
            sys.exit("daemon exited with %d" % rc)
        walls.append(w)
        daemons.append(d)
        cpus.append(c)
        rsss.append(r)
    # Baseline: launching the same binary just to print its version (exec +
    # dynamic linking of gRPC & co + exit), and launching /bin/true.
    launch, true = [], []
    for _ in range(a.n):
        t0 = time.monotonic()
        subprocess.run([a.bin, "--version"], stdout=subprocess.DEVNULL, check=True)
        launch.append((time.monotonic() - t0) * 1e3)
        t0 = time.monotonic()
        subprocess.run(["/bin/true"], check=True)
        true.append((time.monotonic() - t0) * 1e3)
    load = open("/proc/loadavg").read().split()[:3]
    print("runs=%d cpus=%d loadavg=%s" % (a.n, os.cpu_count(), " ".join(load)))
    for name, v, unit in (("start->SERVING wall", walls, "ms"), ("start->SERVING daemon", daemons, "ms"),
                          ("CPU time to SERVING", cpus, "ms"),
                          ("idle RSS", rsss, "MiB"), ("baseline: dcmserve --version", launch, "ms"),
                          ("baseline: /bin/true", true, "ms")):
        print("%-29s median %7.1f %s   min %7.1f   max %7.1f" % (name, statistics.median(v), unit, min(v), max(v)))


if __name__ == "__main__":
    main()
