#!/usr/bin/python3
"""Makes 512x512 CT frames in each compressed syntax (gdcmconv) and times
pydicom + GDCM decoding them (median ms per frame, one thread; wall clock
and thread CPU time).
Usage: bench_codecs.py OUTDIR [repeats] -> writes OUTDIR/manifest.tsv and
prints "name wall_ms cpu_ms" for pydicom + GDCM."""
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import pydicom
from pydicom.pixel_data_handlers import gdcm_handler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "tools"))
from dump_frames import DATA, KIND, write_ref  # noqa: E402
from gen_streams import native_ds  # noqa: E402

warnings.filterwarnings("ignore")
out = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 21
os.makedirs(out, exist_ok=True)
ct = pydicom.dcmread(os.path.join(DATA, "CT_small.dcm")).pixel_array.astype(np.int64)
img = np.clip(np.tile(ct, (4, 4)) + 1024, 0, 4095)  # 512x512, 12 bits stored
ds = native_ds(img, 12, False, "MONOCHROME2")
src = os.path.join(out, "native.dcm")
ds.save_as(src, write_like_original=False)
lines = []
for tag, args in (("jpeg-lossless", ["-J"]), ("jpeg-ls", ["-L"]), ("j2k", ["-K"]),
                  ("rle", ["-R"])):
    dst = os.path.join(out, tag + ".dcm")
    subprocess.run(["gdcmconv", *args, src, dst], check=True, capture_output=True)
    c = pydicom.dcmread(dst)
    frame = next(pydicom.encaps.generate_pixel_data_frame(c.PixelData, 1))
    with open(os.path.join(out, tag + ".bin"), "wb") as f:
        f.write(frame)
    write_ref(os.path.join(out, tag + ".ref"), img, 16, 12)
    lines.append("\t".join(str(x) for x in (
        tag, KIND[str(c.file_meta.TransferSyntaxUID)], 512, 512, 1, 16, 12, 0, 0,
        "MONOCHROME2", 0, 0, tag + ".bin", tag + ".ref", "bench")))
    t, cpu = [], []
    for _ in range(reps):
        a, ac = time.perf_counter(), time.thread_time()
        gdcm_handler.get_pixeldata(c)
        t.append((time.perf_counter() - a) * 1e3)
        cpu.append((time.thread_time() - ac) * 1e3)
    print(f"{tag} {statistics.median(t):.3f} {statistics.median(cpu):.3f}")
with open(os.path.join(out, "manifest.tsv"), "w") as f:
    f.write("\n".join(lines) + "\n")
