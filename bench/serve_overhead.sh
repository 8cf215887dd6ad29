#!/bin/sh
# Serving overhead: dcmserve's Predict on half_plus_two against a bare gRPC
# core echo server (dcmserve-bench --echo_port) answering the same request
# bytes, with the same client (dcmserve-bench), in one run. Prints the two
# ratios the issue asks for: sequential p50 (Predict / echo; target <= 1.2)
# and calls/s at 8 in flight (Predict / echo; target >= 0.8). The echo runs
# the same gRPC as the daemon (Abseil's debug lock graph off, see
# common/ms_abseil.h); a second echo with --abseil_debug, gRPC as Debian
# ships it, is measured too and its ratios printed for reference.
# SERVE_FLAGS adds daemon flags (e.g. SERVE_FLAGS=--grpc_standby_threads=0).
# Usage: bench/serve_overhead.sh [BUILD_DIR] [SECONDS]  (from the repo root,
# after the build). Everything runs on 127.0.0.1.
set -eu
BUILD=${1:-build}
SECS=${2:-5}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$BUILD/dcmserve-bench"
MODEL="$SRC/tests/data/savedmodels/saved_model_half_plus_two_cpu"
TMP=$(mktemp -d)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

# Waits for "listening on 127.0.0.1:PORT" on the first line of file $1.
port_of() {
    i=0
    while [ $i -lt 300 ]; do
        l=$(head -n 1 "$1" 2>/dev/null || true)
        case "$l" in *"listening on"*) echo "${l##*:}"; return 0 ;; esac
        sleep 0.1; i=$((i + 1))
    done
    echo "no listening line in $1" >&2; return 1
}

"$BENCH" --echo_port=0 > "$TMP/echo.out" 2>&1 &
PIDS="$PIDS $!"
"$BENCH" --echo_port=0 --abseil_debug > "$TMP/echod.out" 2>&1 &
PIDS="$PIDS $!"
"$BUILD/dcmserve" serve --port=0 --bind_address=127.0.0.1 --model_name=half_plus_two \
    --model_base_path="$MODEL" ${SERVE_FLAGS:-} > "$TMP/serve.out" 2> "$TMP/serve.log" &
PIDS="$PIDS $!"
EP=$(port_of "$TMP/echo.out")
DP=$(port_of "$TMP/echod.out")
SP=$(port_of "$TMP/serve.out")
sleep 1

run() { # target concurrency label
    "$BENCH" --target="127.0.0.1:$1" --api=predict --model=half_plus_two --values=1.0,2.0,5.0 --shape=3,1 \
        --concurrency="$2" --duration="$SECS" --warmup=1 --json --label="$3"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
E1=$(run "$EP" 1 echo_c1); echo "$E1"
P1=$(run "$SP" 1 predict_c1); echo "$P1"
E8=$(run "$EP" 8 echo_c8); echo "$E8"
P8=$(run "$SP" 8 predict_c8); echo "$P8"
D1=$(run "$DP" 1 echo_debug_c1); echo "$D1"
D8=$(run "$DP" 8 echo_debug_c8); echo "$D8"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$E1" "$P1" "$E8" "$P8" "$D1" "$D8" <<'PY'
import json, sys
e1, p1, e8, p8, d1, d8 = (json.loads(a) for a in sys.argv[1:])
print("sequential p50: predict %.0f us / echo %.0f us = %.2fx (target <= 1.2)"
      % (p1["p50_us"], e1["p50_us"], p1["p50_us"] / max(e1["p50_us"], 1)))
print("8 in flight: predict %.0f calls/s / echo %.0f calls/s = %.2fx (target >= 0.8)"
      % (p8["calls_per_s"], e8["calls_per_s"], p8["calls_per_s"] / max(e8["calls_per_s"], 1)))
print("reference, echo on Debian's stock gRPC (--abseil_debug): sequential %.2fx, 8 in flight %.2fx"
      % (p1["p50_us"] / max(d1["p50_us"], 1), p8["calls_per_s"] / max(d8["calls_per_s"], 1)))
PY
