#!/bin/sh
# KServe v2 / Open Inference Protocol REST inference with DICOM files sent as
# raw bytes, using the protocol's binary tensor data extension:
#   examples/rest/infer_v2_binary.sh [-u http://localhost:8501] [-m demo_ct] FILE...
#
# The request body is a JSON header followed by the tensor's bytes; the
# Inference-Header-Content-Length header gives the JSON's length. For a BYTES
# tensor each element is a 4-byte little-endian length and then the element's
# bytes; the input's "binary_data_size" parameter gives the total. The reply
# here is plain JSON (outputs not requested in binary):
#   {"model_name": "demo_ct", "outputs": [{"name": "mean_hu", "datatype": "FP32",
#     "shape": [n], "data": [...]}, {"name": "tissue_fraction", "shape": [n, 4], ...}]}
# Needs curl and od/stat (coreutils).
set -eu
URL=http://localhost:8501
MODEL=demo_ct
while getopts u:m: o; do
    case $o in
        u) URL=$OPTARG ;;
        m) MODEL=$OPTARG ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: infer_v2_binary.sh [-u URL] [-m MODEL] FILE..." >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One byte with value $1 (0..255), written with an octal escape.
byte() { printf "\\$(printf '%03o' "$1")"; }
# A 4-byte little-endian unsigned length.
u32le() { byte $(($1 & 255)); byte $(($1 >> 8 & 255)); byte $(($1 >> 16 & 255)); byte $(($1 >> 24 & 255)); }

: > "$tmp/data"
for f in "$@"; do
    u32le "$(stat -c %s "$f")" >> "$tmp/data"
    cat "$f" >> "$tmp/data"
done
size=$(stat -c %s "$tmp/data")
printf '{"inputs": [{"name": "dicom", "datatype": "BYTES", "shape": [%d], "parameters": {"binary_data_size": %d}}], "outputs": [{"name": "mean_hu"}, {"name": "tissue_fraction"}]}' \
    "$#" "$size" > "$tmp/header"
cat "$tmp/header" "$tmp/data" > "$tmp/body"
curl -sS --fail-with-body -H 'Content-Type: application/octet-stream' \
    -H "Inference-Header-Content-Length: $(stat -c %s "$tmp/header")" \
    --data-binary @"$tmp/body" "$URL/v2/models/$MODEL/infer"
echo
