#!/bin/sh
# scripts/build_image.sh [TAG]     (`make image`; TAG defaults to dcmserve:cpu)
# Builds the Dockerfile's `cpu` target without any container registry.
#
# With podman (sh scripts/install_deps.sh image):
#   1. Two Debian 12 bases made by mmdebstrap from Debian's packages, once per
#      set of inputs: "build" (apt + install_deps.sh build's packages) and
#      "runtime" (apt + install_deps.sh runtime's packages), both slimmed as
#      debian:12-slim is (no man pages, documentation but the copyright files,
#      locales). mmdebstrap takes the .deb files it can from this machine's
#      apt cache (hard links) and downloads the others from Debian's mirror;
#      its apt cache and package lists are emptied in the base. Each base is
#      imported into podman's store as localhost/dcmserve-base:KIND-KEY, KEY
#      a hash of install_deps.sh, the mmdebstrap options and mmdebstrap's version, so a
#      later run reuses it (`podman rmi` it to make it again).
#   2. podman build --target cpu --pull=never --network=none from those two
#      bases (the Dockerfile's BUILD_BASE / RUNTIME_BASE): install_deps.sh
#      finds everything installed, nothing is fetched; dcmserve is compiled in
#      the build stage. --format docker keeps the HEALTHCHECK (OCI's image
#      format has none).
#   3. Prints the image's size.
# Without podman but with a Docker daemon: DOCKER_BUILDKIT=1 docker build
# --target cpu, from debian:12 and debian:12-slim of Docker's registry.
#
# IMAGE_ENGINE_OPTS (podman only): extra global podman options.
# Where /sys/fs/cgroup is not cgroup v2 only (v1 or hybrid), podman runs runc
# rather than crun (crun: "cgroups in hybrid mode not supported"); the RUN
# steps get rlimits no higher than this shell's (podman's defaults are higher
# and need CAP_SYS_RESOURCE). tests/it_image.py runs the image the same way
# (`sh scripts/build_image.sh --podman-opts` prints these options).
set -eu
cd "$(dirname "$0")/.."

podman_opts() {
    o=""
    if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" != cgroup2fs ] && command -v runc >/dev/null 2>&1; then
        o="--runtime=runc"
    fi
    echo "$o"
}
# rlimits for the containers: this shell's hard limits (/proc/self/limits:
# dash and bash name the process limit differently), nproc at most 32768
# (podman build's default; more failed here even below the hard limit).
ulimit_opts() {
    awk '/^Max processes/ {p = $4} /^Max open files/ {n = $5}
        END {
            if (p == "unlimited" || p + 0 > 32768) p = 32768
            if (n == "unlimited") n = 1048576
            printf "--ulimit=nofile=%s:%s --ulimit=nproc=%s:%s\n", n, n, p, p
        }' /proc/self/limits
}
if [ "${1:-}" = --podman-opts ]; then
    echo "$(podman_opts) ${IMAGE_ENGINE_OPTS:-}"
    exit 0
fi
if [ "${1:-}" = --ulimit-opts ]; then
    ulimit_opts
    exit 0
fi

TAG=${1:-dcmserve:cpu}
start=$(date +%s)

if ! command -v podman >/dev/null 2>&1; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        DOCKER_BUILDKIT=1 docker build --target cpu -t "$TAG" .
        echo "build_image: $TAG built by docker in $(($(date +%s) - start)) s," \
            "$(docker image inspect --format '{{.Size}}' "$TAG" | awk '{printf "%.1f", $1 / 1e6}') MB"
        exit 0
    fi
    echo "build_image: no podman and no Docker daemon: sh scripts/install_deps.sh image" >&2
    exit 1
fi
command -v mmdebstrap >/dev/null 2>&1 || {
    echo "build_image: no mmdebstrap: sh scripts/install_deps.sh image" >&2
    exit 1
}
PODMAN="podman $(podman_opts) ${IMAGE_ENGINE_OPTS:-}"

# The bases' mmdebstrap options (slimmed as debian:12-slim is); with
# install_deps.sh and mmdebstrap's version they make the cache KEY.
MMDEB_OPTS="--variant=apt
--dpkgopt=path-exclude=/usr/share/man/*
--dpkgopt=path-exclude=/usr/share/doc/*
--dpkgopt=path-include=/usr/share/doc/*/copyright
--dpkgopt=path-exclude=/usr/share/locale/*
--dpkgopt=path-exclude=/usr/share/info/*
--dpkgopt=force-unsafe-io"
KEY=$({ cat scripts/install_deps.sh; echo "$MMDEB_OPTS"; mmdebstrap --version; } | sha256sum | cut -c1-16)
mkdir -p build/image

# base KIND PACKAGES: makes localhost/dcmserve-base:KIND-KEY unless podman has it.
base() {
    ref="localhost/dcmserve-base:$1-$KEY"
    if $PODMAN image exists "$ref"; then
        echo "build_image: reusing $ref" >&2
        echo "$ref"
        return
    fi
    tar="build/image/base-$1.tar"
    t0=$(date +%s)
    echo "build_image: mmdebstrap bookworm ($1: $2) -> $ref" >&2
    # The .deb files of this machine's apt cache: hard links when the cache
    # and mmdebstrap's temporary chroot share a file system, else copies.
    set -f
    # shellcheck disable=SC2086
    mmdebstrap $MMDEB_OPTS --include="$(echo $2 | tr ' ' ,)" \
        --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
        --setup-hook='ls /var/cache/apt/archives/*.deb >/dev/null 2>&1 || exit 0;
            cp -l /var/cache/apt/archives/*.deb "$1"/var/cache/apt/archives/ 2>/dev/null ||
            cp /var/cache/apt/archives/*.deb "$1"/var/cache/apt/archives/' \
        bookworm "$tar" </dev/null >"build/image/mmdebstrap-$1.log" 2>&1 || {
        tail -20 "build/image/mmdebstrap-$1.log" >&2
        echo "build_image: mmdebstrap failed (build/image/mmdebstrap-$1.log)" >&2
        exit 1
    }
    set +f
    $PODMAN import --quiet "$tar" "$ref" >/dev/null
    rm -f "$tar"
    echo "build_image: $ref made in $(($(date +%s) - t0)) s" >&2
    echo "$ref"
}
# The two bases at once: mmdebstrap mostly waits on the mirror and on dpkg.
base build "$(sh scripts/install_deps.sh --list build)" >build/image/ref-build &
pid=$!
runtime_base=$(base runtime "$(sh scripts/install_deps.sh --list runtime)") || { kill "$pid" 2>/dev/null; exit 1; }
wait "$pid" || exit 1
build_base=$(cat build/image/ref-build)

t0=$(date +%s)
# shellcheck disable=SC2046
$PODMAN build --format docker --pull=never --network=none $(ulimit_opts) \
    --build-arg BUILD_BASE="$build_base" --build-arg RUNTIME_BASE="$runtime_base" \
    --target cpu -t "$TAG" .
end=$(date +%s)
size=$($PODMAN image inspect --format '{{.Size}}' "$TAG")
echo "build_image: $TAG built in $((end - t0)) s (podman build) and $((end - start)) s in all;" \
    "$(awk -v b="$size" 'BEGIN {printf "%.1f", b / 1e6}') MB uncompressed ($size bytes)"
