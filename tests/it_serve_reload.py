"""it_serve_reload: hot reload while a client sends Predict in a loop.

1. A new version copied into the base path (plain copytree, file by file)
   is picked up within 2 poll intervals (plus one for a poll thread that a
   loaded machine wakes late: the time to the daemon's "loading" line, which
   leaves out the load itself) and serves, with zero failed requests.
2. A broken newer version (garbage saved_model.pb): the previous version keeps
   serving, GetModelStatus reports the failed version with its error, and the
   failure is logged.
3. Deleting the broken folder and copying a good one later loads it.
Expected y = 0.5 * x + 2 (half_plus_two's definition).
"""
import calendar
import os
import shutil
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, WAIT, Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

pb = gen_protos()
POLL = 1.0
SRC_VERSION = os.path.join(HPT, "00000123")


class Looper(threading.Thread):
    """Sends Predict back to back; records (time, version) and every failure."""

    def __init__(self, stub):
        super().__init__(daemon=True)
        self.stub = stub
        self.stop = threading.Event()
        self.ok = 0
        self.failures = []
        self.first_seen = {}
        self.req = pb.tfs.PredictRequest()
        self.req.model_spec.name = "m"
        self.req.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))

    def run(self):
        while not self.stop.is_set():
            try:
                r = self.stub.Predict(self.req, timeout=10)
                got = tensor_values(r.outputs["y"])
                if not np.allclose(got, [2.5, 3.0, 4.5]):
                    self.failures.append("wrong values %s" % got)
                v = r.model_spec.version.value
                self.first_seen.setdefault(v, time.time())
                self.ok += 1
            except grpc.RpcError as e:
                self.failures.append("%s: %s" % (e.code(), e.details()))


def wait_for(pred, timeout):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.01)
    return False


def logged_at(d, words):
    """The wall-clock time (s since the epoch) of the daemon's first log line
    that contains words, from the line's UTC time stamp; None if none."""
    for line in d.log().splitlines():
        if words in line:
            stamp = line.split(" ", 1)[0]
            t = calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S"))
            return t + float("0" + stamp[19:].rstrip("Z"))
    return None


def main():
    base = tempfile.mkdtemp(prefix="dcm_reload_")
    shutil.copytree(SRC_VERSION, os.path.join(base, "1"))
    d = Daemon(["--model_name=m", "--model_base_path=" + base, "--file_system_poll_wait_seconds=%g" % POLL])
    loop = None
    try:
        d.wait_health(1)
        loop = Looper(d.stub)
        loop.start()
        check(wait_for(lambda: 1 in loop.first_seen, WAIT), "version 1 never served", d)
        time.sleep(0.3)

        # --- 1. new version while requests flow ---
        shutil.copytree(SRC_VERSION, os.path.join(base, "2"))
        t_copied = time.time()
        check(wait_for(lambda: 2 in loop.first_seen, WAIT), "version 2 never served", d)
        found = logged_at(d, "loading model m version 2 ")
        check(found is not None and found - t_copied <= 3 * POLL,
              "version 2 picked up %s s after its copy (> 3 poll intervals)"
              % (None if found is None else round(found - t_copied, 2)), d)
        print("version 2: loading %.2f s, serving %.2f s after its copy"
              % (found - t_copied, loop.first_seen[2] - t_copied))
        check(wait_for(lambda: "unloaded model m version 1" in d.log(), WAIT), "version 1 not unloaded", d)
        time.sleep(0.3)
        check(not loop.failures, "requests failed during the swap: %s" % loop.failures[:5], d)

        # --- 2. broken newer version: 2 keeps serving, status reports 3 ---
        broken = os.path.join(base, "3")
        shutil.copytree(SRC_VERSION, broken)
        with open(os.path.join(broken, "saved_model.pb"), "wb") as f:
            f.write(b"\x0a\xff\xff\xff\x0fthis is not a SavedModel")
        check(wait_for(lambda: "failed to load model m version 3" in d.log(), WAIT), "no load failure logged", d)
        st = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(model_spec=pb.tfs.ModelSpec(name="m")), timeout=5)
        by_v = {s.version: s for s in st.model_version_status}
        check(3 in by_v and by_v[3].state == pb.tfs.ModelVersionStatus.END and by_v[3].status.error_code != 0
              and by_v[3].status.error_message, "status of broken version 3: %s" % st, d)
        check(2 in by_v and by_v[2].state == pb.tfs.ModelVersionStatus.AVAILABLE, "version 2 not AVAILABLE: %s" % st, d)
        n_before = loop.ok
        time.sleep(2 * POLL)
        check(wait_for(lambda: loop.ok > n_before, WAIT), "requests stopped flowing", d)
        check(3 not in loop.first_seen, "broken version 3 answered requests", d)
        check(not loop.failures, "requests failed with a broken version present: %s" % loop.failures[:5], d)
        h = d.stub.Check(pb.health.HealthCheckRequest(), timeout=5)
        check(h.status == pb.health.HealthCheckResponse.SERVING, "health with a broken version", d)
        # Failed once, not retried while the folder is unchanged.
        time.sleep(2 * POLL)
        check(d.log().count("failed to load model m version 3") == 1, "broken version retried without change", d)

        # --- 3. replace the broken folder with a good version 4 ---
        shutil.rmtree(broken)
        shutil.copytree(SRC_VERSION, os.path.join(base, "4"))
        check(wait_for(lambda: 4 in loop.first_seen, WAIT), "version 4 not served", d)
        time.sleep(0.3)
        check(not loop.failures, "failures: %s" % loop.failures[:5], d)
        # --- 4. a newer version whose variables data shard is cut short ---
        short = os.path.join(tmp_short := tempfile.mkdtemp(prefix="dcm_short_"), "5")
        shutil.copytree(SRC_VERSION, short)
        shard = os.path.join(short, "variables", "variables.data-00000-of-00001")
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) - 4)
        os.rename(short, os.path.join(base, "5"))  # appears at once, complete-looking
        shutil.rmtree(tmp_short, ignore_errors=True)
        check(wait_for(lambda: "failed to load model m version 5" in d.log(), WAIT), "short shard loaded?", d)
        st = d.stub.GetModelStatus(pb.tfs.GetModelStatusRequest(model_spec=pb.tfs.ModelSpec(name="m")), timeout=5)
        by_v = {s.version: s for s in st.model_version_status}
        check(5 in by_v and by_v[5].status.error_code != 0 and "variables" in by_v[5].status.error_message,
              "status of version 5: %s" % st, d)
        check(by_v[4].state == pb.tfs.ModelVersionStatus.AVAILABLE, "version 4 not kept: %s" % st, d)
        time.sleep(POLL)
        check(5 not in loop.first_seen and not loop.failures, "failures: %s" % loop.failures[:5], d)

        loop.stop.set()
        loop.join()
        check(loop.ok > 50, "only %d requests made it" % loop.ok, d)
        check(d.stop() == 0, "exit code", d)
        if os.environ.get("SHOWLOG"):
            print(d.log())
    finally:
        if loop:
            loop.stop.set()
        d.close()
        shutil.rmtree(base, ignore_errors=True)
    print("it_serve_reload: ok (%d requests, 0 failed)" % loop.ok)


if __name__ == "__main__":
    main()
