#!/bin/sh
# bench_onnx.sh - ONNX Runtime (onnxruntime-node) vs `dcmserve benchmark` on
# the same ONNX models: ResNet-style at 256x256 and 512x512 and the U-Net-style
# segmenter at 256x256, batch 1 and 8, 1 and 2 threads. Prints a Markdown
# table (median / p99 latency, images/s, peak RSS, dcmserve/ORT throughput
# ratio) and keeps the raw JSON lines in $OUT/results.jsonl. With ROUNDS > 1
# every configuration runs ROUNDS times, the rounds one after the other over
# all configurations (ORT and dcmserve alternating within each), so that a
# shared machine's changing load hits both alike; the table then gives the
# median over the rounds of each figure and the per-round ratios.
#
# usage: sh bench/bench_onnx.sh [path/to/dcmserve]
#   env: OUT (default bench/out), ITERS_SCALE (default 1; 0.2 for a quick run),
#        ROUNDS (default 1), ONLY (default all: a list of MODEL:BATCH:THREADS
#        rows to run, e.g. ONLY="resnet512:8:1 unet256:1:1")
# Needs node + npm (bench/install_ort.sh installs onnxruntime-node into the
# ignored bench/node_modules) and Debian's /usr/bin/python3 with python3-onnx.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
dcmserve=${1:-$src/build/dcmserve}
out=${OUT:-$src/bench/out}
scale=${ITERS_SCALE:-1}
rounds=${ROUNDS:-1}
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
    rm -rf "$out/savedmodels/$model"
    "$dcmserve" import-onnx "$out/models/$model.onnx" --output_dir "$out/savedmodels/$model/1" \
        >/dev/null
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=0
while [ "$r" -lt "$rounds" ]; do
r=$((r + 1))
for model in resnet256 resnet512 unet256; do
    sm="$out/savedmodels/$model/1"
    for batch in 1 8; do
        for threads in 1 2; do
            case " ${ONLY:-$model:$batch:$threads} " in *" $model:$batch:$threads "*) ;; *) continue ;; esac
            n=$(iters "$model" "$batch")
            w=2
            o=$(NODE_PATH="$src/bench/node_modules" node "$src/bench/ort_bench.js" \
                "$out/models/$model.onnx" "$batch" "$threads" "$n" "$w")
            echo "{\"model\": \"$model\", \"engine\": \"ort\", \"round\": $r, \"r\": $o}" >> "$res"
            d=$("$dcmserve" benchmark --dir "$sm" --batch "$batch" --intra_op_threads "$threads" \
                --iterations "$n" --warmup "$w" --json)
            echo "{\"model\": \"$model\", \"engine\": \"dcmserve\", \"round\": $r, \"r\": $d}" >> "$res"
            echo "done: round $r, $model batch $batch threads $threads ($n iterations)" >&2
        done
    done
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

/usr/bin/python3 - "$res" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    k = (r["model"], r["r"]["batch"], r["r"]["intra_op_threads"])
    by.setdefault(k, {}).setdefault(r["engine"], {})[r.get("round", 1)] = r["r"]
def med(runs, f):
    return statistics.median(x[f] for x in runs)
print("| model | batch | threads | ORT median / p99 ms | ORT img/s | ORT RSS MiB "
      "| dcmserve median / p99 ms | dcmserve img/s | dcmserve RSS MiB | dcmserve / ORT img/s "
      "| per round (median) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for k in sorted(by, key=lambda k: (k[0], k[1], k[2])):
    rounds = sorted(by[k]["ort"])
    o = [by[k]["ort"][i] for i in rounds]
    d = [by[k]["dcmserve"][i] for i in rounds]
    ratios = [y["images_per_s"] / x["images_per_s"] for x, y in zip(o, d)]
    per = "%s (%.2f)" % (", ".join("%.2f" % q for q in ratios), statistics.median(ratios))
    print("| %s | %d | %d | %.1f / %.1f | %.1f | %.0f | %.1f / %.1f | %.1f | %.0f | %.2f | %s |" % (
        k[0], k[1], k[2], med(o, "median_ms"), med(o, "p99_ms"), med(o, "images_per_s"),
        max(x["peak_rss_mb"] for x in o), med(d, "median_ms"), med(d, "p99_ms"),
        med(d, "images_per_s"), max(x["peak_rss_mb"] for x in d),
        med(d, "images_per_s") / med(o, "images_per_s"), per))
PY
