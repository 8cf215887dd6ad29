#!/bin/sh
# Benchmark: what refusing an awkward series costs against decoding a good
# one, in process on one thread (dcm_volume_decode, the code of
# DcmDecodeVolume, files already in memory: no gRPC, no file reading), median
# CPU ms over RUNS runs each. The good series: N slices of 512x512 CT
# (bench/bench_series.py's series); the awkward ones are it with one change:
# its last file of another series, slice N/2 left out, slice 3 twice, every
# position shifted sideways along z (tilt), slice N/2 turned (orientation).
# The pixels column is the pixel module's own counter (dcm_pixels_decoded)
# per run: 0 means no pixel was decoded.
# Usage: bench/bench_series_refuse.sh [BUILD_DIR] [N] [RUNS]
set -eu
BUILD=${1:-build}
N=${2:-140}
RUNS=${3:-9}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -I"$SRC/common" -I"$SRC/runtime/dicom" -I"$SRC/kernels" \
   "$SRC/bench/bench_series_refuse.c" "$BUILD/libdcm_dicom.a" "$BUILD/libdcm_kernels.a" \
   "$BUILD/libdcm_common.a" \
   $(pkg-config --libs zlib libopenjp2 libjpeg charls) -lm -lpthread -o "$TMP/bench" 2>/dev/null ||
cc -O2 -std=c11 -D_GNU_SOURCE -I"$SRC/common" -I"$SRC/runtime/dicom" -I"$SRC/kernels" \
   "$SRC/bench/bench_series_refuse.c" -Wl,--start-group "$BUILD"/libdcm_dicom.a \
   "$BUILD"/libdcm_kernels.a "$BUILD"/libdcm_common.a -Wl,--end-group \
   $(pkg-config --libs zlib libopenjp2 libjpeg charls) -lm -lpthread -o "$TMP/bench"
/usr/bin/python3 "$SRC/bench/make_inputs.py" "$TMP" > /dev/null
/usr/bin/python3 "$SRC/bench/bench_series.py" make "$TMP/ct_512.dcm" "$TMP/good" "$N"
/usr/bin/python3 - "$TMP" "$N" <<'PY'
import os, shutil, sys
import pydicom
from pydicom.uid import generate_uid
tmp, n = sys.argv[1], int(sys.argv[2])
good = os.path.join(tmp, "good")
names = sorted(os.listdir(good))
def variant(name, edit=None, drop=(), extra=None):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    for k, f in enumerate(names):
        if k in drop:
            continue
        if edit is None:
            shutil.copy(os.path.join(good, f), os.path.join(d, f))
            continue
        ds = pydicom.dcmread(os.path.join(good, f))
        if edit(k, ds):
            ds.save_as(os.path.join(d, f))
        else:
            shutil.copy(os.path.join(good, f), os.path.join(d, f))
    if extra:
        extra(d)
def mixed(k, ds):
    if k != n - 1:
        return False
    ds.SeriesInstanceUID = generate_uid()
    return True
variant("mixed_series", mixed)
variant("missing_slice", drop=(n // 2,))
def dup(d):
    ds = pydicom.dcmread(os.path.join(good, names[3]))
    ds.SOPInstanceUID = generate_uid()
    ds.save_as(os.path.join(d, "zzzz.dcm"))
variant("duplicate_position", extra=dup)
def tilt(k, ds):
    p = [float(x) for x in ds.ImagePositionPatient]
    p[1] += 0.5 * p[2]
    ds.ImagePositionPatient = ["%.4f" % x for x in p]
    return True
variant("tilted_gantry", tilt)
def ori(k, ds):
    if k != n // 2:
        return False
    ds.ImageOrientationPatient = ["1", "0", "0", "0", "0.99", "0.141067"]
    return True
variant("mixed_orientation", ori)
PY
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| series | median ms | of the good one | pixels decoded per run | answer |"
echo "|---|---|---|---|---|"
"$TMP/bench" "$RUNS" "$TMP/good" "mixed series=$TMP/mixed_series" \
    "missing slice=$TMP/missing_slice" "duplicate position=$TMP/duplicate_position" \
    "tilted gantry=$TMP/tilted_gantry" "mixed orientation=$TMP/mixed_orientation"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
