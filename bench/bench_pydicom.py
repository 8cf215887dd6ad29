#!/usr/bin/python3
"""Median ms of pydicom + numpy: bytes -> HU -> window 40/400 -> [0,1] float32."""
import io
import sys
import time
import warnings

import numpy as np
import pydicom

warnings.filterwarnings("ignore")
path, runs = sys.argv[1], int(sys.argv[2])
data = open(path, "rb").read()
lo, hi = np.float32(40 - 200), np.float32(40 + 200)
ts = []
for _ in range(runs):
    t0 = time.process_time()
    ds = pydicom.dcmread(io.BytesIO(data))
    hu = ds.pixel_array.astype(np.float32) * np.float32(float(ds.get("RescaleSlope", 1))) \
        + np.float32(float(ds.get("RescaleIntercept", 0)))
    w = (np.clip(hu, lo, hi) - lo) / (hi - lo)
    ts.append((time.process_time() - t0) * 1e3)
print("%.4f" % sorted(ts)[len(ts) // 2])
