#!/usr/bin/python3
"""it_profile: DCMSERVE_PROFILE=1, the executor's per-node profile
(runtime/graph/rt_exec.c; docs/serving.md, environment variables).

1. `dcmserve benchmark` of the demo model on a real CT file (pydicom's
   CT_small.dcm) with --iterations 6 --warmup 2 logs, when the plan is freed,
   "profile: plan of N nodes, 8 runs, ..." (every run counted once) and one
   line per costly node: each names a node of the model's graph (or one the
   load-time fusion made from it) with its op, DcmDecodeHU (the decode, the
   one node that reads the whole file) among them; the per-node times add up
   to no more than the per-run total, the percentages to no more than 100.
2. Without DCMSERVE_PROFILE, or with DCMSERVE_PROFILE=0, no profile line.
3. The daemon with DCMSERVE_PROFILE=1: after 5 Predict calls and SIGTERM its
   log holds the plan's profile with at least 5 runs, and the answers are the
   same as without the profile (it only times, never changes a result).
"""
import os
import re
import subprocess
import sys

import pydicom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, Daemon, check, dicom_request  # noqa: E402

SRC = os.environ.get("DCM_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODEL_BASE = os.path.join(SRC, "models", "demo_ct")
CT = os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files", "CT_small.dcm")

HEAD = re.compile(r"profile: plan of (\d+) nodes, (\d+) runs, ([0-9.]+) us per run; copies between "
                  r"host and device ([0-9.]+) us per run \((\d+) copy steps\)")
NODE = re.compile(r"profile: +([0-9.]+) us +([0-9.]+) % +node '([^']+)' \(([A-Za-z0-9_]+)\)")


def bench(env_value):
    env = dict(os.environ)
    env.pop("DCMSERVE_PROFILE", None)
    if env_value is not None:
        env["DCMSERVE_PROFILE"] = env_value
    p = subprocess.run([DCMSERVE, "benchmark", "--dir", MODEL_BASE, "--iterations", "6", "--warmup", "2",
                        "--input_files", "dicom=" + CT, "--log_level", "info"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    check(p.returncode == 0, "benchmark failed (rc %d): %s" % (p.returncode, p.stderr[-2000:]))
    return p.stderr


def parse(log, what):
    heads = [m for m in (HEAD.search(l) for l in log.splitlines()) if m]
    nodes = [m for m in (NODE.search(l) for l in log.splitlines()) if m]
    check(len(heads) == 1, "%s: %d profile headers in\n%s" % (what, len(heads), log[-3000:]))
    return heads[0], nodes


def main():
    graph_bytes = open(os.path.join(MODEL_BASE, "1", "saved_model.pb"), "rb").read()

    # 1. benchmark
    log = bench("1")
    head, nodes = parse(log, "benchmark")
    nnodes, runs, total = int(head.group(1)), int(head.group(2)), float(head.group(3))
    check(runs == 8, "benchmark: %d runs counted, 6 iterations + 2 warm-up ran" % runs)
    check(nnodes > 0 and 0 < len(nodes) <= min(12, nnodes), "benchmark: %d node lines for %d nodes"
          % (len(nodes), nnodes))
    check(float(head.group(4)) == 0.0 and int(head.group(5)) == 0,
          "benchmark on the CPU: copies reported: %s" % head.group(0))
    us = [float(m.group(1)) for m in nodes]
    check(us == sorted(us, reverse=True), "node lines not costliest first: %s" % us)
    check(sum(us) <= total * 1.001 + 0.5, "node times add up to %.1f us, the run to %.1f" % (sum(us), total))
    check(sum(float(m.group(2)) for m in nodes) <= 100.5, "percentages add up to over 100")
    for m in nodes:
        base = m.group(3).split("/_")[0]  # a fused node is named after its first node
        check(base.encode() in graph_bytes, "node %r is not in the model's graph" % m.group(3))
    ops = {m.group(3): m.group(4) for m in nodes}
    check(ops.get("DcmDecodeHU") == "DcmDecodeHU", "DcmDecodeHU not profiled: %s" % ops)
    print("it_profile: benchmark: %d nodes, %d runs, %.1f us per run, %d node lines"
          % (nnodes, runs, total, len(nodes)))

    # 2. off
    for v in (None, "0"):
        log = bench(v)
        check("profile:" not in log, "DCMSERVE_PROFILE=%s: a profile line was logged" % v)

    # 3. the daemon
    blob = open(CT, "rb").read()

    answers = []
    for v in ("1", None):
        env = dict(os.environ)
        env.pop("DCMSERVE_PROFILE", None)
        if v:
            env["DCMSERVE_PROFILE"] = v
        d = Daemon(["--model_name=demo", "--model_base_path=" + MODEL_BASE], env=env)
        try:
            d.wait_health()  # the model loads after the port opens
            outs = []
            for _ in range(5):
                resp = d.stub.Predict(dicom_request([blob], model="demo"), timeout=30)
                outs.append(sorted((k, bytes(t.SerializeToString())) for k, t in resp.outputs.items()))
            answers.append(outs)
            rc = d.stop()
            check(rc == 0, "daemon exited %d" % rc, d)
            log = d.log()
            if v:
                head, nodes = parse(log, "daemon")
                check(int(head.group(2)) >= 5, "daemon: %s runs for 5 calls" % head.group(2), d)
                check(nodes, "daemon: no node lines", d)
            else:
                check("profile:" not in log, "daemon without DCMSERVE_PROFILE logged a profile", d)
        finally:
            d.close()
    check(answers[0] == answers[1] and all(a == answers[0][0] for a in answers[0]),
          "answers differ with the profile on")
    print("it_profile: ok")


if __name__ == "__main__":
    main()
