#!/bin/sh
# Regenerates the bundled demo model models/demo_ct/1 with dcmserve's own
# graph builder and tensor-bundle writer. Usage: scripts/make_demo_model.sh [path/to/dcmserve]
set -eu
cd "$(dirname "$0")/.."
BIN=${1:-build/dcmserve}
rm -rf models/demo_ct/1
mkdir -p models/demo_ct
"$BIN" make-demo-model models/demo_ct/1
