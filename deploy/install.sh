#!/bin/sh
# deploy/install.sh PREFIX [BUILD_DIR]
# Installs what the images carry into PREFIX:
#   PREFIX/bin/dcmserve          the built daemon
#   PREFIX/bin/dcmserve-entrypoint  the container entrypoint (deploy/entrypoint.sh)
#   PREFIX/lib/                  shared libraries it needs that are not under
#                                the system library folders (none today: our
#                                own libraries link statically)
#   PREFIX/models/demo_ct/       the demo model
# BUILD_DIR defaults to ./build. Run from the repository root. STRIP=1 strips
# the installed binary's debug information (the container images do).
set -eu
[ $# -ge 1 ] || { echo "usage: deploy/install.sh PREFIX [BUILD_DIR]" >&2; exit 2; }
PREFIX=$1
BUILD=${2:-build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN="$BUILD/dcmserve"
[ -x "$BIN" ] || { echo "install.sh: $BIN is not a built binary (build first)" >&2; exit 1; }

mkdir -p "$PREFIX/bin" "$PREFIX/lib" "$PREFIX/models"
install -m 0755 "$BIN" "$PREFIX/bin/dcmserve"
[ "${STRIP:-0}" = 1 ] && strip --strip-unneeded "$PREFIX/bin/dcmserve"
install -m 0755 "$SRC/deploy/entrypoint.sh" "$PREFIX/bin/dcmserve-entrypoint"
# Copy libraries resolved outside the system folders (e.g. a local build of a dependency).
ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    case "$lib" in
        /lib/*|/lib64/*|/usr/lib/*|/usr/lib64/*) ;;
        *) install -m 0644 "$lib" "$PREFIX/lib/" ;;
    esac
done
rm -rf "$PREFIX/models/demo_ct"
cp -R "$SRC/models/demo_ct" "$PREFIX/models/demo_ct"
echo "install.sh: installed into $PREFIX"
