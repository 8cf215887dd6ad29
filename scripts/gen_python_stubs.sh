#!/bin/sh
# Generates Python message classes (*_pb2.py) and gRPC stubs (*_pb2_grpc.py)
# for calling dcmserve. Fetches nothing.
#
#   scripts/gen_python_stubs.sh OUT_DIR
#       this repository's protos: proto/{tf_framework,tf_savedmodel,tf_serving,
#       kserve,health}.proto and proto/services/*.proto. Then, with OUT_DIR on
#       PYTHONPATH:
#         import tf_serving_pb2, prediction_service_pb2_grpc   # TF Serving
#         import kserve_pb2, inference_service_pb2_grpc        # KServe v2
#       and under the module names TF Serving's and KServe's clients import
#       (thin modules that re-export the classes above; docs/api.md):
#         from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc,
#             model_pb2, get_model_metadata_pb2, get_model_status_pb2,
#             model_service_pb2_grpc, classification_pb2, regression_pb2,
#             inference_pb2, input_pb2, model_management_pb2
#         from tensorflow_serving.config import model_server_config_pb2
#         from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
#         from tensorflow.core.protobuf import meta_graph_pb2
#         import grpc_predict_v2_pb2, grpc_predict_v2_pb2_grpc   # KServe's grpc_predict_v2.proto
#       (the tensorflow/ package holds only those modules: keep OUT_DIR off
#       the path of a Python that has TensorFlow itself installed).
#
#   scripts/gen_python_stubs.sh OUT_DIR ROOT FILE.proto...
#       any other tree, e.g. TF Serving's, TensorFlow's and KServe's own .proto
#       files laid out under ROOT as they import each other
#       (tensorflow_serving/apis/prediction_service.proto,
#       tensorflow/core/framework/tensor.proto, ...): FILEs (relative to ROOT)
#       and every file they import from ROOT are compiled.
#
# Compiler: Debian's protoc with grpc_python_plugin (packages protobuf-compiler
# and protobuf-compiler-grpc; google/protobuf/*.proto from libprotobuf-dev)
# when both are installed, else python3 -m
# grpc_tools.protoc (package python3-grpc-tools); PROTOC=grpc_tools forces the
# latter. grpc_tools in Debian 12 bundles protoc 3.5, which rejects the proto3
# `optional` label (newer TF Serving files use it). For such a compiler the
# files are compiled from a temporary copy in which a field's leading
# `optional ` is removed in proto3 files: the field keeps its number, type and
# wire format; only explicit presence (HasField on that scalar) is lost. The
# files under ROOT are never changed.
set -eu
[ $# -ge 1 ] || { echo "usage: gen_python_stubs.sh OUT_DIR [ROOT FILE.proto...]" >&2; exit 2; }
OUT=$1
shift
SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
    ROOT=$(cd "$1" && pwd)
    shift
    [ $# -ge 1 ] || { echo "gen_python_stubs.sh: name the .proto files under $ROOT" >&2; exit 2; }
    FILES="$*"
    SERVICES=0
else
    ROOT="$SRC/proto"
    FILES="tf_framework.proto tf_savedmodel.proto tf_serving.proto kserve.proto health.proto
services/prediction_service.proto services/inference_service.proto services/health_service.proto"
    SERVICES=1   # proto/services/ first on the path: its modules come out flat
fi

# The closure: FILES and every import found under ROOT (google/protobuf/*
# comes with the compiler).
todo=$FILES
all=""
while [ -n "$todo" ]; do
    next=""
    for f in $todo; do
        case " $all " in *" $f "*) continue ;; esac
        [ -f "$ROOT/$f" ] || { echo "gen_python_stubs.sh: $ROOT/$f not found" >&2; exit 1; }
        all="$all $f"
        for imp in $(sed -n 's/^[[:space:]]*import[[:space:]]*\(public[[:space:]]*\)\{0,1\}"\([^"]*\)".*/\2/p' "$ROOT/$f"); do
            [ -f "$ROOT/$imp" ] && next="$next $imp"
        done
    done
    todo=$next
done

mode=${PROTOC:-auto}
if [ "$mode" = auto ]; then
    if command -v protoc >/dev/null 2>&1 && command -v grpc_python_plugin >/dev/null 2>&1; then
        mode=protoc
    else
        mode=grpc_tools
    fi
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
case "$mode" in
    protoc)
        set -- protoc --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)"
        # google/protobuf/*.proto: Debian's libprotobuf-dev puts them in /usr/include.
        [ -f /usr/include/google/protobuf/wrappers.proto ] && set -- "$@" -I/usr/include
        version=$(protoc --version | awk '{print $2}')
        ;;
    grpc_tools)
        wkt=$("$PY" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))') || {
            echo "gen_python_stubs.sh: neither protoc + grpc_python_plugin nor python3 grpc_tools" \
                 "(install protobuf-compiler-grpc or python3-grpc-tools)" >&2
            exit 1
        }
        set -- "$PY" -m grpc_tools.protoc -I"$wkt"
        version=$("$PY" -m grpc_tools.protoc --version | awk '{print $2}')
        ;;
    *) echo "gen_python_stubs.sh: PROTOC must be auto, protoc or grpc_tools" >&2; exit 2 ;;
