#!/bin/sh
# Serves the bundled demo model (models/demo_ct) with dcmserve and prints how
# to call it. What `make run` runs. Usage:
#   scripts/run_demo.sh [path/to/dcmserve]
# Environment: PORT (gRPC, default 8500), REST_PORT (HTTP/REST, default 8501;
# 0 turns REST off). Stop with Ctrl-C (SIGINT): the daemon drains and exits 0.
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/dcmserve}
PORT=${PORT:-8500}
REST_PORT=${REST_PORT:-8501}
BASE="$(pwd)/models/demo_ct"

if [ ! -x "$BIN" ]; then
    echo "run_demo: $BIN not found; build first (make)" >&2
    exit 1
fi
if [ ! -d "$BASE" ]; then
    echo "run_demo: $BASE does not exist yet; serving anyway: the daemon polls the"
    echo "          base path and loads a version as soon as one appears"
    echo "          (create it with scripts/make_demo_model.sh)."
fi

cat <<MSG
run_demo: serving model "demo_ct" from $BASE
  gRPC on port $PORT (TF Serving Predict, KServe v2 ModelInfer, grpc.health),
  REST on port $REST_PORT (TF Serving's /v1/models/demo_ct:predict).
  The model takes whole DICOM files as one string tensor "dicom" and answers
  mean_hu (n) and tissue_fraction (n, 4) (docs/demo.md). Try, from another shell:
    P=/usr/lib/python3/dist-packages/pydicom/data/test_files
    curl -s localhost:$REST_PORT/v1/models/demo_ct:predict -H 'Content-Type: application/json' \\
      -d "{\\"instances\\": [{\\"b64\\": \\"\$(base64 -w0 \$P/CT_small.dcm)\\"}]}"
  Python with gRPC stubs: examples/python/predict_dicom.py (README.md, Quick start).
MSG

exec "$BIN" serve --port="$PORT" --rest_api_port="$REST_PORT" --model_name=demo_ct \
    --model_base_path="$BASE"
