"""it_serve_cancel: a call whose deadline passes stops its work.

Measures how long one large Predict takes end to end, then repeats it with
deadlines at fractions of that time. Every such call must end in
DEADLINE_EXCEEDED (or succeed if it was quick), the daemon must report at
least once (debug log) that it skipped or stopped the work of a call whose
deadline had passed, and it must keep answering afterwards.
"""
import os
import sys
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import HPT, Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

pb = gen_protos()


def main():
    d = Daemon(["--model_name=m", "--model_base_path=" + HPT, "--log_level=debug", "--grpc_max_threads=1"])
    try:
        d.wait_health(1)
        n = 2_000_000
        req = pb.tfs.PredictRequest()
        req.model_spec.name = "m"
        req.inputs["x"].CopyFrom(float_tensor(np.full(n, 2.0, np.float32), [n, 1], content=True))
        t0 = time.time()
        r = d.stub.Predict(req, timeout=120)
        full = time.time() - t0
        check(abs(r.outputs["y"].float_val[0] - 3.0) < 1e-6, "y = 0.5 * 2 + 2", d)
        stopped = 0
        for attempt in range(3):
            for frac in (0.2, 0.35, 0.5, 0.65, 0.8):
                try:
                    d.stub.Predict(req, timeout=full * frac)
                except grpc.RpcError as e:
                    check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, "got %s" % e.code(), d)
            time.sleep(0.5)
            log = d.log()
            stopped = log.count("stopped, the call was cancelled") + log.count("deadline passed before it ran")
            if stopped:
                break
        check(stopped > 0, "no cancelled call was skipped or stopped (full call %.2fs)" % full, d)
        small = pb.tfs.PredictRequest()
        small.model_spec.name = "m"
        small.inputs["x"].CopyFrom(float_tensor([1.0], [1, 1]))
        check(np.allclose(tensor_values(d.stub.Predict(small, timeout=10).outputs["y"]), [2.5]), "after", d)
        check(d.stop() == 0, "exit code", d)
        print("it_serve_cancel: ok (full call %.2fs, %d cancelled call(s) skipped or stopped)" % (full, stopped))
    finally:
        d.close()


if __name__ == "__main__":
    main()
