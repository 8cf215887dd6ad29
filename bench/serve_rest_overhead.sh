#!/bin/sh
# REST overhead: half_plus_two predict over TF Serving's REST API (HTTP/1.1
# keep-alive, JSON {"instances": [1.0, 2.0, 5.0]}) next to gRPC Predict of
# the same values, one daemon, one client tool (dcmserve-bench), sequential
# and 8 in flight. Prints both and the REST / gRPC ratios.
# Usage: bench/serve_rest_overhead.sh [BUILD_DIR] [SECONDS]  (from the repo
# root, after the build). Everything runs on 127.0.0.1.
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

RP=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BUILD/dcmserve" serve --port=0 --bind_address=127.0.0.1 --rest_api_port="$RP" \
    --model_name=half_plus_two --model_base_path="$MODEL" > "$TMP/serve.out" 2> "$TMP/serve.log" &
PIDS="$PIDS $!"
i=0
while ! grep -q "listening on" "$TMP/serve.out" 2>/dev/null; do
    sleep 0.1; i=$((i + 1)); [ $i -lt 300 ] || { echo "daemon did not start" >&2; exit 1; }
done
SP=$(head -n 1 "$TMP/serve.out"); SP=${SP##*:}
sleep 1

grpc() { "$BENCH" --target="127.0.0.1:$SP" --api=predict --model=half_plus_two --values=1.0,2.0,5.0 \
    --shape=3,1 --concurrency="$1" --duration="$SECS" --warmup=1 --json --label="grpc_c$1"; }
rest() { "$BENCH" --target="127.0.0.1:$RP" --api=rest --model=half_plus_two --values=1.0,2.0,5.0 \
    --concurrency="$1" --duration="$SECS" --warmup=1 --json --label="rest_c$1"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
G1=$(grpc 1); echo "$G1"
R1=$(rest 1); echo "$R1"
G8=$(grpc 8); echo "$G8"
R8=$(rest 8); echo "$R8"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$G1" "$R1" "$G8" "$R8" <<'PY'
import json, sys
g1, r1, g8, r8 = (json.loads(a) for a in sys.argv[1:])
print("sequential p50: REST %.0f us / gRPC %.0f us = %.2fx; calls/s REST %.0f gRPC %.0f"
      % (r1["p50_us"], g1["p50_us"], r1["p50_us"] / max(g1["p50_us"], 1), r1["calls_per_s"], g1["calls_per_s"]))
print("8 in flight: REST %.0f calls/s (p50 %.0f us) / gRPC %.0f calls/s (p50 %.0f us) = %.2fx"
      % (r8["calls_per_s"], r8["p50_us"], g8["calls_per_s"], g8["p50_us"], r8["calls_per_s"] / max(g8["calls_per_s"], 1)))
PY
