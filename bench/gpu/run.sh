#!/bin/sh
# run.sh - the GPU checks of issue 15 in one go, for a lent GPU machine
# (docs/gpu.md, docs/benchmarks_gpu.md). Prints:
#   1. nvidia-smi and `dcmserve info` (driver, runtime, cuBLAS, cuDNN, memory);
#   2. the gpu-labelled tests (each CUDA kernel and the fused DICOM kernel
#      against the CPU path; exit 77 = skipped), one line each;
#   3. the fused DICOM kernel's achieved bandwidth (bench_gpu_dicom);
#   4. `dcmserve benchmark --device=$DEVICE` (graphs placed on the CUDA
#      backend, docs/gpu.md) of the imported CT classifier and
#      segmenter and demo_ct, DICOM bytes in (a 512x512 CT file), batch
#      1/8/32/128: median / p99 ms and images/s, as a markdown table.
#
# Prepare here:  make && sh bench/gpu/pack.sh      (writes build/gpu_pack/)
# Run there:     device run, carry ["build/gpu_pack"], command
#                "sh bench/gpu/run.sh build/gpu_pack/dcmserve_gpu.tar.xz"
# env: DEVICE (default cuda; cpu for a dry run anywhere), ITERS (default 30),
#      BATCHES (default "1 8 32 128"), LOGDIR (a folder that keeps each
#      step's full log, e.g. the device tool's $OUT), SANITIZE=1 (at the end,
#      the gpu tests once more under compute-sanitizer memcheck), PROFILE=1
#      (at the end, DCMSERVE_PROFILE=1 runs of the models and of the daemon:
#      where each request's time goes, node by node).
# Each step runs under `timeout`, so one hang costs its own minutes only.
#   5. end to end over gRPC: the daemon (--device=$DEVICE) serving the
#      classifier, dcmserve-bench sequential (p50) and 32 in flight with
#      dynamic batching (calls/s).
set -u
pack=${1:-build/gpu_pack/dcmserve_gpu.tar.xz}
DEVICE=${DEVICE:-cuda}
ITERS=${ITERS:-30}
BATCHES=${BATCHES:-1 8 32 128}
dir=$(mktemp -d /tmp/dcmgpu.XXXXXX)
tar -C "$dir" -xJf "$pack" || { echo "run.sh: cannot unpack $pack"; exit 1; }
# cuDNN / cuBLAS of the machine: system paths, else a Python environment's
# NVIDIA wheels (site-packages/nvidia/*/lib).
extra=""
for lib in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13; do
    ldconfig -p 2>/dev/null | grep -q "$lib" && continue
    f=$(find / -xdev -name "$lib" -not -path '*/proc/*' 2>/dev/null | head -1)
    [ -n "$f" ] && extra="$extra:$(dirname "$f")"
done
export LD_LIBRARY_PATH="$dir/lib$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$dir/bin"

# input_of MODEL: the --input_files argument feeding the 512x512 CT file to
# the model's DICOM input (demo_ct's is named dicom, the imported ones image).
input_of() {
    if [ "$1" = demo_ct ]; then echo "dicom=$dir/data/ct_512.dcm"; else echo "image=$dir/data/ct_512.dcm"; fi
}
# port_of OUTFILE: waits up to 60 s for a daemon's "listening on" line in
# OUTFILE (its stdout) and prints the port; prints nothing if none came.
port_of() {
    i=0
    while [ $i -lt 600 ]; do
        l=$(head -n 1 "$1" 2>/dev/null)
        case "$l" in *"listening on"*) echo "${l##*:}"; return 0 ;; esac
        sleep 0.1
        i=$((i + 1))
    done
}

echo "## machine"
echo '```'
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 || echo "no nvidia-smi"
"$bin/dcmserve" info
echo '```'

echo "## gpu tests"
# check_cuda_backend reads tests/data of this tree (the repository root).
DCM_SRC=${DCM_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
export DCM_SRC
# ... and pydicom's test files from the pack (dicom_split).
[ -d "$dir/data/pydicom" ] && DCM_PYDICOM_FILES="$dir/data/pydicom" && export DCM_PYDICOM_FILES
fail=0
for t in $(cat "$bin/gpu_tests.txt"); do
    timeout 180 "$bin/check_$t" > "$dir/$t.log" 2>&1
    rc=$?
    [ -n "${LOGDIR:-}" ] && cp "$dir/$t.log" "$LOGDIR/test_$t.log"
    case $rc in
    0) echo "- $t: passed: $(grep '%' "$dir/$t.log" | tail -1)" ;;
    77) echo "- $t: SKIPPED: $(head -1 "$dir/$t.log")" ;;
    *) echo "- $t: FAILED (rc $rc)"; sed 's/^/    /' "$dir/$t.log" | tail -40; fail=1 ;;
    esac
done

echo "## fused DICOM kernel bandwidth"
timeout 120 "$bin/bench_gpu_dicom" 128 200

