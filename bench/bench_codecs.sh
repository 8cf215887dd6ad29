#!/bin/sh
# Median ms per 512x512 CT frame: dcm_codec_decode (C, one thread) against
# pydicom + GDCM (gdcm_handler.get_pixeldata) on the same gdcmconv-made frames.
# Wall clock and thread CPU time; on a shared machine only the CPU column is stable.
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
printf '%-14s %24s %24s\n' "" "dcmserve wall / CPU ms" "pydicom+GDCM wall / CPU ms"
paste -d" " "$work/dcmserve.txt" "$work/pydicom.txt" | while read -r n a ac _ b bc; do
    printf '%-14s %13s / %8s %15s / %8s\n' "$n" "$a" "$ac" "$b" "$bc"
done
