#!/bin/sh
# bench_kernels.sh - builds bench/bench_kernels.c (CMake target bench_kernels)
# in an existing build directory and runs it: GFLOP/s of the fast Conv2D/MatMul
# kernels vs the reference (im2col + OpenBLAS) ones at 1 and 2 threads.
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
cmake --build "$build" --target bench_kernels >/dev/null
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "flags: $(grep -o -w 'avx2\|fma\|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
exec "$out" "$iters"
