#!/bin/sh
# bench_kernels.sh - builds bench/bench_kernels.c against an existing build
# directory and runs it: GFLOP/s of the fast Conv2D/MatMul kernels vs the
# reference (im2col + OpenBLAS) ones at 1 and 2 threads.
#
# Usage: bench/bench_kernels.sh [BUILD_DIR] [ITERATIONS]
#   BUILD_DIR  a RelWithDebInfo build (default: build)
#   BENCH_ISA=c|avx2|avx512 in the environment forces a micro-kernel family.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
iters=${2:-20}
case $build in /*) ;; *) build=$src/$build ;; esac
out=$build/bench_kernels
pkgs="libprotobuf-c grpc libuv libcjson zlib openblas charls libopenjp2 libjpeg libpng"
# shellcheck disable=SC2086
cc -std=gnu11 -O2 -D_GNU_SOURCE -Wall -Wextra -Werror \
    -I"$src/common" -I"$src/runtime" -I"$src/kernels" -I"$src/kernels/cpu" \
    -I"$build/gen" "$src/bench/bench_kernels.c" -o "$out" \
    "$build/libdcm_server.a" "$build/libdcm_core.a" \
    "$build/libdcm_proto.a" $(pkg-config --libs $pkgs) -lpthread -lm
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "flags: $(grep -o -w 'avx2\|fma\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
exec "$out" "$iters"
