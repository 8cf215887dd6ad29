#!/bin/sh
# bench_onnx_cputime.sh - CPU time per image, 1 thread, ONNX Runtime vs
# dcmserve: a measure that a loaded shared machine distorts far less than
# wall time (a process waiting for a core uses no CPU). Each engine runs twice
# with LO and HI timed iterations (2 warm-up each); (CPU of the HI run - CPU of
# the LO run) / ((HI - LO) x batch) is the CPU per image without the load,
# the conversion and the warm-up. The engines alternate, ROUNDS times.
# CPU = user + sys of the whole process (/usr/bin/time, 10 ms resolution:
# pick HI - LO so that a run's difference is ~1 s).
#
# usage: sh bench/bench_onnx_cputime.sh MODEL BATCH LO HI [ROUNDS]
#   static models: MODEL of bench_onnx.sh, after it ran with the same OUT
#     ($OUT/models/MODEL.onnx, $OUT/savedmodels/MODEL/1)
#   dynamic ones: DIR=folder-with-model.onnx SHAPE=4x1x320x320 (BATCH = the
#     SHAPE's first dim), timed by build/bench_onnx_dynamic and
#     bench/ort_bench_dynamic.js; MODEL is then only a label
#   env: OUT (default bench/out), BUILD (default build)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$src/bench/out}
build=${BUILD:-$src/build}
[ $# -ge 4 ] || { echo "usage: bench_onnx_cputime.sh MODEL BATCH LO HI [ROUNDS]" >&2; exit 2; }
m=$1 b=$2 lo=$3 hi=$4 rounds=${5:-3}
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{ print $1 + $2 }'; }
ort() {
    if [ -n "${SHAPE:-}" ]; then
        NODE_PATH="$src/bench/node_modules" cpu node "$src/bench/ort_bench_dynamic.js" \
            "$DIR/model.onnx" 1 "$1" 2 "$SHAPE"
    else
        NODE_PATH="$src/bench/node_modules" cpu node "$src/bench/ort_bench.js" \
            "$out/models/$m.onnx" "$b" 1 "$1" 2
    fi
}
dcm() {
    if [ -n "${SHAPE:-}" ]; then
        cpu "$build/bench_onnx_dynamic" "$DIR" 1 "$1" 2 "$SHAPE"
    else
        cpu "$build/dcmserve" benchmark --dir "$out/savedmodels/$m/1" --batch "$b" \
            --intra_op_threads 1 --iterations "$1" --warmup 2 --log_level error
    fi
}
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    ol=$(ort "$lo"); oh=$(ort "$hi"); dl=$(dcm "$lo"); dh=$(dcm "$hi")
    awk -v m="$m${SHAPE:+ $SHAPE}" -v b="$b" -v r="$r" -v ol="$ol" -v oh="$oh" -v dl="$dl" \
        -v dh="$dh" -v n=$((hi - lo)) 'BEGIN {
        o = (oh - ol) / n / b * 1000; d = (dh - dl) / n / b * 1000
        printf "%s batch %d round %d: ORT %.1f ms CPU/image, dcmserve %.1f, ORT / dcmserve %.2f\n",
               m, b, r, o, d, o / d }'
done
