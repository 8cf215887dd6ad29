#!/bin/sh
# bench_onnx.sh - ONNX Runtime (onnxruntime-node) vs `dcmserve benchmark` on
# the same ONNX models: ResNet-style at 256x256 and 512x512 and the U-Net-style
# segmenter at 256x256, batch 1 and 8, 1 and 2 threads. Prints a Markdown
# table (median / p99 latency, images/s, peak RSS, dcmserve/ORT throughput
# ratio) and keeps the raw JSON lines in $OUT/results.jsonl.
#
# usage: sh bench/bench_onnx.sh [path/to/dcmserve]
#   env: OUT (default bench/out), ITERS_SCALE (default 1; 0.2 for a quick run)
# Needs node + npm (bench/install_ort.sh installs onnxruntime-node into the
# ignored bench/node_modules) and Debian's /usr/bin/python3 with python3-onnx.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
dcmserve=${1:-$src/build/dcmserve}
out=${OUT:-$src/bench/out}
scale=${ITERS_SCALE:-1}
mkdir -p "$out"
sh "$src/bench/install_ort.sh" >/dev/null
/usr/bin/python3 "$src/tests/tools/gen_onnx_models.py" --bench "$out/models" >/dev/null
res="$out/results.jsonl"
: > "$res"

iters() {   # iterations for model $1 at batch $2: about 2-20 s per run here
    base=40
    case "$1" in resnet512) base=10 ;; unet256) base=16 ;; esac
    [ "$2" -gt 1 ] && base=$((base / 4 > 3 ? base / 4 : 3))
    awk -v b="$base" -v s="$scale" 'BEGIN { n = int(b * s); print (n < 3 ? 3 : n) }'
}

for model in resnet256 resnet512 unet256; do
    sm="$out/savedmodels/$model/1"
    rm -rf "$out/savedmodels/$model"
    "$dcmserve" import-onnx "$out/models/$model.onnx" --output_dir "$sm" >/dev/null
    for batch in 1 8; do
        for threads in 1 2; do
            n=$(iters "$model" "$batch")
            w=2
            o=$(NODE_PATH="$src/bench/node_modules" node "$src/bench/ort_bench.js" \
                "$out/models/$model.onnx" "$batch" "$threads" "$n" "$w")
            echo "{\"model\": \"$model\", \"engine\": \"ort\", \"r\": $o}" >> "$res"
            d=$("$dcmserve" benchmark --dir "$sm" --batch "$batch" --intra_op_threads "$threads" \
                --iterations "$n" --warmup "$w" --json)
            echo "{\"model\": \"$model\", \"engine\": \"dcmserve\", \"r\": $d}" >> "$res"
            echo "done: $model batch $batch threads $threads ($n iterations)" >&2
        done
    done
done

/usr/bin/python3 - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    k = (r["model"], r["r"]["batch"], r["r"]["intra_op_threads"])
    by.setdefault(k, {})[r["engine"]] = r["r"]
print("| model | batch | threads | ORT median / p99 ms | ORT img/s | ORT RSS MiB "
      "| dcmserve median / p99 ms | dcmserve img/s | dcmserve RSS MiB | dcmserve / ORT img/s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(by, key=lambda k: (k[0], k[1], k[2])):
    o, d = by[k]["ort"], by[k]["dcmserve"]
    print("| %s | %d | %d | %.1f / %.1f | %.1f | %.0f | %.1f / %.1f | %.1f | %.0f | %.2f |" % (
        k[0], k[1], k[2], o["median_ms"], o["p99_ms"], o["images_per_s"], o["peak_rss_mb"],
        d["median_ms"], d["p99_ms"], d["images_per_s"], d["peak_rss_mb"],
        d["images_per_s"] / o["images_per_s"]))
PY
