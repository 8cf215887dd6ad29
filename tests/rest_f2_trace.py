"""rest_f2_trace: where a valid call waits during attack F2 of issue 33 (10
connections each uploading 255 MiB of `0,` at once to half_plus_two over
REST), the daemon apart from the machine. Root, cgroup v1 memory group of
2 GiB as rest_cgroup_attacks.py; a measuring tool, not a ctest
(docs/reliability.md, "F2: where the probe waited").

One round per call: the daemon in the cgroup; a probe process (a REST
:predict on a new connection, its local port kept, then a gRPC Predict, every
0.1 s); a sampler process reading every 10 ms each thread's
/proc/PID/task/TID/schedstat (ns on a CPU, ns runnable waiting for one),
state and current system call, of the daemon, the probe and this attacking
process, and /proc/stat; then the attack. Options: `strace` (the daemon
under strace --seccomp-bpf -f -ttt -T for accept4, sendmsg, munmap, mremap,
madvise, shutdown: when the probe's connection was accepted and answered,
what was freed), `perf` (perf record -g of the daemon), `roles` (gdb's
backtraces at start: which thread is which), `nice` (the attacker at
nice 19), and daemon flags (`--...`). Prints the answers, the slow probes
and, with `window A B` (seconds after the attack began), per thread the CPU
and run-queue wait over that window.
  usage: DCMSERVE=/abs/build/dcmserve python3 tests/rest_f2_trace.py OUTDIR [opts]
         python3 tests/rest_f2_trace.py window OUTDIR A B
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rest_probe_split as split  # noqa: E402
from serve_client import HPT, Daemon, free_port  # noqa: E402

CG = "/sys/fs/cgroup/memory/dcmserve_rest_attacks"

def probe_main(rest, gport, out):
    from serve_client import Stubs, channel, hpt_grpc_predict
    class T: stub = Stubs(channel(gport))
    res, stop = [], []
    print("ready", flush=True)
    threading.Thread(target=lambda: stop.append(sys.stdin.readline()), daemon=True).start()
    while not stop:
        t0 = time.monotonic()
        s = socket.socket(); s.settimeout(10); port = 0; ok = False; t1 = t2 = None
        try:
            s.connect(("127.0.0.1", rest)); port = s.getsockname()[1]; t1 = time.monotonic()
            s.sendall(split.REQ); data = b""
            while True:
                d = s.recv(4096)
                if not d: break
                data += d
            t2 = time.monotonic(); ok = data.startswith(b"HTTP/1.1 200")
        except OSError:
            pass
        s.close()
        g0 = time.monotonic()
        try: gok = hpt_grpc_predict(T, 5) == [2.5]
        except Exception: gok = False
        g1 = time.monotonic()
        res.append([t0, t1, t2, port, ok, g0, g1, gok])
        time.sleep(0.1)
    json.dump(res, open(out, "w"))

def sampler_main(pids, out):
    f = open(out, "w")
    stop = []
    threading.Thread(target=lambda: stop.append(sys.stdin.readline()), daemon=True).start()
    print("ready", flush=True)
    while not stop:
        t = time.monotonic(); rec = {"t": t, "cpu": open("/proc/stat").readline().split()[1:9],
                                     "la": open("/proc/loadavg").read().split()[3]}
        for name, pid in pids.items():
            th = {}
            try:
                for tid in os.listdir("/proc/%s/task" % pid):
                    try:
                        ss = open("/proc/%s/task/%s/schedstat" % (pid, tid)).read().split()
                        st = open("/proc/%s/task/%s/stat" % (pid, tid)).read()
                        state = st[st.rindex(")") + 2]
                        sc = open("/proc/%s/task/%s/syscall" % (pid, tid)).read().split()[0]
                        th[tid] = [int(ss[0]), int(ss[1]), state, sc]
                    except OSError:
                        pass
            except OSError:
                pass
            rec[name] = th
        f.write(json.dumps(rec) + "\n")
        time.sleep(0.01)
    f.close()

def window(out, a, b):
    """Per thread over [a, b] s after the attack began: CPU s, run-queue
    wait s, and the run of (state:syscall x samples); the machine's CPU split."""
    ta = json.load(open(out + "/run.json"))["ta"]
    w = [r for r in map(json.loads, open(out + "/sample.jsonl")) if a <= r["t"] - ta <= b]
    c0, c1 = list(map(int, w[0]["cpu"])), list(map(int, w[-1]["cpu"]))
    tot = sum(c1) - sum(c0) or 1
    nrun = [int(r["la"].split("/")[0]) for r in w]
    print("%.2f-%.2f s: machine CPU %s; runnable threads %d to %d" % (
        w[0]["t"] - ta, w[-1]["t"] - ta,
        {n: round((y - x) / tot, 2) for n, x, y in
         zip("user nice system idle iowait irq softirq steal".split(), c0, c1)},
        min(nrun), max(nrun)))
    for proc in ("daemon", "probe", "attacker"):
        for tid in sorted(set(w[0][proc]) & set(w[-1][proc]), key=int):
            r0, r1 = w[0][proc][tid], w[-1][proc][tid]
            run, wait = (r1[0] - r0[0]) / 1e9, (r1[1] - r0[1]) / 1e9
            seq = []
            for r in w:
                x = r[proc].get(tid)
                if x is None:
                    continue
                st = x[2] + ":" + x[3]
                if seq and seq[-1][0] == st:
                    seq[-1][1] += 1
                else:
                    seq.append([st, 1])
            if run + wait >= 0.005 or len(seq) > 1:
                print("%-8s %s cpu %.3f runq-wait %.3f  %s" % (
                    proc, tid, run, wait, " ".join("%s x%d" % tuple(q) for q in seq[:12])))


