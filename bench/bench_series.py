#!/usr/bin/python3
"""bench_series.py - a whole CT series in, one HU volume out: dcmserve's daemon
(DcmDecodeVolume in front of a ReduceMax, so that the answer is one number and
only the volume is timed) against pydicom + numpy, per slice, at several series
lengths. Run by bench/bench_series.sh; see there for what is measured.

    bench_series.py ours BUILD TMP N...     the daemon, one request per length
    bench_series.py pydicom DIR RUNS        one length, pydicom + numpy (a child)
"""
import copy
import io
import os
import resource
import subprocess
import sys
import time

import numpy as np


def make_series(ct512, out, n):
    """n files of one series: the 512x512 CT with its position moved along z."""
    import pydicom
    from pydicom.uid import generate_uid
    base = pydicom.dcmread(ct512)
    series = generate_uid()
    os.makedirs(out, exist_ok=True)
    for k in range(n):
        ds = copy.deepcopy(base)
        ds.SeriesInstanceUID = series
        ds.SOPInstanceUID = generate_uid()
        ds.ImageOrientationPatient = ["1", "0", "0", "0", "1", "0"]
        ds.ImagePositionPatient = ["-250", "-250", "%.2f" % (1.25 * k)]
        ds.InstanceNumber = str(k + 1)
        ds.save_as(os.path.join(out, "%04d.dcm" % k), write_like_original=False)


def files_of(d):
    return [os.path.join(d, f) for f in sorted(os.listdir(d))]


def pydicom_volume(blobs):
    """What a client writes: read, HU in float32, sort by position, stack."""
    import pydicom
    sl = []
    for b in blobs:
        ds = pydicom.dcmread(io.BytesIO(b))
        hu = ds.pixel_array.astype(np.float32) * np.float32(float(ds.RescaleSlope)) + \
            np.float32(float(ds.RescaleIntercept))
        iop = np.array([float(x) for x in ds.ImageOrientationPatient])
        sl.append((float(np.dot([float(x) for x in ds.ImagePositionPatient],
                                np.cross(iop[:3], iop[3:]))), hu))
    sl.sort(key=lambda s: s[0])
    return np.stack([s[1] for s in sl])


def pydicom_main(d, runs):
    blobs = []
    for p in files_of(d):
        with open(p, "rb") as f:
            blobs.append(f.read())
    pydicom_volume(blobs)  # warm-up: imports, handlers
    r0, c0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    for _ in range(runs):
        v = pydicom_volume(blobs)
    c1, r1 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    assert v.shape == (len(blobs), 512, 512)
    print("%.6f %.1f" % ((c1 - c0) * 1000 / runs, (r1.ru_minflt - r0.ru_minflt) / runs))


def proc_stat(pid):
    """(CPU seconds, minor faults) of a process, all its threads."""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(v[11]) + int(v[12])) / tick, int(v[7])


def run_cpu(dcm, mdir, paths, out):
    """CPU seconds and minor faults of one `dcmserve run` over paths (the least of 3)."""
    best = None
    for _ in range(3):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([dcm, "run", "--dir", mdir, "--input_files", "image=" + ",".join(paths),
                        "--outdir", out, "--overwrite"], check=True,
                       stdout=subprocess.DEVNULL)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        v = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt)
        best = v if best is None or v[0] < best[0] else best
    return best


