#!/bin/sh
# Serves the bundled demo model (models/demo_ct) with dcmserve and prints how
# to call it. What `make run` runs. Usage:
#   scripts/run_demo.sh [path/to/dcmserve]      (PORT=8500 by default)
# Stop with Ctrl-C (SIGINT): the daemon drains and exits 0.
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/dcmserve}
PORT=${PORT:-8500}
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
run_demo: serving model "demo_ct" from $BASE on gRPC port $PORT
  health: grpc.health.v1.Health/Check with service "" answers SERVING once the
          model is loaded (a Kubernetes grpc probe on port $PORT works as is).
  The model (docs/demo.md) takes DICOM files as one DT_STRING tensor "dicom" and
  answers mean_hu (n) and tissue_fraction (n, 4). TF Serving Predict from Python
  (message classes generated from proto/ by protoc; CT_small.dcm is in Debian's
  python3-pydicom test data):
    mkdir -p /tmp/dcm_pb && protoc --python_out=/tmp/dcm_pb -I proto proto/*.proto
    PYTHONPATH=/tmp/dcm_pb /usr/bin/python3 - <<'PY'
import grpc, tf_serving_pb2 as s, tf_framework_pb2 as f
ch = grpc.insecure_channel("127.0.0.1:$PORT")
predict = ch.unary_unary("/tensorflow.serving.PredictionService/Predict",
    request_serializer=s.PredictRequest.SerializeToString,
    response_deserializer=s.PredictResponse.FromString)
req = s.PredictRequest(model_spec=s.ModelSpec(name="demo_ct"))
x = req.inputs["dicom"]; x.dtype = f.DT_STRING
x.tensor_shape.dim.add(size=1)
x.string_val.append(open("/usr/lib/python3/dist-packages/pydicom/data/test_files/CT_small.dcm", "rb").read())
out = predict(req, timeout=10).outputs
print("mean_hu", list(out["mean_hu"].float_val), "tissue_fraction", list(out["tissue_fraction"].float_val))
check = ch.unary_unary("/grpc.health.v1.Health/Check")
import health_pb2 as h
print(h.HealthCheckResponse.FromString(check(h.HealthCheckRequest().SerializeToString())))
PY
  Any TF Serving or KServe v2 gRPC client works the same way (see docs/serving.md).
MSG

exec "$BIN" serve --port="$PORT" --model_name=demo_ct --model_base_path="$BASE"
