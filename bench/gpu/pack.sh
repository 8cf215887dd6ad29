#!/bin/sh
# pack.sh - everything bench/gpu/run.sh needs on a lent GPU machine, which has
# the NVIDIA driver, CUDA, cuBLAS and cuDNN but no package registry: the
# dcmserve binary, the gpu-labelled test binaries and the kernel benchmark,
# the shared libraries they need that are neither CUDA's nor the C library's
# (gRPC, abseil, protobuf-c, libuv, cJSON, OpenBLAS, codecs ...; found with
# ldd), the benchmark models (the imported CT classifier resnet512 and
# segmenter unet256 with a DICOM input, and the bundled demo_ct), a
# 512x512 CT DICOM file and five of pydicom's test files. One xz archive in build/gpu_pack/ (ignored by git),
# which a device run carries (the carried tree is limited to 64 MiB).
#
# usage: sh bench/gpu/pack.sh [BUILD_DIR]     (after `make`, from anywhere)
# Needs /usr/bin/python3 with onnx and pydicom (the test dependencies).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out="$build/gpu_pack"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/models" "$stage/data" "$out"

[ -x "$build/bench_gpu_dicom" ] || {
    echo "pack.sh: $build has no CUDA build (bench_gpu_dicom missing): configure with DCMSERVE_CUDA=ON" >&2
    exit 1
}
cp "$build/dcmserve" "$build/bench_gpu_dicom" "$build/dcmserve-bench" "$stage/bin/"
# The gpu-labelled tests, as ctest lists them here.
tests=$(cd "$build" && ctest -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
for t in $tests; do cp "$build/check_$t" "$stage/bin/"; done
echo "$tests" > "$stage/bin/gpu_tests.txt"

# Shared libraries: all but CUDA's, the driver's and glibc's own.
for b in "$stage"/bin/*; do
    [ -x "$b" ] || continue
    ldd "$b" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda*|libcudart*|\
    libcublas*|libcudnn*|libnvidia*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
    esac
done

# Models: the imported CT classifier and segmenter (DICOM bytes in, window
# 40/400, resized to the network's size) and the demo model.
gen=$(mktemp -d)
/usr/bin/python3 "$src/tests/tools/gen_onnx_models.py" --bench "$gen" >/dev/null
"$build/dcmserve" import-onnx "$gen/resnet512.onnx" --output_dir "$stage/models/ct_classifier/1" \
    --dicom_input image --window 40,400 --size 512x512 --log_level error
"$build/dcmserve" import-onnx "$gen/unet256.onnx" --output_dir "$stage/models/ct_segmenter/1" \
    --dicom_input image --window 40,400 --size 256x256 --log_level error
rm -rf "$gen"
cp -r "$src/models/demo_ct" "$stage/models/demo_ct"
/usr/bin/python3 "$src/bench/make_inputs.py" "$stage/data" >/dev/null
find "$stage/data" -type f ! -name ct_512.dcm -delete
# The pydicom test files check_cuda_backend's dicom_split reads (native 16-bit,
# JPEG 2000, RLE, colour RLE; 68 KiB): the GPU machine may lack pydicom.
pd=$(/usr/bin/python3 -c 'import os, pydicom; print(os.path.join(os.path.dirname(pydicom.__file__), "data", "test_files"))')
mkdir -p "$stage/data/pydicom"
for f in CT_small.dcm MR_small.dcm JPEG2000.dcm MR_small_RLE.dcm SC_rgb_rle.dcm; do
    cp "$pd/$f" "$stage/data/pydicom/"
done

tar -C "$stage" -cJf "$out/dcmserve_gpu.tar.xz" .
size=$(du -k "$out/dcmserve_gpu.tar.xz" | cut -f1)
echo "pack.sh: $out/dcmserve_gpu.tar.xz (${size} KiB): $(ls "$stage/bin" | tr '\n' ' ')"
echo "pack.sh: $(ls "$stage/lib" | wc -l) shared libraries, models: $(ls "$stage/models" | tr '\n' ' ')"
[ "$size" -lt 60000 ] || echo "pack.sh: WARNING: over 60 MiB; the device tool carries 64 MiB at most" >&2
