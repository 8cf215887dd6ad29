#!/bin/sh
# bench_onnx3d.sh - ONNX Runtime (onnxruntime-node, CPU) vs `dcmserve
# benchmark` on the same 3-D U-Net ONNX file (tests/tools/gen_onnx_models.py
# unet3d: input 1x1x64x128x128, 16/32/64 channels, Conv 3x3x3 + Relu,
# InstanceNormalization, MaxPool / AveragePool, ConvTranspose, Resize, skip
# Concat), batch 1, 1 and 2 threads. Prints a Markdown table (median / p99
# latency, peak RSS, dcmserve/ORT speed ratio = ORT median / dcmserve median)
# and keeps the raw JSON lines in $OUT/results3d.jsonl. The two engines run
# alternately, ROUNDS times, so that a shared machine's changing load hits
# both alike; the table gives the median of the rounds' medians.
#
# usage: sh bench/bench_onnx3d.sh [path/to/dcmserve]
#   env: OUT (default bench/out), ITERS (default 3), WARMUP (default 1),
#        ROUNDS (default 3)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
dcmserve=${1:-$src/build/dcmserve}
out=${OUT:-$src/bench/out}
iters=${ITERS:-3}
warm=${WARMUP:-1}
rounds=${ROUNDS:-3}
mkdir -p "$out/models"
sh "$src/bench/install_ort.sh" >/dev/null
/usr/bin/python3 "$src/tests/tools/gen_onnx_models.py" --only3d --bench "$out/models" >/dev/null
model=unet3d_64x128x128
res="$out/results3d.jsonl"
: > "$res"
sm="$out/savedmodels/$model/1"
rm -rf "$out/savedmodels/$model"
"$dcmserve" import-onnx "$out/models/$model.onnx" --output_dir "$sm" >/dev/null
r=0
while [ "$r" -lt "$rounds" ]; do
r=$((r + 1))
for threads in 1 2; do
    o=$(NODE_PATH="$src/bench/node_modules" node "$src/bench/ort_bench.js" \
        "$out/models/$model.onnx" 1 "$threads" "$iters" "$warm")
    echo "{\"model\": \"$model\", \"engine\": \"ort\", \"r\": $o}" >> "$res"
    d=$("$dcmserve" benchmark --dir "$sm" --batch 1 --intra_op_threads "$threads" \
        --iterations "$iters" --warmup "$warm" --json)
    echo "{\"model\": \"$model\", \"engine\": \"dcmserve\", \"r\": $d}" >> "$res"
    echo "done: round $r, $model threads $threads ($iters iterations)" >&2
done
done
uptime >&2

/usr/bin/python3 - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
import statistics
by = {}
for r in rows:
    by.setdefault(r["r"]["intra_op_threads"], {}).setdefault(r["engine"], []).append(r["r"])
print("| model | threads | rounds | ORT median ms (per round) | ORT RSS MiB "
      "| dcmserve median ms (per round) | dcmserve RSS MiB | dcmserve / ORT speed |")
print("|---|---|---|---|---|---|---|---|")
for t in sorted(by):
    o, d = by[t]["ort"], by[t]["dcmserve"]
    om = statistics.median(x["median_ms"] for x in o)
    dm = statistics.median(x["median_ms"] for x in d)
    print("| unet3d 1x1x64x128x128 | %d | %d | %.0f (%s) | %.0f | %.0f (%s) | %.0f | %.2f |" % (
        t, len(o), om, ", ".join("%.0f" % x["median_ms"] for x in o),
        max(x["peak_rss_mb"] for x in o), dm, ", ".join("%.0f" % x["median_ms"] for x in d),
        max(x["peak_rss_mb"] for x in d), om / dm))
PY
