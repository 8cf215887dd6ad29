#!/bin/sh
# Installs onnxruntime-node (CPU only) from npm into bench/node_modules
# (git-ignored). Used by tests/tools/gen_onnx_models.py for the reference
# outputs and by bench/bench_onnx.sh; `make test` never needs it.
# The package's install hook would fetch the CUDA provider from another
# host; we only want the CPU build that ships inside the npm package.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
if [ -f node_modules/onnxruntime-node/package.json ]; then exit 0; fi
ONNXRUNTIME_NODE_INSTALL_CUDA=skip ONNXRUNTIME_NODE_INSTALL=skip \
    npm install --no-audit --no-fund onnxruntime-node@1.30.0
