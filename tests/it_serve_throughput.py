"""it_serve_throughput: dynamic batching, per-model queues and warm-up against
the real daemon (issue 13), over gRPC on 127.0.0.1.

- batching: N concurrent single-row clients (half_plus_two floats, and
  demo_ct DICOM files, each client its own file) with --enable_batching make
  batches of more than one row (dcmserve_batch_size on /metrics) and every
  client gets exactly its own rows; the reference is the same model run once
  on all rows in one request, sequentially;
- queue overflow: one worker, a queue of 2, 24 concurrent heavy calls: every
  call is either answered with its correct values or UNAVAILABLE, none lost,
  at least one of each;
- a deadline that passes while a call waits in the queue: DEADLINE_EXCEEDED,
  and the daemon says it skipped the call before running it;
- warm-up: a tf_serving_warmup_requests file built here (TFRecord of
  PredictionLog, CRC32C computed here) is replayed
  --num_request_iterations_for_warmup times before health is SERVING; a
  classify_log record is skipped; a file with a broken CRC fails the load.
Bounded: a few hundred calls, all on loopback."""
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import (HPT, SRC, WAIT, Daemon, check, dicom_request, float_tensor,  # noqa: E402
                          free_port, gen_protos, shifted_dicoms, tensor_values)

pb = gen_protos()
DEMO = os.path.join(SRC, "models", "demo_ct")
CT = os.path.join(SRC, "tests", "data", "onnx", "ct64.dcm")
N = 8


def log_pb():
    """Python classes of proto/tf_serving_log.proto (PredictionLog)."""
    subprocess.run(["protoc", "--python_out=" + pb.dir, "-I", os.path.join(SRC, "proto"),
                    "tf_serving_log.proto"], check=True)
    import tf_serving_log_pb2  # noqa
    return tf_serving_log_pb2