esac

# proto3 `optional` needs protoc >= 3.15 (3.12-3.14 only behind a flag).
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}
tmp=""
IN=$ROOT
if [ "$major" -lt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -lt 15 ]; }; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    for f in $all; do
        mkdir -p "$tmp/$(dirname "$f")"
        if grep -q '^[[:space:]]*syntax[[:space:]]*=[[:space:]]*"proto3"' "$ROOT/$f"; then
            sed 's/^\([[:space:]]*\)optional[[:space:]][[:space:]]*/\1/' "$ROOT/$f" > "$tmp/$f"
        else
            cp "$ROOT/$f" "$tmp/$f"
        fi
    done
    IN=$tmp
    echo "gen_python_stubs.sh: protoc $version has no proto3 optional: compiled with the label removed"
fi

mkdir -p "$OUT"
# shellcheck disable=SC2086
if [ "$SERVICES" = 1 ]; then set -- "$@" -I"$IN/services"; fi
"$@" -I"$IN" --python_out="$OUT" --grpc_python_out="$OUT" $(for f in $all; do echo "$IN/$f"; done)
echo "gen_python_stubs.sh: $(echo $all | wc -w) file(s) from $ROOT into $OUT (protoc $version, $mode)"
[ "$SERVICES" = 1 ] || exit 0

# The module names of TF Serving's tensorflow-serving-api package, of
# TensorFlow's protos and of KServe's grpc_predict_v2.proto, each re-exporting
# the classes that module has there: MODULE FROM NAME... per line.
n=0
while read -r mod from names; do
    [ -n "$mod" ] || continue
    path="$OUT/$(echo "$mod" | tr . /).py"
    dir=$(dirname "$path")
    mkdir -p "$dir"
    d=$dir
    while [ "$d" != "$OUT" ]; do
        [ -f "$d/__init__.py" ] || : > "$d/__init__.py"
        d=$(dirname "$d")
    done
    {
        echo "# Generated by scripts/gen_python_stubs.sh: $mod as TF Serving / TensorFlow /"
        echo "# KServe clients import it, re-exporting dcmserve's $from."
        echo "from $from import $(echo "$names" | sed 's/ /, /g')  # noqa: F401"
        echo "__all__ = [$(for x in $names; do printf '"%s", ' "$x"; done)]"
    } > "$path"
    n=$((n + 1))
