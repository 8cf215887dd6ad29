"""onnx_worker: one build/onnx_conf_run process (the conformance worker,
protocol in tests/tools/onnx_conf_run.c) for the tests that import small
ONNX models built with onnx's helper and run them on numpy inputs."""
import os
import subprocess

import numpy as np

BIN = os.environ.get("DCM_BIN", "build")
WORKER = os.path.join(BIN, "onnx_conf_run")


class Worker:
    """One onnx_conf_run process."""

    def __init__(self):
        self.p = subprocess.Popen([WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)

    def run(self, model_path, work, feeds, out="y"):
        """(answer line, output array or None); feeds: (name, array) in graph-input
        order; work: a fresh folder (the converted model goes to work/sm)."""
        os.makedirs(work)
        for k, (_, a) in enumerate(feeds):
            np.save(os.path.join(work, "in_%d.npy" % k), a)
        line = "\t".join([model_path, work, str(len(feeds))] + [f[0] for f in feeds] +
                         ["1", out])
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ans = self.p.stdout.readline().rstrip("\n")
        if ans != "ok":
            return ans, None
        return ans, np.load(os.path.join(work, "out_0.npy"))

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def graph_has(work, *ops):
    """Per op name: whether the converted graph in work/sm names it."""
    with open(os.path.join(work, "sm", "saved_model.pb"), "rb") as f:
        pb = f.read()
    return tuple(op.encode() in pb for op in ops)