def ours_main(build, tmp, lengths):
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(src, "tests"))
    os.environ.setdefault("DCMSERVE", os.path.join(os.path.abspath(build), "dcmserve"))
    import grpc
    import onnx
    import pydicom
    from onnx import TensorProto, helper
    from pydicom.uid import generate_uid
    import serve_client as sc
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, "D", "H", "W", 1])
    y = helper.make_tensor_value_info("max", TensorProto.FLOAT, [])
    g = helper.make_graph([helper.make_node("ReduceMax", ["image"], ["max"], keepdims=0)],
                          "vmax", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(tmp, "vmax.onnx"))
    mdir = os.path.join(tmp, "vmax", "1")
    subprocess.run([os.environ["DCMSERVE"], "import-onnx", os.path.join(tmp, "vmax.onnx"),
                    "--output_dir", mdir, "--dicom_input", "image", "--dicom_volume",
                    "--layout", "NHWC"],
                   check=True, stdout=subprocess.DEVNULL)
    pb = sc.gen_protos()
    d = sc.Daemon(["--model_name=vmax", "--model_base_path=" + os.path.dirname(mdir),
                   "--tensorflow_intra_op_parallelism=1", "--max_message_bytes=2147483647"])
    print("| slices | dcmserve ms/slice | pydicom + numpy ms/slice | dcmserve page faults "
          "/ request | volume bytes / 4 KiB | faults / (volume / 4 KiB) | `dcmserve run`, "
          "ms per added slice | `dcmserve run`, faults per added slice | mixed series refused, "
          "ms / request (% of a good one) |")
    print("|---|---|---|---|---|---|---|---|---|")
    first = files_of(os.path.join(tmp, "s%d" % lengths[0]))[:1]
    run1 = run_cpu(os.environ["DCMSERVE"], mdir, first, os.path.join(tmp, "out"))
    try:
        d.wait_health()
        for n in lengths:
            sd = os.path.join(tmp, "s%d" % n)
            req = pb.tfs.PredictRequest()
            req.model_spec.name = "vmax"
            t = req.inputs["image"]
            t.dtype = pb.fw.DT_STRING
            t.tensor_shape.dim.add().size = n
            for p in files_of(sd):
                with open(p, "rb") as f:
                    t.string_val.append(f.read())
            runs = max(3, 300 // n)
            for _ in range(2):  # warm-up: the buffer pool learns the size
                d.stub.Predict(req, timeout=600)
            c0, f0 = proc_stat(d.proc.pid)
            for _ in range(runs):
                d.stub.Predict(req, timeout=600)
            c1, f1 = proc_stat(d.proc.pid)
            ours_ms = (c1 - c0) * 1000 / runs / n
            faults = (f1 - f0) / runs
            # the same request with its last file of another series: refused
            last = pydicom.dcmread(io.BytesIO(t.string_val[-1]))
            last.SeriesInstanceUID = generate_uid()
            buf = io.BytesIO()
            last.save_as(buf, write_like_original=False)
            t.string_val[-1] = buf.getvalue()
            c0, _ = proc_stat(d.proc.pid)
            for _ in range(runs):
                try:
                    d.stub.Predict(req, timeout=600)
                except grpc.RpcError as e:
                    assert "mixed series" in e.details(), e.details()
            c1, _ = proc_stat(d.proc.pid)
            refused_ms = (c1 - c0) * 1000 / runs
            py = subprocess.run([sys.executable, os.path.abspath(__file__), "pydicom", sd,
                                 str(max(2, 100 // n))], check=True, capture_output=True,
                                text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
            py_ms = float(py.stdout.split()[0]) / n
            pages = n * 512 * 512 * 4 / 4096
            marg = "| - | -"
            if n > 1:
                rn = run_cpu(os.environ["DCMSERVE"], mdir, files_of(sd), os.path.join(tmp, "out"))
                marg = "| %.3f | %.0f" % ((rn[0] - run1[0]) * 1000 / (n - 1),
                                          (rn[1] - run1[1]) / (n - 1))
            print("| %d | %.3f | %.3f | %.0f | %.0f | %.2f %s | %.1f (%.0f %%) |" % (
                n, ours_ms, py_ms, faults, pages, faults / pages, marg, refused_ms,
                100 * refused_ms / (ours_ms * n)), flush=True)
    finally:
        d.close()


if __name__ == "__main__":
    if sys.argv[1] == "pydicom":
        pydicom_main(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "make":
        make_series(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        ours_main(sys.argv[2], sys.argv[3], [int(a) for a in sys.argv[4:]])
