#!/bin/sh
# Benchmark: a whole series in, one HU volume out. Series of 512x512 CT slices
# (bench/make_inputs.py's ct_512.dcm, pydicom's CT_small.dcm tiled, copied with
# its ImagePositionPatient moved 1.25 mm per slice, one SeriesInstanceUID) of
# LENGTHS slices each.
#  - dcmserve: the daemon at one intra-op thread serving an ONNX ReduceMax over
#    [1, 1, D, H, W] imported with --dicom_input image --dicom_volume (no
#    window: HU), fed by gRPC Predict with all the files of the series; CPU
#    time (user + system, all threads, /proc/PID/stat) and minor page faults
#    of the daemon per request, over several requests after two warm-up ones.
#    It includes gRPC's receive and parse of the request (the answer is one
#    float). The model takes [1, D, H, W, 1] (--layout NHWC): no Transpose
#    after the volume, so that only the series' decoding is timed.
#  - `dcmserve run` on the same model and files, in process: CPU time and
#    faults of the whole process for N files minus those for 1 file, per added
#    slice (the least of 3 runs each): the op's own cost per slice, file
#    reading included, without gRPC.
#  - the same gRPC request with its last file rewritten into another series:
#    the daemon's CPU time per refused request ("mixed series").
#  - pydicom + numpy (OPENBLAS_NUM_THREADS=1): dcmread from bytes in memory,
#    pixel_array, HU in float32, sort by position along the normal, np.stack;
#    CPU time of the process per request.
# Both as ms per slice; CPU time, so other load on a shared machine counts
# little. Usage: bench/bench_series.sh [BUILD_DIR] [LENGTHS...] (from the repo
# root, after the build; default lengths 1 4 32 140 300 600).
set -eu
BUILD=${1:-build}
[ $# -gt 0 ] && shift
LENGTHS=${*:-1 4 32 140 300 600}
SRC=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
/usr/bin/python3 "$SRC/bench/make_inputs.py" "$TMP" > /dev/null
for n in $LENGTHS; do
    /usr/bin/python3 "$SRC/bench/bench_series.py" make "$TMP/ct_512.dcm" "$TMP/s$n" "$n"
done
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$SRC/bench/bench_series.py" ours "$BUILD" "$TMP" $LENGTHS
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