def batch_sizes(port, model):
    """{le: cumulative count} of dcmserve_batch_size for model, and the count."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    buckets, count = {}, 0
    for m in re.finditer(r'^dcmserve_batch_size_bucket\{model="([^"]*)",version="\d+",signature="[^"]*",'
                         r'le="([^"]+)"\} (\d+)$', text, re.M):
        if m.group(1) == model:
            buckets[m.group(2)] = buckets.get(m.group(2), 0) + int(m.group(3))
    rows = 0
    for m in re.finditer(r'^dcmserve_batch_size_(count|sum)\{model="([^"]*)"[^}]*\} (\d+)$', text, re.M):
        if m.group(2) == model and m.group(1) == "count":
            count += int(m.group(3))
        elif m.group(2) == model:
            rows += int(m.group(3))
    batch_sizes.rows = rows
    return buckets, count


def hpt_request(values, content=True):
    r = pb.tfs.PredictRequest()
    r.model_spec.name = "hpt"
    r.inputs["x"].CopyFrom(float_tensor(list(values), [len(values), 1], content=content))
    return r


def out_array(tp):
    shape = [d.size for d in tp.tensor_shape.dim]
    return np.array(tensor_values(tp), dtype=np.float32).reshape(shape)


def all_at_once(fn, args):
    """Runs fn(a) for every a at once (a barrier before the calls)."""
    bar = threading.Barrier(len(args))

    def go(a):
        bar.wait()
        return fn(a)
    with concurrent.futures.ThreadPoolExecutor(len(args)) as ex:
        return list(ex.map(go, args))


def batching(tmp):
    params = os.path.join(tmp, "batching.pbtxt")
    with open(params, "w") as f:
        f.write("# TF Serving's BatchingParameters\nmax_batch_size { value: 8 }\n"
                "batch_timeout_micros { value: 200000 }\nnum_batch_threads { value: 1 }\n"
                "max_enqueued_batches { value: 4 }\nallowed_batch_sizes: 2\nallowed_batch_sizes: 4\n"
                "allowed_batch_sizes: 8\n")
    mon = os.path.join(tmp, "monitoring.pbtxt")
    with open(mon, "w") as f:
        f.write('prometheus_config { enable: true path: "/metrics" }\n')
    cfg = os.path.join(tmp, "models.pbtxt")
    with open(cfg, "w") as f:
        f.write('model_config_list { config { name: "hpt" base_path: "%s" model_platform: "tensorflow" } '
                'config { name: "demo_ct" base_path: "%s" model_platform: "tensorflow" } }\n' % (HPT, DEMO))
    rest = free_port()
    d = Daemon(["--model_config_file=" + cfg, "--enable_batching=true", "--batching_parameters_file=" + params,
                "--rest_api_port=%d" % rest, "--monitoring_config_file=" + mon])
    try:
        d.wait_health(1)
        check("batching on: max_batch_size 8, batch_timeout_micros 200000" in d.log(), "no batching line", d)
        # half_plus_two: the reference is one request with every client's row.
        rounds = [[float(r * 100 + k) + 0.25 for k in range(N)] for r in range(4)]
        runs = 0
        for vals in rounds:
            ref = out_array(d.stub.Predict(hpt_request(vals), timeout=30).outputs["y"])
            c0 = batch_sizes(rest, "hpt")[1]
            got = all_at_once(lambda k: d.stub.Predict(hpt_request([vals[k]], content=bool(k % 2)), timeout=30),
                             list(range(N)))
            for k, resp in enumerate(got):
                y = out_array(resp.outputs["y"])
                check(y.shape == (1, 1) and y[0, 0] == ref[k, 0],
                      "hpt client %d: got %r, its row of the whole-batch run is %r" % (k, y, ref[k]), d)
            runs += batch_sizes(rest, "hpt")[1] - c0
        # Padding: 3 rows is no allowed batch size, so however the 3 calls are
        # grouped, the runs hold more rows (padded up to 2, 4 or 8) than sent.
        vals = [7.5, -3.25, 1e3]
        ref = out_array(d.stub.Predict(hpt_request(vals), timeout=30).outputs["y"])
        batch_sizes(rest, "hpt")
        rows0 = batch_sizes.rows
        got = all_at_once(lambda k: d.stub.Predict(hpt_request([vals[k]]), timeout=30), [0, 1, 2])
        for k, resp in enumerate(got):
            y = out_array(resp.outputs["y"])
            check(y.shape == (1, 1) and y[0, 0] == ref[k, 0], "padded batch, client %d: %r" % (k, y), d)
        b, _ = batch_sizes(rest, "hpt")
        check(batch_sizes.rows - rows0 >= 4 and b.get("1", 0) == 0,
              "3 rows ran as %d rows (allowed_batch_sizes 2, 4, 8): no padding" % (batch_sizes.rows - rows0), d)
        calls = N * len(rounds)
        check(0 < runs < calls, "hpt: %d concurrent calls made %d runs (dcmserve_batch_size)" % (calls, runs), d)
        print("hpt: %d concurrent single-row calls in %d batched runs" % (calls, runs))

        # DICOM: one file per client, each client its own rows of both outputs.
        if os.path.exists(CT):
            files = shifted_dicoms(CT, N, 37, -100)
            ref = d.stub.Predict(dicom_request(files), timeout=60).outputs
            ref_mean, ref_frac = out_array(ref["mean_hu"]), out_array(ref["tissue_fraction"])
            check(len(set(ref_mean.tolist())) == N, "the %d files do not differ: %r" % (N, ref_mean), d)
            b0, c0 = batch_sizes(rest, "demo_ct")
            got = all_at_once(lambda k: d.stub.Predict(dicom_request([files[k]]), timeout=60), list(range(N)))
            for k, resp in enumerate(got):
                m, fr = out_array(resp.outputs["mean_hu"]), out_array(resp.outputs["tissue_fraction"])
                check(m.shape == (1,) and fr.shape == (1, 4), "ct client %d: shapes %s %s" % (k, m.shape, fr.shape), d)
                check(np.array_equal(m[0], ref_mean[k]) and np.array_equal(fr[0], ref_frac[k]),
                      "ct client %d: got %r %r, its rows are %r %r" % (k, m, fr, ref_mean[k], ref_frac[k]), d)
            b1, c1 = batch_sizes(rest, "demo_ct")
            check(0 < c1 - c0 < N, "demo_ct: %d runs for %d concurrent files (no batching)" % (c1 - c0, N), d)
            print("demo_ct: %d concurrent files in %d runs" % (N, c1 - c0))
        else:
            print("demo_ct part skipped: no %s" % CT)
        check(d.stop() == 0, "daemon did not exit 0", d)
    finally:
        d.close()


def per_model_params(tmp):
    """--enable_per_model_batching_parameters: batching_params.pbtxt in the
    version directory wins over the global defaults (max_batch_size 1000)."""
    base = os.path.join(tmp, "pm")
    shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(base, "123"))
    with open(os.path.join(base, "123", "batching_params.pbtxt"), "w") as f:
        f.write("max_batch_size { value: 2 }\nbatch_timeout_micros { value: 100000 }\n"
                "num_batch_threads { value: 1 }\n")
    mon = os.path.join(tmp, "monitoring.pbtxt")
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + base, "--enable_batching=true",
                "--enable_per_model_batching_parameters=true", "--rest_api_port=%d" % rest,
                "--monitoring_config_file=" + mon])
    try:
        d.wait_health(1)
        vals = [float(k) * 1.5 for k in range(6)]
        ref = out_array(d.stub.Predict(hpt_request(vals), timeout=30).outputs["y"])  # 6 rows > 2: alone
        got = all_at_once(lambda k: d.stub.Predict(hpt_request([vals[k]]), timeout=30), list(range(6)))
        for k, resp in enumerate(got):
            check(out_array(resp.outputs["y"])[0, 0] == ref[k, 0], "per-model params: client %d" % k, d)
        b, count = batch_sizes(rest, "hpt")
        check(re.search(r"batching parameters of .*123: max_batch_size 2, batch_timeout_micros 100000", d.log()),
              "batching_params.pbtxt not read", d)
        check(b.get("2", 0) == count - 1 and count >= 4,
              "runs of at most 2 rows wanted (plus the 6-row reference alone): %r, %d runs" % (b, count), d)
        print("per-model batching parameters: %d runs of <= 2 rows for 6 calls" % (count - 1))
        check(d.stop() == 0, "daemon did not exit 0", d)
    finally:
        d.close()


def until_overflow(d, what, burst, refused):
    """Whether a burst overflows the queue depends on how fast this machine's
    client sends against how fast the daemon answers, so burst(round) is
    repeated (at most 6 rounds) until one round shows both answers ("OK")
    and refusals; every call of every round must be one or the other."""
    for rnd in range(6):
        got = burst(rnd)
        ok, unav = got.count("OK"), got.count(refused)
        print("%s overflow round %d: %d OK, %d %s of %d" % (what, rnd + 1, ok, unav, refused, len(got)))
        check(ok + unav == len(got), "%s: calls neither answered right nor %s: %r" % (what, refused, got), d)
        if ok >= 1 and unav >= 1:
            return
    check(False, "%s: wanted both answers and %s in one of 6 rounds: %r" % (what, refused, got), d)


def overflow_and_deadline():
    rest = free_port()
    d = Daemon(["--model_name=hpt", "--model_base_path=" + HPT, "--grpc_max_threads=1",
                "--max_queued_requests_per_model=2", "--log_level=debug", "--rest_api_port=%d" % rest,
                "--rest_api_num_threads=16"])
    try:
        d.wait_health(1)
        n = 1000000
        reqs = [hpt_request(np.full(n, k, dtype=np.float32)) for k in range(32)]
        ref = {}
        for k in (0, 1):
            ref[k] = out_array(d.stub.Predict(reqs[k], timeout=60).outputs["y"])[0, 0]

        # Sent all at once from one thread (futures), so that they arrive
        # together; the burst grows every second round (until_overflow).
        def grpc_burst(rnd):
            futs = [d.stub.Predict.future(reqs[k % len(reqs)], timeout=120) for k in range(32 * (rnd // 2 + 1))]
            got = []
            for k, fu in enumerate(futs):
                try:
                    y = out_array(fu.result().outputs["y"])
                    want = ref[0] + (ref[1] - ref[0]) * (k % len(reqs))
                    good = y.shape == (n, 1) and np.all(y == y[0, 0]) and y[0, 0] == want
                    got.append("OK" if good else "WRONG %r" % y[0, 0])
                except grpc.RpcError as e:
                    got.append(e.code().name)
            return got
        until_overflow(d, "gRPC", grpc_burst, "UNAVAILABLE")
        check("is full (2 requests waiting" in d.log(), "no queue-full line in the log", d)

        # REST :predict goes through the same queue: answered right or 503.
        rows = 100000
        bodies = [json.dumps({"inputs": {"x": [[float(k)]] * rows}}) for k in range(16)]

        def rest_one(k):
            c = http.client.HTTPConnection("127.0.0.1", rest, timeout=120)
            c.request("POST", "/v1/models/hpt:predict", body=bodies[k],
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = json.loads(r.read())
            c.close()
            if r.status == 503:
                return "503" if "is full" in data.get("error", "") else "503 %r" % data
            y = data.get("outputs")
            good = r.status == 200 and len(y) == rows and all(v == [ref[0] + (ref[1] - ref[0]) * k] for v in y)
            return "OK" if good else "WRONG %d" % r.status
        until_overflow(d, "REST", lambda rnd: all_at_once(rest_one, list(range(16))), "503")

        # A call whose deadline passes while it waits behind a large one.
        skipped = False
        for _ in range(10):
            big = threading.Thread(target=lambda: d.stub.Predict(hpt_request(np.zeros(2000000, np.float32)),
                                                                 timeout=120))
            big.start()
            codes = []
            for _ in range(20):
                try:
                    d.stub.Predict(hpt_request([1.0]), timeout=0.03)
                    codes.append("OK")
                except grpc.RpcError as e:
                    codes.append(e.code().name)
                time.sleep(0.005)
            big.join()
            check(set(codes) <= {"OK", "DEADLINE_EXCEEDED", "UNAVAILABLE"}, "small calls: %r" % codes, d)
            print("deadline round:", codes.count("OK"), "OK,", codes.count("DEADLINE_EXCEEDED"), "DEADLINE_EXCEEDED")
            time.sleep(0.1)
            if "DEADLINE_EXCEEDED" in codes and "deadline passed while queued, before it ran; skipped" in d.log():
                skipped = True
                break
        check(skipped, "no call was skipped for its deadline while queued", d)
        # Still serving: the small calls whose deadlines passed may still hold the
        # queue's two places until a worker skips them (slow on a loaded machine):
        # UNAVAILABLE (queue full) is retried, anything else is an answer.
        end, shape = time.monotonic() + 120, None
        while shape is None and time.monotonic() < end:
            try:
                shape = out_array(d.stub.Predict(hpt_request([3.0]), timeout=30).outputs["y"]).shape
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
                time.sleep(0.5)
        check(shape == (1, 1), "daemon stopped answering (queue still full after 120 s)", d)
        check(d.stop() == 0, "daemon did not exit 0", d)
    finally:
        d.close()


def crc32c(data):
    table = crc32c.table
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    crc32c.table.append(_c)


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(records):
    out = b""
    for r in records:
        hdr = struct.pack("<Q", len(r))
        out += hdr + struct.pack("<I", masked(hdr)) + r + struct.pack("<I", masked(r))
    return out


def warmup(tmp):
    lp = log_pb()
    check(crc32c(b"123456789") == 0xE3069283, "crc32c check value")
    base = os.path.join(tmp, "warm")
    shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(base, "123"))
    recs = []
    for vals in ([1.0, 2.0], np.zeros(3000000, np.float32)):
        pl = lp.PredictionLog()
        pl.predict_log.request.CopyFrom(hpt_request(vals))
        recs.append(pl.SerializeToString())
    cl = lp.PredictionLog()
    cl.classify_log.SetInParent()
    recs.append(cl.SerializeToString())
    wdir = os.path.join(base, "123", "assets.extra")
    os.makedirs(wdir)
    wfile = os.path.join(wdir, "tf_serving_warmup_requests")
    with open(wfile, "wb") as f:
        f.write(tfrecord(recs))
    d = Daemon(["--model_name=hpt", "--model_base_path=" + base, "--num_request_iterations_for_warmup=12"])
    try:
        pbh = pb.health
        seen_not_serving, t_end = 0, time.monotonic() + 60
        while time.monotonic() < t_end:
            st = d.stub.Check(pbh.HealthCheckRequest(service=""), timeout=5).status
            if st == 1:
                break
            seen_not_serving += 1
            time.sleep(0.01)
        log = d.log()
        check(st == 1, "never SERVING", d)
        m = re.search(r"warm-up of model hpt version 123: 2 request\(s\) x 12 from "
                      r"assets.extra/tf_serving_warmup_requests, 1 skipped \((\d+) ms\)", log)
        check(m is not None, "no warm-up line when health turned SERVING", d)
        check(seen_not_serving > 0, "health was never NOT_SERVING during a %s ms warm-up" % m.group(1), d)
        check("classify_log skipped" in log, "classify_log record not reported", d)
        print("warm-up: %s ms, health NOT_SERVING %d times before SERVING" % (m.group(1), seen_not_serving))
        check(d.stop() == 0, "daemon did not exit 0", d)
    finally:
        d.close()

    # A broken record fails the version's load, with the reason.
    data = bytearray(tfrecord(recs[:1]))
    data[-6] ^= 0x55
    with open(wfile, "wb") as f:
        f.write(bytes(data))
    d = Daemon(["--model_name=hpt", "--model_base_path=" + base])
    try:
        t_end = time.monotonic() + WAIT
        while time.monotonic() < t_end and "failed to load model hpt" not in d.log():
            time.sleep(0.05)
        check("data CRC mismatch" in d.log() and "tf_serving_warmup_requests" in d.log(),
              "broken warm-up file: no load failure naming it", d)
        r = pb.tfs.GetModelStatusRequest()
        r.model_spec.name = "hpt"
        s = d.stub.GetModelStatus(r, timeout=10).model_version_status[0]
        check(s.version == 123 and "CRC" in s.status.error_message,
              "GetModelStatus: %r" % s, d)
    finally:
        d.close()


def main():
    tmp = tempfile.mkdtemp(prefix="it_throughput_")
    try:
        batching(tmp)
        per_model_params(tmp)
        overflow_and_deadline()
        warmup(tmp)
    finally:
        shutil.rmtree(tmp)
    print("it_serve_throughput: ok")


if __name__ == "__main__":
    main()
