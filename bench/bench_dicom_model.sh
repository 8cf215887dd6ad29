#!/bin/sh
# DICOM inside the graph, issue #14's targets, in one run on one machine:
#  1. native 512x512 CT -> windowed 256x256 float tensor: an Identity ONNX
#     model imported with --dicom_input --window 40,400 --size 256x256, timed
#     by `dcmserve benchmark` (the whole in-process run: parse, decode, HU,
#     window, resize, layout), fused (default) and unfused
#     (DCMSERVE_GRAPH_FUSION=0), 1 and 2 intra-op threads;
#  2. a CT classifier (ResNet-style, 256x256, made by tests/tools/
#     gen_onnx_models.py) imported with DICOM in front vs the same ONNX file
#     imported plain and fed floats: the difference is the DICOM cost;
#  3. the demo model (models/demo_ct) on the 512x512 CT, fused (its Sums
#     become one _FusedMapReduce pass) and unfused;
#  4. one JPEG 2000 lossless 512x512 frame (the CT re-encoded by GDCM):
#     ours at 1 and 2 threads vs pydicom + GDCM, wall-clock medians;
#  5. end to end over gRPC, sequential: dcmserve-bench against the daemon
#     serving the DICOM classifier, p50 vs the in-process time of item 2's
#     model taken just before and just after that run, and the
#     transport floor: the same request bytes to dcmserve-bench's bare gRPC
#     echo answering 16 bytes (what gRPC alone costs for this message here;
#     the echo sets glibc's heap thresholds as the daemon does).
# All times are wall-clock medians (the machine's load is printed).
# SERVE_FLAGS adds daemon flags to the gRPC run (e.g. --grpc_channel_arguments=...).
# Usage: bench/bench_dicom_model.sh [BUILD_DIR] [ITERATIONS]   (from the repo
# root, after the build).
set -eu
BUILD=${1:-build}
ITERS=${2:-2000}
SRC=$(cd "$(dirname "$0")/.." && pwd)
DCM="$BUILD/dcmserve"
TMP=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

/usr/bin/python3 "$SRC/bench/make_inputs.py" "$TMP" > /dev/null
/usr/bin/python3 - "$TMP" "$SRC" <<'PY'
import os, sys
import onnx
from onnx import TensorProto, helper
tmp, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tests", "tools"))
import gen_onnx_models as g
for size in (256, 512):
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, size, size])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 1, size, size])
    gr = helper.make_graph([helper.make_node("Identity", ["image"], ["out"])], "id", [x], [y])
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)]),
              os.path.join(tmp, "ident%d.onnx" % size))
onnx.save_model(g.resnet(256, 8, [1, 1]), os.path.join(tmp, "cls256.onnx"))
PY
"$DCM" import-onnx "$TMP/ident256.onnx" --output_dir "$TMP/ident/1" --dicom_input image \
    --window 40,400 --size 256x256 > /dev/null
"$DCM" import-onnx "$TMP/ident512.onnx" --output_dir "$TMP/ident512/1" --dicom_input image \
    --window 40,400 > /dev/null
"$DCM" import-onnx "$TMP/cls256.onnx" --output_dir "$TMP/cls_dicom/1" --dicom_input image \
    --window 40,400 --size 256x256 > /dev/null
"$DCM" import-onnx "$TMP/cls256.onnx" --output_dir "$TMP/cls_float/1" > /dev/null

med() { # dir threads iterations [--input_files ...]
    d=$1; t=$2; n=$3; shift 3
    "$DCM" benchmark --dir "$d" --intra_op_threads "$t" --iterations "$n" --warmup 20 --json "$@" |
        sed -n 's/.*"median_ms": \([0-9.]*\).*/\1/p'
}
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| what (median ms, wall) | 1 thread | 2 threads |"
echo "|---|---|---|"
row() { echo "| $1 | $2 | $3 |"; }
CT="image=$TMP/ct_512.dcm"
row "512² CT → windowed 256² (fused)" "$(med "$TMP/ident" 1 "$ITERS" --input_files "$CT")" \
    "$(med "$TMP/ident" 2 "$ITERS" --input_files "$CT")"
row "512² CT → windowed 256² (unfused, DCMSERVE_GRAPH_FUSION=0)" \
    "$(DCMSERVE_GRAPH_FUSION=0 med "$TMP/ident" 1 "$ITERS" --input_files "$CT")" \
    "$(DCMSERVE_GRAPH_FUSION=0 med "$TMP/ident" 2 "$ITERS" --input_files "$CT")"
C1=$(med "$TMP/cls_dicom" 1 "$ITERS" --input_files "$CT")
C2=$(med "$TMP/cls_dicom" 2 "$ITERS" --input_files "$CT")
F1=$(med "$TMP/cls_float" 1 "$ITERS")
F2=$(med "$TMP/cls_float" 2 "$ITERS")
row "classifier, DICOM 512² in" "$C1" "$C2"
row "classifier, floats 256² in" "$F1" "$F2"
row "difference (DICOM cost)" "$(echo "$C1 - $F1" | bc -l | sed 's/^\./0./;s/^-\./-0./')" \
    "$(echo "$C2 - $F2" | bc -l | sed 's/^\./0./;s/^-\./-0./')"
