#!/bin/sh
# Installs the Debian 12 packages dcmserve needs to build, test and benchmark.
# Idempotent: only missing packages are installed; needs root (or sudo) when
# something is missing.
set -eu

PKGS="build-essential cmake pkg-config git
libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
libuv1-dev libcjson-dev check libmicrohttpd-dev
zlib1g-dev libsnappy-dev libopenblas-dev libopenblas-serial-dev
libjpeg62-turbo-dev libcharls-dev libopenjp2-7-dev libpng-dev
clang libclang-rt-14-dev valgrind
python3 python3-numpy python3-pydicom python3-gdcm python3-onnx
python3-grpcio python3-protobuf python3-prometheus-client
libgdcm-tools openjph-tools"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

echo "install_deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
