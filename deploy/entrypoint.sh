#!/bin/sh
# dcmserve-entrypoint: the container's entrypoint, after TensorFlow Serving's
# image (tf_serving_entrypoint.sh). Installed by deploy/install.sh as
# PREFIX/bin/dcmserve-entrypoint, beside the binary it starts.
#
# Environment (defaults in brackets):
#   MODEL_NAME       [demo_ct]   the model's name in requests
#   MODEL_BASE_PATH  [/models]   the model is served from $MODEL_BASE_PATH/$MODEL_NAME
#   GRPC_PORT        [8500]      --port
#   REST_API_PORT    [8501]      --rest_api_port (0 turns REST off)
# Every argument is passed on to `dcmserve serve` after these flags, so a later
# --port=... wins. When the arguments name a model themselves
# (--model_config_file, --model_name or --model_base_path), MODEL_NAME and
# MODEL_BASE_PATH are not turned into flags (dcmserve refuses
# --model_config_file together with --model_name / --model_base_path).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# Libraries deploy/install.sh put beside the binary, if any.
if [ -d "$here/../lib" ]; then
    LD_LIBRARY_PATH="$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
fi
MODEL_NAME=${MODEL_NAME:-demo_ct}
MODEL_BASE_PATH=${MODEL_BASE_PATH:-/models}
GRPC_PORT=${GRPC_PORT:-8500}
REST_API_PORT=${REST_API_PORT:-8501}

model_given=0
for a in "$@"; do
    case "$a" in
        --model_config_file|--model_config_file=*|-model_config_file|-model_config_file=*|\
        --model_name|--model_name=*|-model_name|-model_name=*|\
        --model_base_path|--model_base_path=*|-model_base_path|-model_base_path=*)
            model_given=1 ;;
    esac
done

if [ "$model_given" = 1 ]; then
    exec "$here/dcmserve" serve --port="$GRPC_PORT" --rest_api_port="$REST_API_PORT" "$@"
fi
exec "$here/dcmserve" serve --port="$GRPC_PORT" --rest_api_port="$REST_API_PORT" \
    --model_name="$MODEL_NAME" --model_base_path="$MODEL_BASE_PATH/$MODEL_NAME" "$@"
