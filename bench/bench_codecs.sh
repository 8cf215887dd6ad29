#!/bin/sh
# Median ms per 512x512 CT frame: dcm_codec_decode (C, one thread) against
# pydicom + GDCM (gdcm_handler.get_pixeldata) on the same gdcmconv-made frames.
# Usage: bench/bench_codecs.sh [build-dir] (default build; needs libdcm_core.a)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
bld=${1:-$src/build}
work=$bld/bench_codecs
mkdir -p "$work"
/usr/bin/python3 "$here/bench_codecs.py" "$work" 21 2>/dev/null > "$work/pydicom.txt"
cc -O2 -I"$src/runtime" -I"$src/common" -I"$src/tests" "$here/bench_codecs.c" \
    "$src/tests/util_codecs.c" "$bld/libdcm_core.a" \
    $(pkg-config --libs charls libopenjp2 libjpeg zlib) -lm -lpthread -o "$work/bench_codecs"
"$work/bench_codecs" "$work" 21 > "$work/dcmserve.txt"
printf '%-14s %12s %16s\n' syntax "dcmserve ms" "pydicom+GDCM ms"
paste -d" " "$work/dcmserve.txt" "$work/pydicom.txt" | while read -r n a _ b; do
    printf '%-14s %12s %16s\n' "$n" "$a" "$b"
done