echo "## models, DICOM bytes in (--device=$DEVICE)"
res="$dir/bench.jsonl"
: > "$res"
for m in ct_classifier ct_segmenter demo_ct; do
    for b in $BATCHES; do
        o=$(timeout 120 "$bin/dcmserve" benchmark --device="$DEVICE" --dir "$dir/models/$m" --batch "$b" \
            --iterations "$ITERS" --warmup 3 --input_files "$(input_of "$m")" --json \
            --log_level warn 2>"$dir/bench_err.log")
        if [ -z "$o" ]; then
            echo "- $m batch $b: no result: $(tail -2 "$dir/bench_err.log" | tr '\n' ' ')"
            continue
        fi
        echo "{\"model\": \"$m\", \"r\": $o}" >> "$res"
    done
done
python3 - "$res" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| model | batch | median ms | p99 ms | images/s |")
print("|---|---|---|---|---|")
for r in rows:
    x = r["r"]
    print("| %s | %s | %.3f | %.3f | %.0f |" % (r["model"], x.get("batch"), x.get("median_ms", 0),
                                             x.get("p99_ms", 0), x.get("images_per_s", 0)))
PY
echo "## log lines of the device choice and the placement (what ran on the GPU)"
for m in ct_classifier ct_segmenter demo_ct; do
    timeout 60 "$bin/dcmserve" benchmark --device="$DEVICE" --dir "$dir/models/$m" --iterations 1 --warmup 0 \
        --input_files "$(input_of "$m")" --log_level info 2>&1 |
        grep -i "device\|cuda\|placement" | head -12
done
echo "## end to end over gRPC (classifier, DICOM 512² in, --device=$DEVICE)"
mkdir -p "$dir/dcmdir"
cp "$dir/data/ct_512.dcm" "$dir/dcmdir/"
for mode in sequential batched; do
    flags=""
    conc=1
    if [ $mode = batched ]; then
        printf 'max_batch_size { value: 32 }\nbatch_timeout_micros { value: 2000 }\n' > "$dir/batching.pbtxt"
        flags="--enable_batching --batching_parameters_file=$dir/batching.pbtxt"
        conc=32
    fi
    "$bin/dcmserve" serve --port=0 --bind_address=127.0.0.1 --model_name=cls --device="$DEVICE" \
        --model_base_path="$dir/models/ct_classifier" $flags > "$dir/serve.out" 2> "$dir/serve_$mode.log" &
    spid=$!
    port=$(port_of "$dir/serve.out")
    if [ -z "$port" ]; then
        echo "- $mode: the daemon did not listen: $(tail -3 "$dir/serve_$mode.log" | tr '\n' ' ')"
    else
        j=$(timeout 60 "$bin/dcmserve-bench" --target="127.0.0.1:$port" --api=predict --model=cls \
            --input=image --dicom_dir="$dir/dcmdir" --concurrency=$conc --duration=8 --warmup=2 --json)
        echo "- $mode, $conc in flight: $j"
    fi
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    [ -n "${LOGDIR:-}" ] && cp "$dir/serve_$mode.log" "$LOGDIR/"
done

if [ "${PROFILE:-0}" = 1 ]; then
    echo "## profiles (DCMSERVE_PROFILE=1: the device is waited for after each step)"
    for mb in ct_classifier:1 ct_classifier:8 ct_segmenter:8 demo_ct:8; do
        m=${mb%:*}
        b=${mb#*:}
        echo "### $m, batch $b"
        DCMSERVE_PROFILE=1 timeout 120 "$bin/dcmserve" benchmark --device="$DEVICE" \
            --dir "$dir/models/$m" --batch "$b" --iterations 10 --warmup 2 \
            --input_files "$(input_of "$m")" --log_level info 2>&1 |
            grep "profile:\|inside the CUDA backend\|placement:" |
            sed 's/^[^ ]* INFO  //'
    done
    echo "### the daemon, classifier, 1 in flight over gRPC (the plan's profile at unload)"
    DCMSERVE_PROFILE=1 "$bin/dcmserve" serve --port=0 --bind_address=127.0.0.1 --model_name=cls \
        --device="$DEVICE" --model_base_path="$dir/models/ct_classifier" \
        > "$dir/serve.out" 2> "$dir/serve_profile.log" &
    spid=$!
    port=$(port_of "$dir/serve.out")
    [ -n "$port" ] && timeout 30 "$bin/dcmserve-bench" --target="127.0.0.1:$port" --api=predict \
        --model=cls --input=image --dicom_dir="$dir/dcmdir" --concurrency=1 --duration=4 \
        --warmup=1 --json
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    grep "profile:" "$dir/serve_profile.log" | sed 's/^[^ ]* INFO  //'
    [ -n "${LOGDIR:-}" ] && cp "$dir/serve_profile.log" "$LOGDIR/"
fi

if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    echo "## gpu tests under compute-sanitizer memcheck"
    for t in $(cat "$bin/gpu_tests.txt"); do
        CK_FORK=no timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$bin/check_$t" \
            > "$dir/san_$t.log" 2>&1
        echo "- $t: rc $?: $(grep -E 'ERROR SUMMARY|%' "$dir/san_$t.log" | tail -2 | tr '\n' ' ')"
        [ -n "${LOGDIR:-}" ] && cp "$dir/san_$t.log" "$LOGDIR/"
    done
fi
rm -rf "$dir"
exit $fail
