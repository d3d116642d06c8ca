#!/usr/bin/env bash
# Downloads (on a Debian bookworm CPU machine with network) the .debs of every build- and
# run-time dependency of vexp's GPU build that a bare GPU machine lacks, beyond its
# PyTorch (LibTorch), CUDA and NCCL, into the ignored folder gpu-bundle/ (docs/gpu.md,
# "The GPU bundle"):
#
#   tools/gpu/bundle.sh [DIR]          (default: gpu-bundle)
#
# Then checks the bundle is closed: every shared library it holds needs only libraries
# it holds or that every Linux has (glibc's, libstdc++, libgcc_s). Writes DIR/bundle.env
# (the packages, the highest GLIBC_x.y and GLIBCXX_x.y any of its libraries needs:
# tools/gpu/build-with-bundle.sh compares them with the GPU machine's) and prints the
# bundle's size and the size of a device call that carries it with the working tree
# (at most 64 MiB).
#
# Left out (they do not fit, and the GPU build does not need them; docs/gpu.md):
# libavformat / libavcodec (FFmpeg's codec closure is ~61 MiB of .debs; the build uses
# -DVEXP_VIDEO=OFF: JPEG frame folders only) and Open MPI (comm/mpi is not built; one
# GPU needs no MPI, comm/nccl meets through its rendezvous file).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=$(realpath -m "${1:-$root/gpu-bundle}")
budget_mib=64

# What the GPU build needs (build-with-bundle.sh: -DVEXP_VIDEO=OFF -DVEXP_HEADER_ONLY_LOGGING=ON).
packages=(
  libtomlplusplus-dev libtomlplusplus3          # toml++ (compiled library)
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 # used header-only; the .so's only satisfy their CMake configs
  libcli11-dev nlohmann-json3-dev                # header-only
  libsqlite3-dev libsqlite3-0                    # vexp sweep's results store
  libturbojpeg0-dev libturbojpeg0                # JPEG frame folders
  libswscale-dev libswscale6 libavutil-dev libavutil57  # libs/media scales frames with libswscale
  libgtest-dev                                   # the test targets (the CUDA kernel test, check_comm_nccl)
)
# libavutil57's shared-library closure (VA-API, VDPAU, OpenCL, X11 loaders it links).
packages+=(
  libva2 libva-drm2 libva-x11-2 libvdpau1 libdrm2 libdrm-common libmfx1 ocl-icd-libopencl1
  libx11-6 libx11-data libx11-xcb1 libxau6 libxcb1 libxcb-dri3-0 libxdmcp6 libxext6 libxfixes3 libbsd0 libmd0
)
# What every Linux has: never bundled, allowed as a dependency.
base_libs='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so'

command -v apt-get >/dev/null && command -v dpkg >/dev/null || { echo "bundle.sh: needs apt-get and dpkg (a Debian machine)" >&2; exit 1; }
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] || echo "bundle.sh: warning: this machine is ${PRETTY_NAME:-unknown}, the bundle is meant to hold bookworm's packages" >&2

mkdir -p "$dest/debs"
rm -f "$dest"/debs/*.deb
echo "== downloading ${#packages[@]} packages into $dest/debs"
(cd "$dest/debs" && apt-get -o APT::Sandbox::User=root download "${packages[@]}" >/dev/null)

# ---- closure and symbol-version check, on an unpacked copy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for d in "$dest"/debs/*.deb; do dpkg -x "$d" "$tmp"; done
mapfile -t sos < <(find "$tmp" -type f -name '*.so*' | sort)
declare -A have=()
while read -r f; do have[$(basename "$f")]=1; done < <(find "$tmp" \( -type f -o -type l \) -name '*.so*')
missing=()
for so in "${sos[@]}"; do
  while read -r need; do
    [[ $need =~ $base_libs ]] && continue
    [ -n "${have[$need]:-}" ] || missing+=("$need (needed by ${so#"$tmp"/})")
  done < <(objdump -p "$so" 2>/dev/null | awk '$1 == "NEEDED" {print $2}')
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bundle.sh: the bundle is not closed, add the packages of:" >&2
  printf '  %s\n' "${missing[@]}" | sort -u >&2
  exit 1
fi
max_version() {  # PREFIX: the highest PREFIX_x.y[.z] any bundled library needs
  for so in "${sos[@]}"; do objdump -T "$so" 2>/dev/null; done | grep -o "(${1}_[0-9.]*)" | tr -d '()' \
    | sed "s/^${1}_//" | sort -uV | tail -1
}
glibc_max=$(max_version GLIBC)
glibcxx_max=$(max_version GLIBCXX)
glibc_by=$(for so in "${sos[@]}"; do objdump -T "$so" 2>/dev/null | grep -F "(GLIBC_${glibc_max})" >/dev/null && basename "$so"; done | tr '\n' ' '; true)

versions=$(for d in "$dest"/debs/*.deb; do dpkg-deb --show --showformat='${Package}=${Version} ' "$d"; done)
cat >"$dest/bundle.env" <<ENV
# Written by tools/gpu/bundle.sh on $(date -u +%Y-%m-%dT%H:%MZ) ($PRETTY_NAME); read by tools/gpu/build-with-bundle.sh.
BUNDLE_DEBIAN=${VERSION_CODENAME:-unknown}
BUNDLE_GLIBC_MAX=$glibc_max
BUNDLE_GLIBCXX_MAX=${glibcxx_max:-none}
BUNDLE_PACKAGES="${versions% }"
ENV

bytes=$(du -sb "$dest/debs" | cut -f1)
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "== $(ls "$dest"/debs/*.deb | wc -l) packages, $((bytes / 1024)) KiB of .debs ($(du -sb "$tmp" | cut -f1 | awk '{printf "%.1f", $1/1048576}') MiB unpacked), closed"
echo "   highest symbol versions needed: GLIBC_$glibc_max (by ${glibc_by% }), GLIBCXX_${glibcxx_max:-none}"
echo "   with the working tree ($((tree / 1024)) KiB): $(( (bytes + tree) / 1024 )) KiB of the device call's $budget_mib MiB"
if [ $((bytes + tree)) -gt $((budget_mib * 1024 * 1024)) ]; then
  echo "bundle.sh: the bundle and the tree exceed $budget_mib MiB" >&2
  exit 1
fi
