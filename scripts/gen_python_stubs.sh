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
