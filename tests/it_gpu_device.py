"""it_gpu_device: device choice and the GPU diagnosis, on whatever machine runs it.

1. `dcmserve info` and `dcmserve info --json` (parsed) agree with each other
   and with the machine: version, CUDA on/off in the build, the core count,
   the CPU kernels (from /proc/cpuinfo's flags), and, with no NVIDIA device
   nodes, no GPU and the reason "no NVIDIA device nodes" (or "no CUDA
   backend" in a build without CUDA).
2. Where no GPU is usable (info says so): `serve --device=cuda`, `run
   --device=cuda` and `benchmark --device=cuda` refuse to start with that
   diagnosis on stderr; `serve --device=auto` serves half_plus_two on the CPU
   and logs exactly one line saying why; --device=cpu says it was chosen.
   A bad --device value is refused naming it.
3. --precision: fp16 and unknown values refused by serve, run and benchmark
   (exit 2, the reason on stderr); tf32 on the CPU serves and logs that it has
   no effect there.
Expected answers come from info's own report (the same probe the daemon
runs) and from half_plus_two's definition y = 0.5 x + 2.
"""
import glob
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_client import DCMSERVE, HPT, Daemon, check, float_tensor, gen_protos, tensor_values  # noqa: E402

pb = gen_protos()


def dcm(*args, timeout=60):
    p = subprocess.run([DCMSERVE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def cpu_kernels():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    return "c"


def test_info():
    rc, text, err = dcm("info")
    check(rc == 0, "info: rc=%d %s" % (rc, err))
    rc, js, err = dcm("info", "--json")
    check(rc == 0, "info --json: rc=%d %s" % (rc, err))
    j = json.loads(js)
    lines = text.splitlines()
    b = j["build"]
    want = "dcmserve %s (commit %s, build %s, CUDA %s, sanitizers %s)" % (
        j["version"], b["commit"], b["type"], "on" if b["cuda"] else "off",
        "on" if b["sanitize"] else "off")
    check(lines[0] == want, "info first line %r, want %r" % (lines[0], want))
    check(re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?|unknown", b["commit"]), "commit %r" % b["commit"])
    rc, v, _ = dcm("serve", "--version")
    check(v.strip() == lines[0], "serve --version %r, info %r" % (v, lines[0]))
    built = j["build"]["cuda"]
    check(isinstance(built, bool), "build.cuda %r" % built)
    check(lines[1].startswith("build: CUDA on" if built else "build: CUDA off"), lines[1])
    if built:
        check(j["build"]["cuda_runtime"] and j["build"]["compute_capabilities"],
              "build without runtime/capabilities: %r" % j["build"])
        for cap in j["build"]["compute_capabilities"]:
            check(cap in lines[1], "%s not in %r" % (cap, lines[1]))
    check(j["cpu"]["cores"] == os.cpu_count(), "cores %r vs %d" % (j["cpu"]["cores"], os.cpu_count()))
    if not os.environ.get("DCMSERVE_GEMM"):
        check(j["cpu"]["kernels"] == cpu_kernels(), "cpu kernels %r, cpuinfo says %r"
              % (j["cpu"]["kernels"], cpu_kernels()))
    check("cpu: %d cores, kernels use %s" % (j["cpu"]["cores"], j["cpu"]["kernels"]) in lines,
          "cpu line missing: %r" % lines)
    check(j["usable_gpus"] == sum(1 for g in j["gpus"] if g["usable"]), "usable_gpus %r" % j)
    nodes = glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/dxg")
    if not nodes:
        check(j["gpus"] == [] and j["usable_gpus"] == 0, "GPUs without device nodes: %r" % j)
        want = "no NVIDIA device nodes" if built else "no CUDA backend"
        check(want in j["reason"], "reason %r lacks %r" % (j["reason"], want))
    if j["usable_gpus"] == 0:
        check("gpu: none usable: " + j["reason"] in lines, "text lacks the reason: %r" % lines)
    else:
        for g in j["gpus"]:
            check(any(l.startswith("gpu %d: %s" % (g["index"], g["name"])) for l in lines),
                  "no line for GPU %r" % g)
    return j


def predict_ok(d):
    r = pb.tfs.PredictRequest()
    r.model_spec.name = "hpt"
    x = np.array([1.0, 2.0, 5.0], dtype=np.float32)
    r.inputs["x"].CopyFrom(float_tensor(x.tolist(), [3, 1]))
    got = np.array(tensor_values(d.stub.Predict(r, timeout=10).outputs["y"]), dtype=np.float32)
    check(np.allclose(got, 0.5 * x + 2.0), "Predict y=%s" % got, d)


def test_no_gpu(reason):
    model = ["--model_name=hpt", "--model_base_path=" + HPT]
    for cmd in (["serve", "--port=0", "--bind_address=127.0.0.1"] + model,
                ["run", "--dir=" + os.path.join(HPT, "00000123"), "--inputs=x=/nonexistent.npy"],
                ["benchmark", "--dir=" + HPT]):
        for dev in ("cuda", "cuda:0", "gpu"):
            rc, out, err = dcm(*(cmd + ["--device=" + dev]))
            check(rc == 1, "%s --device=%s: rc=%d (want 1) %s" % (cmd[0], dev, rc, err))
            want = "dcmserve %s: --device=%s: no usable GPU: %s" % (cmd[0], dev.replace("gpu", "cuda"), reason)
            check(want in err, "%s --device=%s: stderr %r lacks %r" % (cmd[0], dev, err, want))
            check("listening" not in out, "%s --device=%s served: %r" % (cmd[0], dev, out))
    rc, out, err = dcm("serve", "--port=0", "--device=tpu", *model)
    check(rc == 2 and '--device: expected auto, cpu, cuda or cuda:N' in err and '"tpu"' in err,
          "--device=tpu: rc=%d %r" % (rc, err))

    for dev, want in ((None, "device auto: CPU, no usable GPU: " + reason),
                      ("auto", "device auto: CPU, no usable GPU: " + reason),
                      ("cpu", "device cpu: chosen with --device=cpu")):
        d = Daemon(model + (["--device=" + dev] if dev else []))
        try:
            d.wait_health(1)
            predict_ok(d)
            log = d.log()
            n = len([l for l in log.splitlines() if re.search(r"INFO +device ", l)])
            check(n == 1, "--device=%s: %d device lines\n%s" % (dev, n, log))
            check(want in log, "--device=%s: log lacks %r\n%s" % (dev, want, log))
            check(d.stop() == 0, "daemon did not exit 0", d)
        finally:
            d.close()


def test_precision():
    """--precision: fp16 refused (not implemented) and a bad value refused, by
    serve, run and benchmark alike (exit 2, the reason on stderr); tf32 with the
    CPU chosen serves, logging that it has no effect there."""
    model = ["--model_name=hpt", "--model_base_path=" + HPT]
    for cmd in (["serve", "--port=0", "--bind_address=127.0.0.1"] + model,
                ["run", "--dir=" + os.path.join(HPT, "00000123"), "--inputs=x=/nonexistent.npy"],
                ["benchmark", "--dir=" + HPT]):
        for val, want in (("fp16", "--precision=fp16 is not implemented"),
                          ("fp64", '--precision: expected fp32, tf32 or fp16, got "fp64"')):
            rc, out, err = dcm(*(cmd + ["--device=cpu", "--precision=" + val]))
            check(rc == 2, "%s --precision=%s: rc=%d (want 2) %s" % (cmd[0], val, rc, err))
            check("dcmserve %s: %s" % (cmd[0], want) in err,
                  "%s --precision=%s: stderr %r lacks %r" % (cmd[0], val, err, want))
            check("listening" not in out, "%s --precision=%s served: %r" % (cmd[0], val, out))
    d = Daemon(model + ["--device=cpu", "--precision=tf32"])
    try:
        d.wait_health(1)
        predict_ok(d)
        log = d.log()
        want = "--precision=tf32 has no effect: the CPU computes in FP32"
        check(want in log, "log lacks %r\n%s" % (want, log))
        check(d.stop() == 0, "daemon did not exit 0", d)
    finally:
        d.close()


def main():
    j = test_info()
    test_precision()
    if j["usable_gpus"] == 0:
        test_no_gpu(j["reason"])
    else:
        print("it_gpu_device: %d usable GPU(s): the no-GPU start-up checks do not apply here"
              % j["usable_gpus"])
    print("it_gpu_device: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