done <<'EOF'
tensorflow_serving.apis.model_pb2 tf_serving_pb2 ModelSpec
tensorflow_serving.apis.predict_pb2 tf_serving_pb2 PredictRequest PredictResponse
tensorflow_serving.apis.get_model_metadata_pb2 tf_serving_pb2 SignatureDefMap GetModelMetadataRequest GetModelMetadataResponse
tensorflow_serving.apis.input_pb2 tf_serving_pb2 Input ExampleList ExampleListWithContext
tensorflow_serving.apis.classification_pb2 tf_serving_pb2 ClassificationRequest Class Classifications ClassificationResult ClassificationResponse
tensorflow_serving.apis.regression_pb2 tf_serving_pb2 RegressionRequest Regression RegressionResult RegressionResponse
tensorflow_serving.apis.inference_pb2 tf_serving_pb2 InferenceTask InferenceResult MultiInferenceRequest MultiInferenceResponse
tensorflow_serving.apis.get_model_status_pb2 tf_serving_pb2 GetModelStatusRequest ModelVersionStatus GetModelStatusResponse
tensorflow_serving.apis.model_management_pb2 tf_serving_pb2 ReloadConfigRequest ReloadConfigResponse
tensorflow_serving.apis.prediction_service_pb2 prediction_service_pb2 DESCRIPTOR
tensorflow_serving.apis.prediction_service_pb2_grpc prediction_service_pb2_grpc PredictionServiceStub PredictionServiceServicer add_PredictionServiceServicer_to_server
tensorflow_serving.apis.model_service_pb2 prediction_service_pb2 DESCRIPTOR
tensorflow_serving.apis.model_service_pb2_grpc prediction_service_pb2_grpc ModelServiceStub ModelServiceServicer add_ModelServiceServicer_to_server
tensorflow_serving.util.status_pb2 tf_serving_pb2 StatusProto
tensorflow_serving.config.model_server_config_pb2 tf_serving_pb2 ModelServerConfig ModelConfigList ModelConfig
tensorflow_serving.config.file_system_storage_path_source_pb2 tf_serving_pb2 FileSystemStoragePathSourceConfig
tensorflow_serving.config.logging_config_pb2 tf_serving_pb2 LoggingConfig
tensorflow.core.example.example_pb2 tf_serving_pb2 Example
tensorflow.core.example.feature_pb2 tf_serving_pb2 Feature Features
tensorflow.core.framework.types_pb2 tf_framework_pb2 DataType DT_INVALID DT_FLOAT DT_DOUBLE DT_INT32 DT_UINT8 DT_INT16 DT_INT8 DT_STRING DT_INT64 DT_BOOL DT_HALF DT_UINT16 DT_UINT32 DT_UINT64 DT_BFLOAT16
tensorflow.core.framework.tensor_pb2 tf_framework_pb2 TensorProto
tensorflow.core.framework.tensor_shape_pb2 tf_framework_pb2 TensorShapeProto
tensorflow.core.protobuf.meta_graph_pb2 tf_savedmodel_pb2 MetaGraphDef SignatureDef TensorInfo
grpc_predict_v2_pb2 kserve_pb2 ServerLiveRequest ServerLiveResponse ServerReadyRequest ServerReadyResponse ModelReadyRequest ModelReadyResponse ServerMetadataRequest ServerMetadataResponse ModelMetadataRequest ModelMetadataResponse InferParameter InferTensorContents ModelInferRequest ModelInferResponse
grpc_predict_v2_pb2_grpc inference_service_pb2_grpc GRPCInferenceServiceStub GRPCInferenceServiceServicer add_GRPCInferenceServiceServicer_to_server
EOF
# GetModelMetadataResponse.metadata holds tensorflow.Any (wire-identical to
# google.protobuf.Any, which dcmserve's C side does not link): give it the
# Pack / Unpack / Is / TypeName that TF Serving clients call on it.
cat >> "$OUT/tensorflow_serving/apis/get_model_metadata_pb2.py" <<'EOF'


def _install_any_helpers():
    import tf_savedmodel_pb2

    def type_name(self):
        return self.type_url.split("/")[-1]

    def is_(self, descriptor):
        return type_name(self) == descriptor.full_name

    def unpack(self, msg):
        if not is_(self, msg.DESCRIPTOR):
            return False
        msg.ParseFromString(self.value)
        return True

    def pack(self, msg, type_url_prefix="type.googleapis.com/"):
        self.type_url = type_url_prefix.rstrip("/") + "/" + msg.DESCRIPTOR.full_name
        self.value = msg.SerializeToString()

    for name, fn in (("TypeName", type_name), ("Is", is_), ("Unpack", unpack), ("Pack", pack)):
        if not hasattr(tf_savedmodel_pb2.Any, name):
            setattr(tf_savedmodel_pb2.Any, name, fn)


_install_any_helpers()
EOF
echo "gen_python_stubs.sh: $n modules under TF Serving's, TensorFlow's and KServe's names"
