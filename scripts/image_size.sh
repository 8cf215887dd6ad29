#!/bin/sh
# Estimates the container images' uncompressed sizes without a Docker engine
# (docs/deploy.md, "Image sizes"):
#   scripts/image_size.sh [BUILD_DIR]      (default build)
#
#   ours      deploy/install.sh with STRIP=1 into a staging root, as the
#             Dockerfile's build stage does; bytes of the staged files
#   packages  scripts/install_deps.sh runtime's packages and everything they
#             depend on (apt-cache depends --recurse, no recommends), less the
#             packages debian:12-slim already has (Priority required, and apt
#             with its dependencies); the sum of their Installed-Size
#   base      debian:12-slim: the Installed-Size of the packages it has, an
#             upper bound (the slim image also drops documentation and man
#             pages); the gpu base: the CUDA 13 runtime, cuDNN 9 and NCCL
#             shared libraries of a local CUDA toolkit (CUDA_HOME, default
#             /usr/local/cuda), when one is installed, plus Ubuntu 24.04's
#             own size as given below
# Sizes in MB (10^6 bytes). Debian 12 only (apt-cache on this machine).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# ubuntu:24.04's uncompressed size as `docker images` reports it (not
# measurable here: no engine); only used for the gpu line.
UBUNTU_2404_MB=${UBUNTU_2404_MB:-78}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
STRIP=1 sh deploy/install.sh "$tmp/opt/dcmserve" "$BUILD" >/dev/null
ours=$(du -sb "$tmp/opt/dcmserve" | awk '{print $1}')

runtime=$(sed -n '/^RUNTIME_PKGS="/,/"/p' scripts/install_deps.sh | tr -d '"' | sed 's/^RUNTIME_PKGS=//')
# Dependency closures from apt's package lists (Depends and Pre-Depends; of
# alternatives "a | b" the smallest; virtual
# packages by a required provider, else the first). Prints: kB of the extra packages, kB of the base, the names.
apt-cache dumpavail > "$tmp/avail"
set -- $(/usr/bin/python3 - "$tmp/avail" $runtime <<'PY'
import re, sys
pk, prov = {}, {}
for block in open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n\n"):
    f = dict(re.findall(r"^([\w-]+): (.*)$", block, re.M))
    if "Package" not in f or f["Package"] in pk:
        continue
    pk[f["Package"]] = f
    for v in f.get("Provides", "").split(","):
        v = v.split("(")[0].strip()
        # A virtual package's provider: a required one if any (awk -> mawk).
        if v and (v not in prov or f.get("Priority") == "required"):
            prov[v] = f["Package"]
def closure(names):
    seen, todo = set(), list(names)
    while todo:
        n = todo.pop()
        n = n if n in pk else prov.get(n)
        if n is None or n in seen:
            continue
        seen.add(n)
        f = pk[n]
        for field in ("Pre-Depends", "Depends"):
            for group in filter(None, f.get(field, "").split(",")):
                alts = [re.split(r"[\s(:]", a.strip())[0] for a in group.split("|")]
                # Of alternatives the smallest (usr-is-merged, not usrmerge + perl).
                have = [a for a in alts if a in pk] or alts
                todo.append(min(have, key=lambda a: int(pk.get(a, {}).get("Installed-Size", 0))))
    return seen
kb = lambda s: sum(int(pk[n].get("Installed-Size", 0)) for n in s)
base = closure([n for n, f in pk.items() if f.get("Priority") == "required"] + ["apt"])
need = closure(sys.argv[2:])
extra = sorted(need - base)
print(kb(extra), kb(base), len(base), " ".join(extra))
PY
)
pkg_kb=$1
base_kb=$2
base_n=$3
shift 3
extra="$*"
mb() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1e6}'; }
echo "ours (bin/dcmserve stripped, entrypoint, demo model): $(mb "$ours") MB"
echo "runtime packages not in debian:12-slim ($(echo $extra | wc -w)): $(mb $((pkg_kb * 1024))) MB"
echo "  $(echo $extra | tr '\n' ' ')"
echo "debian:12-slim, upper bound ($base_n packages): $(mb $((base_kb * 1024))) MB"
cpu=$((ours + pkg_kb * 1024 + base_kb * 1024))
echo "cpu image, estimate: $(mb $cpu) MB"

if [ -d "$CUDA_HOME/lib64" ]; then
    # What NVIDIA's runtime + cudnn-runtime images carry: the CUDA math and
    # runtime libraries, NVRTC / nvJitLink, NCCL and cuDNN (not the profiler,
    # NVVM or static libraries of the toolkit).
    cuda=$(find "$CUDA_HOME/lib64/" -maxdepth 1 -type f \( -name 'libcudart.so*' \
        -o -name 'libcublas*.so*' -o -name 'libcufft*.so*' -o -name 'libcurand.so*' \
        -o -name 'libcusolver*.so*' -o -name 'libcusparse.so*' -o -name 'libnpp*.so*' \
        -o -name 'libnvJitLink.so*' -o -name 'libnvrtc*.so*' -o -name 'libnvjpeg.so*' \
        -o -name 'libnccl.so*' -o -name 'libcudnn*.so*' \) -printf '%s %f\n' |
        awk '{s += $1} END {print s + 0}')
    # Ubuntu 24.04's names for the same runtime libraries are about the same size.
    gpu=$(awk -v a="$ours" -v b="$pkg_kb" -v c="$cuda" -v u="$UBUNTU_2404_MB" \
        'BEGIN {printf "%.0f", a + b * 1024 + c + u * 1e6}')
    echo "CUDA runtime + cuDNN + NCCL libraries in $CUDA_HOME/lib64: $(mb "$cuda") MB"
    echo "gpu image, estimate (ubuntu:24.04 taken as $UBUNTU_2404_MB MB): $(mb $gpu) MB"
else
    echo "gpu image: no CUDA toolkit in $CUDA_HOME to measure its libraries"
fi
