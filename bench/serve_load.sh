#!/bin/sh
# Throughput and latency of the daemon under load, with dcmserve-bench:
# Predict on half_plus_two (3 floats) and on the bundled DICOM model demo_ct
# (one DICOM file per request: tests/data/onnx/ct64.dcm, or every file of
# DICOM_DIR), at 1, 8 and 32 calls in flight. Prints a markdown table and the
# load average before and after (the machine may be shared).
# Usage: bench/serve_load.sh [BUILD_DIR] [SECONDS] [DICOM_DIR]  (repo root, after the build)
set -eu
BUILD=${1:-build}
SECS=${2:-5}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$BUILD/dcmserve-bench"
TMP=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
DDIR=${3:-}
if [ -z "$DDIR" ]; then
    DDIR="$TMP/dicom"; mkdir "$DDIR"; cp "$SRC/tests/data/onnx/ct64.dcm" "$DDIR/"
fi
cat > "$TMP/models.json" <<CFG
{"model_config_list": {"config": [
 {"name": "half_plus_two", "base_path": "$SRC/tests/data/savedmodels/saved_model_half_plus_two_cpu"},
 {"name": "demo_ct", "base_path": "$SRC/models/demo_ct"}]}}
CFG
"$BUILD/dcmserve" serve --port=0 --bind_address=127.0.0.1 --model_config_file="$TMP/models.json" \
    > "$TMP/serve.out" 2> "$TMP/serve.log" &
PID=$!
i=0
until head -n 1 "$TMP/serve.out" | grep -q "listening on"; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "daemon did not start" >&2; cat "$TMP/serve.log" >&2; exit 1; }
    sleep 0.1
done
PORT=$(head -n 1 "$TMP/serve.out" | sed 's/.*://')
sleep 1
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| model | input | in flight | calls/s | p50 us | p99 us | p99.9 us | errors |"
echo "|---|---|---|---|---|---|---|---|"
for c in 1 8 32; do
    for m in half_plus_two demo_ct; do
        if [ $m = half_plus_two ]; then
            IN="--values=1.0,2.0,5.0 --shape=3,1"; WHAT="3 floats"
        else
            IN="--dicom_dir=$DDIR --input=dicom"; WHAT="DICOM ($(ls "$DDIR" | wc -l) file(s))"
        fi
        # shellcheck disable=SC2086
        J=$("$BENCH" --target="127.0.0.1:$PORT" --model=$m $IN --concurrency=$c \
            --duration="$SECS" --warmup=1 --json || true)
        /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %s |" % (sys.argv[2], sys.argv[3], r["concurrency"], r["calls_per_s"], r["p50_us"], r["p99_us"], r["p999_us"], r["errors"] or "none"))' "$J" "$m" "$WHAT"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
