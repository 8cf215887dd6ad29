"""it_serve_leaks: the daemon under valgrind across 1,000 requests (TF Serving
Predict and KServe ModelInfer, a few failing on purpose) and 3 hot reloads,
then SIGTERM: exit code 0, no invalid memory access, nothing definitely lost
(gRPC's still-reachable globals do not count). Skipped for the ASan build,
whose own leak check runs in check_serve_grpc instead.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, HPT, Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

pb = gen_protos()


def main():
    ldd = subprocess.run(["ldd", DCMSERVE], capture_output=True, text=True).stdout
    if "libasan" in ldd or shutil.which("valgrind") is None:
        print("it_serve_leaks: skipped (ASan build or no valgrind)")
        return
    tmp = tempfile.mkdtemp(prefix="dcm_leaks_")
    base = os.path.join(tmp, "m")
    src = os.path.join(HPT, "00000123")
    shutil.copytree(src, os.path.join(base, "1"))
    vlog = os.path.join(tmp, "valgrind.log")
    d = Daemon(["--model_name=m", "--model_base_path=" + base, "--file_system_poll_wait_seconds=0.3",
                "--grpc_max_threads=2"],
               wrapper=["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite",
                        "--error-exitcode=99", "--log-file=" + vlog],
               start_timeout=120)
    try:
        # Valgrind slows start-up and loading tens of times: more than the
        # default START_TIMEOUT.
        d.wait_health(1, timeout=120)
        req = pb.tfs.PredictRequest()
        req.model_spec.name = "m"
        req.inputs["x"].CopyFrom(float_tensor([1.0, 2.0, 5.0], [3, 1]))
        kreq = pb.ks.ModelInferRequest(model_name="m")
        kreq.inputs.add(name="x", datatype="FP32", shape=[3, 1])
        kreq.raw_input_contents.append(np.array([1, 2, 5], dtype="<f4").tobytes())
        bad = pb.tfs.PredictRequest()
        bad.model_spec.name = "m"
        bad.inputs["x"].CopyFrom(float_tensor([1.0, 2.0], [1, 2]))
        version, done = 1, 0
        for i in range(1000):
            if i in (250, 500, 750):
                version += 1
                shutil.copytree(src, os.path.join(base, str(version)))
                t0 = time.time()
                while time.time() - t0 < 60:
                    r = d.stub.Predict(req, timeout=60)
                    done += 1
                    if r.model_spec.version.value == version:
                        break
                    time.sleep(0.05)
                check(r.model_spec.version.value == version, "version %d never served" % version, d)
            if i % 10 == 3:
                try:
                    d.stub.Predict(bad, timeout=60)
                    raise AssertionError("bad request accepted")
                except grpc.RpcError as e:
                    check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "bad request: %s" % e.code(), d)
            elif i % 2:
                r = d.stub.ModelInfer(kreq, timeout=60)
                got = np.frombuffer(r.raw_output_contents[0], dtype="<f4")
                check(np.allclose(got, [2.5, 3.0, 4.5]), "ModelInfer %s" % got, d)
            else:
                r = d.stub.Predict(req, timeout=60)
                check(np.allclose(tensor_values(r.outputs["y"]), [2.5, 3.0, 4.5]), "Predict", d)
            done += 1
        rc = d.stop(timeout=120)
        with open(vlog) as f:
            vtext = f.read()
        summary = "\n".join(l for l in vtext.splitlines() if re.search(r"lost:|ERROR SUMMARY|reachable:", l))
        check(rc == 0, "daemon under valgrind exited %d\n%s" % (rc, vtext[-4000:]), d)
        m = re.search(r"definitely lost: ([\d,]+) bytes", vtext)
        check(m is None or m.group(1) == "0", "definitely lost:\n%s" % summary, d)
        check(re.search(r"ERROR SUMMARY: 0 errors", vtext) is not None, "valgrind errors:\n%s" % vtext[-4000:], d)
        print("it_serve_leaks: %d requests, 3 reloads, valgrind clean:\n%s" % (done, summary))
    finally:
        d.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
