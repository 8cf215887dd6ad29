#!/bin/sh
# TensorFlow Serving REST :predict with DICOM files as base64 strings.
#   examples/rest/predict_b64.sh [-u http://localhost:8501] [-m demo_ct] FILE...
# Prints the JSON reply: {"predictions": [{"mean_hu": ..., "tissue_fraction": [...]}, ...]},
# one prediction per file, in order. Needs curl and base64 (coreutils).
# The model's only input is "dicom", so each instance is just {"b64": "..."}:
# TF Serving's row format, where {"b64": ...} marks binary data in a string tensor.
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
[ $# -ge 1 ] || { echo "usage: predict_b64.sh [-u URL] [-m MODEL] FILE..." >&2; exit 2; }

body=$(mktemp)
trap 'rm -f "$body"' EXIT
{
    printf '{"instances": ['
    sep=""
    for f in "$@"; do
        printf '%s{"b64": "' "$sep"
        base64 -w0 "$f"
        printf '"}'
        sep=", "
    done
    printf ']}'
} > "$body"
curl -sS --fail-with-body -H 'Content-Type: application/json' \
    --data-binary @"$body" "$URL/v1/models/$MODEL:predict"
echo
