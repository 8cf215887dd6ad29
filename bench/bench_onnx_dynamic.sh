#!/bin/sh
# bench_onnx_dynamic.sh - ONNX Runtime (onnxruntime-node, CPU) vs dcmserve on
# models with dynamic input dims, each run at several input shapes in one
# process without reloading:
#   resnet_dyn   resnet256 of gen_onnx_models.py --bench (same weights) with
#                symbolic N, H and W: 1x1x256x256, 1x1x384x384, 1x1x512x512,
#                4x1x320x320, then 1x1x256x256 again
#   ppocrv3_det  $DCM_SHARED/testdata/onnx_wild/ppocrv3_det (PaddleOCR's text
#                detector, dynamic N, H, W; read in place, skipped when absent):
#                1x3x320x320, 1x3x640x640, then 1x3x320x320 again
# dcmserve loads the folder's model.onnx as `dcmserve serve` does (converted at
# load) in build/bench_onnx_dynamic (bench/bench_onnx_dynamic.c), ONNX Runtime
# in bench/ort_bench_dynamic.js. For each shape both time the first call at
# that shape on its own (what a new shape costs), then WARMUP untimed calls and
# ITERS timed ones. The engines alternate, ROUNDS times, at 1 and 2 threads, so
# that a shared machine's changing load hits both alike; the table gives the
# median over the rounds of each round's median (and of the first calls), the
# per-round figures and the speed ratio ORT median / dcmserve median. Raw JSON
# lines go to $OUT/results_dynamic.jsonl.
#
# usage: sh bench/bench_onnx_dynamic.sh [BUILD_DIR]
#   env: OUT (default bench/out), ITERS (default 5), WARMUP (default 2),
#        DCM_SHARED (default ../shared, beside the checkout),
#        ROUNDS (default 3), THREADS (default "1 2")
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
out=${OUT:-$src/bench/out}
iters=${ITERS:-5}
warm=${WARMUP:-2}
rounds=${ROUNDS:-3}
threads_list=${THREADS:-1 2}
bin="$build/bench_onnx_dynamic"
[ -x "$bin" ] || { echo "no $bin: build the bench_onnx_dynamic target first" >&2; exit 1; }
mkdir -p "$out/models"
sh "$src/bench/install_ort.sh" >/dev/null
/usr/bin/python3 "$src/tests/tools/gen_onnx_models.py" --bench "$out/models" >/dev/null
mkdir -p "$out/dyn/resnet_dyn/1"
cp "$out/models/resnet_dyn.onnx" "$out/dyn/resnet_dyn/1/model.onnx"
set -- "resnet_dyn|$out/dyn/resnet_dyn/1|1x1x256x256,1x1x384x384,1x1x512x512,4x1x320x320,1x1x256x256"
ppocr="${DCM_SHARED:-$src/../shared}/testdata/onnx_wild/ppocrv3_det"
if [ -f "$ppocr/model.onnx" ]; then
    set -- "$@" "ppocrv3_det|$ppocr|1x3x320x320,1x3x640x640,1x3x320x320"
else
    echo "skipping ppocrv3_det: $ppocr absent" >&2
fi
res="$out/results_dynamic.jsonl"
: > "$res"
keep() {    # appends $out/dyn/last.jsonl's lines to $res, tagged with engine $1
    sed "s/^/{\"model\": \"$name\", \"engine\": \"$1\", \"round\": $r, \"threads\": $threads, \"r\": /; s/\$/}/" \
        "$out/dyn/last.jsonl" >> "$res"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
r=0
while [ "$r" -lt "$rounds" ]; do
r=$((r + 1))
for threads in $threads_list; do
    for spec in "$@"; do
        name=${spec%%|*}; rest=${spec#*|}; dir=${rest%%|*}; shapes=${rest#*|}
        NODE_PATH="$src/bench/node_modules" node "$src/bench/ort_bench_dynamic.js" \
            "$dir/model.onnx" "$threads" "$iters" "$warm" "$shapes" > "$out/dyn/last.jsonl"
        keep ort
        "$bin" "$dir" "$threads" "$iters" "$warm" "$shapes" > "$out/dyn/last.jsonl"
        keep dcmserve
        echo "done: round $r, $name threads $threads" >&2
    done
done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

/usr/bin/python3 - "$res" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
load, by, order = {}, {}, []
for x in rows:
    r = x["r"]
    if "shape" not in r:
        load.setdefault((x["model"], x["threads"], x["engine"]), []).append(r["load_ms"])
        continue
    # The n-th time this shape comes in this process (a shape may come again).
    key = (x["model"], x["threads"], x["engine"], x["round"])
    seen = by.setdefault(key, [])
    seen.append(r)
def med(v):
    return statistics.median(v)
def cell(v):
    return "%.1f (%s)" % (med(v), ", ".join("%.1f" % y for y in v))
print("| model | threads | input (in order) | ORT first call ms | ORT median ms (per round) "
      "| dcmserve first call ms | dcmserve median ms (per round) | dcmserve / ORT speed |")
print("|---|---|---|---|---|---|---|---|")
keys = sorted({(x["model"], x["threads"]) for x in rows}, key=lambda k: (k[0] != "resnet_dyn", k))
for model, t in keys:
    rounds = sorted({x["round"] for x in rows if x["model"] == model and x["threads"] == t})
    n = len(by[(model, t, "ort", rounds[0])])
    for i in range(n):
        o = [by[(model, t, "ort", r)][i] for r in rounds]
        d = [by[(model, t, "dcmserve", r)][i] for r in rounds]
        om, dm = med([y["median_ms"] for y in o]), med([y["median_ms"] for y in d])
        print("| %s | %d | %s | %s | %s | %s | %s | %.2f |" % (
            model, t, o[0]["shape"], cell([y["first_ms"] for y in o]),
            cell([y["median_ms"] for y in o]), cell([y["first_ms"] for y in d]),
            cell([y["median_ms"] for y in d]), om / dm))
print()
print("| model | threads | ORT session create ms (per round) | dcmserve load + convert ms (per round) |")
print("|---|---|---|---|")
for model, t in keys:
    print("| %s | %d | %s | %s |" % (model, t, cell(load[(model, t, "ort")]),
                                     cell(load[(model, t, "dcmserve")])))
PY