def main():
    if sys.argv[1] == "probe":
        return probe_main(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    if sys.argv[1] == "sample":
        return sampler_main(json.loads(sys.argv[2]), sys.argv[3])
    if sys.argv[1] == "window":
        return window(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
    out = os.path.abspath(sys.argv[1])  # strace runs in the daemon's folder
    os.makedirs(out, exist_ok=True)
    opts = sys.argv[2:]
    use_strace = "strace" in opts; nice = "nice" in opts
    flags = [o for o in opts if o.startswith("--")]
    os.makedirs(CG, exist_ok=True)
    open(os.path.join(CG, "memory.limit_in_bytes"), "w").write(str(2 << 30))
    open(os.path.join(CG, "memory.max_usage_in_bytes"), "w").write("0")
    rest = free_port()
    wrap = ["sh", "-c", 'echo $$ > %s/cgroup.procs && exec "$@"' % CG, "sh"]
    if use_strace:
        wrap += ["strace", "--seccomp-bpf", "-f", "-ttt", "-T", "-o", out + "/strace.txt", "-e",
                 "trace=accept4,sendto,sendmsg,writev,munmap,mremap,madvise,shutdown"]
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest,
                "--drain_timeout_seconds=2"] + flags, wrapper=wrap)
    try:
        dpid = d.proc.pid
        if use_strace:
            dpid = int(open("/proc/%d/task/%d/children" % (dpid, dpid)).read().split()[0])
        time.sleep(1)
        if "roles" in opts:
            gd = subprocess.run(["gdb", "-p", str(dpid), "-batch", "-ex", "thread apply all bt 12"],
                                capture_output=True, text=True, timeout=120).stdout
            open(out + "/roles.txt", "w").write(gd)
        perf = None
        if "perf" in opts:
            perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-k", "CLOCK_MONOTONIC", "-p", str(dpid),
                                     "-o", out + "/perf.data"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        off = time.time() - time.monotonic()
        p = subprocess.Popen([sys.executable, __file__, "probe", str(rest), str(d.port), out + "/probe.json"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        p.stdout.readline()
        if nice: os.nice(19)
        sm = subprocess.Popen([sys.executable, __file__, "sample", json.dumps(
            {"daemon": dpid, "probe": p.pid, "attacker": os.getpid()}), out + "/sample.jsonl"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        sm.stdout.readline()
        time.sleep(0.5)
        res = []
        ta = time.monotonic()
        split.uploads(rest, res)
        tb = time.monotonic()
        time.sleep(1)
        p.communicate(b"stop\n"); sm.communicate(b"stop\n")
        if perf: perf.send_signal(2); perf.wait()
        json.dump({"ta": ta, "tb": tb, "off": off, "res": res, "dpid": dpid,
                   "load": os.getloadavg(), "peak": int(open(CG + "/memory.max_usage_in_bytes").read())},
                  open(out + "/run.json", "w"))
        pr = json.load(open(out + "/probe.json"))
        print("attack %.1f s, %d probes, load %s, peak %d MiB" % (tb - ta, len(pr), os.getloadavg(),
              int(open(CG + "/memory.max_usage_in_bytes").read()) >> 20))
        print("answers:", sorted((r[0], round(r[-1] - ta, 1)) for r in res))
        for r in pr:
            rt = (r[2] or r[0] + 10) - r[0]; gt = r[6] - r[5]
            if rt > 0.5 or gt > 0.5 or not r[4] or not r[7]:
                print("slow probe at %.2f: connect %.2f answer %s port %d ok %s; gRPC %.2f ok %s" % (
                    r[0] - ta, (r[1] or r[0]) - r[0], "%.2f" % (r[2] - r[1]) if r[2] else "-", r[3], r[4], gt, r[7]))
        rts = sorted((r[2] or r[0] + 10) - r[0] for r in pr); gts = sorted(r[6] - r[5] for r in pr)
        print("REST median %.3f max %.2f; gRPC median %.3f max %.2f" % (rts[len(rts)//2], rts[-1], gts[len(gts)//2], gts[-1]))
    finally:
        d.close()

if __name__ == "__main__":
    sys.exit(main())
