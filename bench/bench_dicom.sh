#!/bin/sh
# Benchmark: DICOM bytes -> HU -> window 40/400 -> [0,1] float32, median ms per
# file over RUNS runs, one thread: dcmserve's C code vs pydicom + numpy (+ GDCM
# for compressed files). Times are CPU time of the process
# (CLOCK_PROCESS_CPUTIME_ID / time.process_time: all threads of the process,
# so a multi-threaded decoder is not flattered), so that other load on a shared
# machine does not count; files are read into memory once, outside the timing.
# Usage: bench/bench_dicom.sh [BUILD_DIR] [RUNS]   (run from the repo root,
# after `make`; results go to stdout as a markdown table).
set -eu
BUILD=${1:-build}
RUNS=${2:-200}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cc -O2 -std=c11 -D_GNU_SOURCE -I"$SRC/common" -I"$SRC/runtime" -I"$SRC/kernels" \
   "$SRC/bench/bench_dicom.c" "$BUILD/libdcm_core.a" \
   $(pkg-config --libs zlib libopenjp2 libjpeg charls libpng) -lm -lpthread -o "$TMP/bench_dicom"
/usr/bin/python3 "$SRC/bench/make_inputs.py" "$TMP"
PYD=$(/usr/bin/python3 -c 'import os, pydicom; print(os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files"))')
echo "| file | ours (ms) | pydicom + numpy (ms) |"
echo "|---|---|---|"
for f in "$TMP/ct_512.dcm" "$TMP/ct_1024.dcm" "$TMP/ct_512_20frames.dcm" \
         "$TMP/ct_512_rle.dcm" "$TMP/ct_512_jpegls.dcm" "$TMP/ct_512_j2k.dcm" \
         "$TMP/ct_512_jpeg_lossless.dcm" "$PYD/CT_small.dcm" "$PYD/MR_small.dcm"; do
    [ -f "$f" ] || continue
    ours=$(OPENBLAS_NUM_THREADS=1 "$TMP/bench_dicom" "$f" "$RUNS")
    py=$(OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$SRC/bench/bench_pydicom.py" "$f" "$RUNS")
    echo "| $(basename "$f") | $ours | $py |"
done
