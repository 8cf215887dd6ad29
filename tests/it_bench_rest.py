"""it_bench_rest: dcmserve-bench --api=rest against the real daemon's REST
port. TF Serving's half_plus_two example body from --values must all answer
200 and be counted, and the daemon's own /metrics must have seen at least as
many OK REST predicts; a body the SignatureDef refuses must count every call
as an HTTP error and make the tool exit 1; a --body file and --rest_path reach
KServe v2 /infer. 127.0.0.1 only, about a second per run."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_bench import BENCH  # noqa: E402
from it_serve_rest import free_port, metrics, sample  # noqa: E402
from serve_client import HPT, Daemon, check  # noqa: E402


def bench(port, *args, want_rc=0):
    cmd = [BENCH, "--api=rest", "--target=127.0.0.1:%d" % port, "--model=hpt", "--duration=1",
           "--warmup=0.2", "--json"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    check(p.returncode == want_rc, "%s: rc %d, wanted %d\n%s%s" % (" ".join(args), p.returncode, want_rc,
                                                                   p.stdout, p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    check(os.path.exists(BENCH), "no %s (build the dcmserve-bench target)" % BENCH)
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--rest_api_port=%d" % rest])
    tmp = tempfile.mkdtemp(prefix="it_bench_rest_")
    try:
        d.wait_health(1)
        key = dict(model="hpt", version="123", signature="serving_default", api="rest_predict", code="OK")
        before = sample(metrics(rest), "dcmserve_requests_total", **key)
        r = bench(rest, "--values=1.0,2.0,5.0", "--concurrency=2")
        check(r["calls"] > 0 and r["ok"] == r["calls"] and r["http_errors"] == 0 and r["io_errors"] == 0,
              "rest predict: %r" % r)
        check(r["p50_us"] <= r["p90_us"] <= r["p99_us"] <= r["p999_us"] <= r["max_us"], "order: %r" % r)
        after = sample(metrics(rest), "dcmserve_requests_total", **key)
        check(after - before >= r["calls"], "daemon counted %d, bench %d" % (after - before, r["calls"]))
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"instances": [[1.0, 2.0]]}, f)
        r = bench(rest, "--body=" + bad, want_rc=1)
        check(r["ok"] == 0 and r["http_errors"] == r["calls"] > 0, "bad body: %r" % r)
        v2 = os.path.join(tmp, "v2.json")
        with open(v2, "w") as f:
            json.dump({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP32", "data": [1, 2, 5]}]}, f)
        r = bench(rest, "--body=" + v2, "--rest_path=/v2/models/hpt/infer")
        check(r["calls"] > 0 and r["ok"] == r["calls"], "v2 infer: %r" % r)
    finally:
        d.close()
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)
    print("it_bench_rest: ok")


if __name__ == "__main__":
    main()
