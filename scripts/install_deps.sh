#!/bin/sh
# Installs the Debian 12 packages dcmserve needs to build, test and benchmark.
# Idempotent: only missing packages are installed; needs root (or sudo) when
# something is missing.
set -eu

# Usage: install_deps.sh [--list] [runtime|build|all|image]   (default all)
#   runtime  shared libraries the built daemon needs (what an image carries)
#   build    runtime + compilers, headers and generators (enough for `make run`)
#   all      build + test-only packages (clang/fuzzing, valgrind, Python test
#            modules, DICOM tools, kubectl, npm schema validators and
#            promtool for the deploy and monitoring tests)
#   image    what `make image` and `make test-image` need besides `all`:
#            podman (with its buildah), mmdebstrap for the Debian bases, and
#            runc (podman's runtime where crun cannot run: cgroup v1 hybrid)
# --list prints the packages of that set, one line, and installs nothing
# (scripts/build_image.sh puts them into its mmdebstrap bases).
RUNTIME_PKGS="libgrpc29 libprotobuf-c1 libuv1 libcjson1 zlib1g libsnappy1v5
libopenblas0-serial libjpeg62-turbo libcharls2 libopenjp2-7 libpng16-16 libmicrohttpd12
libgnutls30 libpcre2-8-0 libkissfft-float131"
BUILD_PKGS="build-essential cmake pkg-config git
libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
libuv1-dev libcjson-dev check libmicrohttpd-dev
zlib1g-dev libsnappy-dev libopenblas-dev libopenblas-serial-dev
libjpeg62-turbo-dev libcharls-dev libopenjp2-7-dev libpng-dev
libgnutls28-dev libpcre2-dev libkissfft-dev"
TEST_PKGS="clang libclang-rt-14-dev valgrind
python3 python3-numpy python3-pydicom python3-gdcm python3-onnx
python3-grpcio python3-protobuf python3-prometheus-client
libgdcm-tools openjph-tools python3-yaml
python3-grpc-tools protobuf-compiler-grpc libprotobuf-dev curl python3-h2 openssl"
# kubectl for the deploy test: Debian's kubernetes-client, unless some kubectl
# is already installed (other packages ship /usr/bin/kubectl and conflict).
IMAGE_PKGS="podman mmdebstrap runc"
command -v kubectl >/dev/null 2>&1 || TEST_PKGS="$TEST_PKGS kubernetes-client"
# npm for the Kubernetes schema validators of the deploy test (npm's
# kubernetes-models, into tests/k8s_schema/node_modules below), unless some
# node/npm is already installed; promtool (Debian's prometheus) checks the
# alert rules in deploy/monitoring/.
command -v npm >/dev/null 2>&1 || TEST_PKGS="$TEST_PKGS npm"
command -v promtool >/dev/null 2>&1 || TEST_PKGS="$TEST_PKGS prometheus"

# Ubuntu 24.04 (the base of NVIDIA's CUDA 13 images, used by the Dockerfile's
# gpu stages) names some of the same libraries differently (64-bit time_t
# rebuilds, libjpeg-turbo8). Not run by CI, which is Debian 12.
if [ -r /etc/os-release ] && grep -q '^VERSION_CODENAME=noble' /etc/os-release; then
    ubuntu() {
        for p in $1; do
            case "$p" in
                libgrpc29|libuv1|libpng16-16|libmicrohttpd12) echo "${p}t64" ;;
                libjpeg62-turbo) echo libjpeg-turbo8 ;;
                libjpeg62-turbo-dev) echo libjpeg-turbo8-dev ;;
                *) echo "$p" ;;
            esac
        done
    }
    RUNTIME_PKGS=$(ubuntu "$RUNTIME_PKGS")
    BUILD_PKGS=$(ubuntu "$BUILD_PKGS")
fi

LIST=0
if [ "${1:-}" = --list ]; then LIST=1; shift; fi
case "${1:-all}" in
    runtime) PKGS="$RUNTIME_PKGS" ;;
    build) PKGS="$RUNTIME_PKGS $BUILD_PKGS" ;;
    all) PKGS="$RUNTIME_PKGS $BUILD_PKGS $TEST_PKGS" ;;
    image) PKGS="$IMAGE_PKGS" ;;
    *) echo "install_deps.sh: expected runtime, build, all or image, got '$1'" >&2; exit 2 ;;
esac
if [ "$LIST" = 1 ]; then
    echo $PKGS
    exit 0
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    echo "install_deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# The schema validators, at the versions of tests/k8s_schema/package-lock.json.
# A failure (no registry) is not fatal: it_deploy then says it skipped them.
if [ "${1:-all}" = all ] && [ ! -d "$(dirname "$0")/../tests/k8s_schema/node_modules" ]; then
    echo "install_deps: npm ci in tests/k8s_schema"
    (cd "$(dirname "$0")/../tests/k8s_schema" && npm ci --no-audit --no-fund --loglevel=error) ||
        echo "install_deps: npm ci failed; it_deploy will skip the schema validation"
fi