row "demo model, 512² CT" "$(med "$SRC/models/demo_ct" 1 "$ITERS" --input_files "dicom=$TMP/ct_512.dcm")" \
    "$(med "$SRC/models/demo_ct" 2 "$ITERS" --input_files "dicom=$TMP/ct_512.dcm")"
row "demo model, 512² CT (unfused, DCMSERVE_GRAPH_FUSION=0)" \
    "$(DCMSERVE_GRAPH_FUSION=0 med "$SRC/models/demo_ct" 1 "$ITERS" --input_files "dicom=$TMP/ct_512.dcm")" \
    "$(DCMSERVE_GRAPH_FUSION=0 med "$SRC/models/demo_ct" 2 "$ITERS" --input_files "dicom=$TMP/ct_512.dcm")"
J="image=$TMP/ct_512_j2k.dcm"
row "JPEG 2000 lossless 512² → windowed 512²" "$(med "$TMP/ident512" 1 60 --input_files "$J")" \
    "$(med "$TMP/ident512" 2 60 --input_files "$J")"
PYJ=$(/usr/bin/python3 - "$TMP/ct_512_j2k.dcm" <<'PY'
import io, statistics, sys, time
import numpy as np
import pydicom
b = open(sys.argv[1], "rb").read()
ts = []
for _ in range(30):
    t0 = time.perf_counter()
    ds = pydicom.dcmread(io.BytesIO(b))
    hu = ds.pixel_array.astype(np.float32) * np.float32(float(ds.RescaleSlope)) + \
        np.float32(float(ds.RescaleIntercept))
    ts.append((time.perf_counter() - t0) * 1e3)
print("%.3f" % statistics.median(ts))
PY
)
row "JPEG 2000 lossless 512², pydicom + GDCM (pixel_array + HU)" "$PYJ" "-"

# ---- gRPC, sequential ----
port_of() {
    i=0
    while [ $i -lt 300 ]; do
        l=$(head -n 1 "$1" 2>/dev/null || true)
        case "$l" in *"listening on"*) echo "${l##*:}"; return 0 ;; esac
        sleep 0.1; i=$((i + 1))
    done
    echo "no listening line in $1" >&2; return 1
}
mkdir -p "$TMP/dcmdir"
cp "$TMP/ct_512.dcm" "$TMP/dcmdir/"
# grpc_row PID OUTFILE API LABEL: waits for the server PID's port line in
# OUTFILE, times one sequential client on it, prints the row, stops PID.
grpc_row() {
    PIDS="$PIDS $1"
    P=$(port_of "$2")
    sleep 1
    J=$("$BUILD/dcmserve-bench" --target="127.0.0.1:$P" --api="$3" --model=cls --input=image \
        --dicom_dir="$TMP/dcmdir" --concurrency=1 --duration=5 --warmup=1 --json)
    P50=$(echo "$J" | sed -n 's/.*"p50_us": *\([0-9.]*\).*/\1/p')
    G=$(awk -v u="$P50" 'BEGIN { printf "%.3f", u / 1000 }')
    echo "| $4 | $G | |"
    kill "$1"
    wait "$1" 2>/dev/null || true
}
# Each gRPC run is framed by the in-process time of the same model at the
# same thread count, taken just before and just after it: the overhead row
# is p50 minus their mean (the machine's speed drifts between the rows above).
for t in 1 2; do
    B=$(med "$TMP/cls_dicom" $t "$ITERS" --input_files "$CT")
    "$DCM" serve --port=0 --bind_address=127.0.0.1 --model_name=cls \
        --model_base_path="$TMP/cls_dicom" --tensorflow_intra_op_parallelism=$t ${SERVE_FLAGS:-} \
        > "$TMP/serve$t.out" 2> "$TMP/serve$t.log" &
    grpc_row $! "$TMP/serve$t.out" predict "gRPC sequential p50, DICOM 512² → classifier, $t thread(s)"
    A=$(med "$TMP/cls_dicom" $t "$ITERS" --input_files "$CT")
    echo "| in-process, just before / after it | $B / $A | |"
    echo "| gRPC overhead: p50 − mean of before and after (target ≤ 0.5) | $(awk -v g="$G" -v b="$B" -v a="$A" 'BEGIN { printf "%.3f", g - (a + b) / 2 }') | |"
done
"$BUILD/dcmserve-bench" --echo_port=0 --echo_reply_bytes=16 > "$TMP/echo.out" 2> "$TMP/echo.log" &
grpc_row $! "$TMP/echo.out" echo "gRPC sequential p50, the same request to a bare gRPC echo answering 16 bytes"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
