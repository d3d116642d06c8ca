#!/usr/bin/env bash
# The GPU bundle's proof on a CPU machine (docs/gpu.md, "The GPU bundle"): builds vexp
# in a clean Debian root that has only a compiler, CMake, make and ninja, the bundle
# and a CPU LibTorch (Debian's libtorch-dev .debs unpacked with dpkg -x into /opt/torch,
# not installed, without any package the bundle holds), through the same
# tools/gpu/build-with-bundle.sh that tools/bench/gpu.sh runs on the GPU machine; then
# runs a tiny CPU `vexp run` with a resume, the frame-folder data path and a few tests
# there, and shows where every dependency was found. As root, from the repository root:
#
#   tools/gpu/bundle.sh && tools/gpu/rehearse.sh
#
# ROOT (default /work/roots/clean, outside the repository) is made once with debootstrap
# and kept; the tree is copied into ROOT/src afresh each time, as the device tool copies
# the working tree and the carried bundle. JOBS (default: every core). REUSE_BUILD=1
# keeps ROOT/build (an incremental build, as on a still-warm GPU machine; the printed
# build time is then not the clean-root one).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
rootfs=${ROOT:-/work/roots/clean}
suite=bookworm
mirror=${MIRROR:-http://deb.debian.org/debian}
jobs=${JOBS:-$(nproc)}
[ "$(id -u)" = 0 ] || { echo "rehearse.sh: needs root (debootstrap, chroot)" >&2; exit 1; }
[ -f "$repo/gpu-bundle/bundle.env" ] || { echo "rehearse.sh: no gpu-bundle/ (run tools/gpu/bundle.sh first)" >&2; exit 1; }
case "$rootfs" in "$repo"/*) echo "rehearse.sh: ROOT must be outside the repository" >&2; exit 1 ;; esac
t0=$SECONDS

# ---- 1. the clean root (cached)
if [ ! -x "$rootfs/usr/bin/cmake" ]; then
  echo "== debootstrap $suite (minbase + g++ cmake make ninja-build) into $rootfs"
  rm -rf "$rootfs.tmp"
  debootstrap --variant=minbase --include=g++,cmake,make,ninja-build "$suite" "$rootfs.tmp" "$mirror" >"$rootfs.debootstrap.log" 2>&1 \
    || { tail -20 "$rootfs.debootstrap.log"; exit 1; }
  mv "$rootfs.tmp" "$rootfs"
fi
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
# A signal exits through the EXIT trap too, so /proc is never left mounted in the root.
trap 'exit 130' INT
trap 'exit 143' TERM
mountpoint -q "$rootfs/proc" || { mount -t proc proc "$rootfs/proc"; mounted+=("$rootfs/proc"); }
in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
installed_in_root() { in_root dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# ---- 2. the CPU LibTorch: libtorch-dev's closure beyond the root, unpacked, minus the bundle's packages
. "$repo/gpu-bundle/bundle.env"
bundle_pkgs=" $(echo "$BUNDLE_PACKAGES" | tr ' ' '\n' | cut -d= -f1 | tr '\n' ' ') "
if [ ! -f "$rootfs/opt/torch/.done" ]; then
  echo "== libtorch-dev's .debs into $rootfs/opt/torch (dpkg -x, no install)"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  in_root apt-get update -qq
  in_root apt-get install -y -qq --download-only --no-install-recommends libtorch-dev >/dev/null
  rm -rf "$rootfs/opt/torch"; mkdir -p "$rootfs/opt/torch"
  skipped=()
  for d in "$rootfs"/var/cache/apt/archives/*.deb; do
    p=$(dpkg-deb --show --showformat='${Package}' "$d")
    if [[ $bundle_pkgs == *" $p "* ]]; then skipped+=("$p"); continue; fi
    # debootstrap leaves the root's own packages in the same cache: they are installed already
    installed_in_root "$p" && continue
    dpkg -x "$d" "$rootfs/opt/torch"
  done
  echo "   skipped (the bundle's): ${skipped[*]:-none}"
  in_root apt-get clean
  touch "$rootfs/opt/torch/.done"
fi
# vexp's own dependencies must come from the bundle (the root's base libraries such as
# libmd0 may be there, as on any Linux).
for p in $(echo "$bundle_pkgs" | tr ' ' '\n' | grep -E 'toml|spdlog|fmt|cli11|nlohmann|sqlite|turbojpeg|jpeg|sw|av|gtest') \
         libavformat-dev libavcodec-dev pkg-config pkgconf; do
  if installed_in_root "$p"; then
    echo "rehearse.sh: $p is installed in $rootfs: not a clean root" >&2; exit 1
  fi
done
echo "   root: $(in_root dpkg-query -W -f='${Package}\n' | wc -l) packages installed, none of vexp's dependencies; no pkg-config, no FFmpeg"

# ---- 3. the tree and the bundle, as the device tool carries them
echo "== copying the working tree + gpu-bundle/ into $rootfs/src"
rm -rf "$rootfs/src"
[ "${REUSE_BUILD:-0}" = 1 ] || rm -rf "$rootfs/build"
mkdir -p "$rootfs/src"
(cd "$repo" && { git ls-files -z --cached --others --exclude-standard; find gpu-bundle -type f -print0; } \
  | tar --null -T - -cf -) | tar -C "$rootfs/src" -xf -

# ---- 4. the build, the same steps gpu.sh runs
# Debian's LibTorch is unpacked, not installed: its dependencies lie in folders the linker
# and the loader do not search: usr/lib/x86_64-linux-gnu, its blas/ and lapack/ folders
# (where the alternatives system would link libblas.so.3 / liblapack.so.3 from) and usr/lib
# (libgloo, HDF4), lib/x86_64-linux-gnu (libnl). LINK_DIRS names them.
torch_dirs=$(for d in usr/lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu/blas usr/lib/x86_64-linux-gnu/lapack usr/lib lib/x86_64-linux-gnu; do
  [ -d "$rootfs/opt/torch/$d" ] && echo "/opt/torch/$d"; done | paste -sd:)
run_env=(BUILD_DIR=/build TORCH_PREFIX=/opt/torch/usr JOBS="$jobs" TARGETS="vexp vexp_dsl_tests" CMAKE_ARGS=-DVEXP_WERROR=ON LINK_DIRS="$torch_dirs")
env_str=$(printf '%q ' "${run_env[@]}")
b0=$SECONDS
for s in check unpack configure build; do
  echo "== build-with-bundle.sh $s"
  s0=$SECONDS
  in_root /bin/bash -c "cd /src && $env_str tools/gpu/build-with-bundle.sh $s" >"$rootfs/$s.log" 2>&1 \
    || { tail -30 "$rootfs/$s.log"; echo "rehearse.sh: $s failed (log: $rootfs/$s.log)" >&2; exit 1; }
  [ $s = build ] || tail -3 "$rootfs/$s.log" | sed 's/^/   /'
  echo "   $s: $((SECONDS - s0)) s"
done
echo "== clean-root build (configure + build of vexp, its plugins and vexp_dsl_tests, $jobs jobs): $((SECONDS - b0)) s"

# ---- 5. where every dependency came from: the bundle's prefix, /opt/torch or the compiler
echo "== dependencies found (CMakeCache.txt)"
grep -E '^(tomlplusplus_DIR|spdlog_DIR|fmt_DIR|CLI11_DIR|nlohmann_json_DIR|GTest_DIR|Torch_DIR|SQLite3_INCLUDE_DIR|SQLite3_LIBRARY|VEXP_[A-Z]+_(INCLUDE_DIR|LIBRARY))[:=]' \
  "$rootfs/build/CMakeCache.txt" | sed 's/:[A-Z]*=/ = /; s/^/   /'
bad=$(grep -E '^(tomlplusplus_DIR|spdlog_DIR|fmt_DIR|CLI11_DIR|nlohmann_json_DIR|GTest_DIR|SQLite3_INCLUDE_DIR|SQLite3_LIBRARY|VEXP_[A-Z]+_(INCLUDE_DIR|LIBRARY))[:=]' \
  "$rootfs/build/CMakeCache.txt" | grep -v '=/build/bundle-prefix/' || true)
[ -z "$bad" ] || { echo "rehearse.sh: found outside the bundle: $bad" >&2; exit 1; }
if grep -o '"command": "[^"]*"' "$rootfs/build/compile_commands.json" | grep -oE -- '-(I|isystem) ?[^ ]+' | sort -u \
   | grep -vE -- '(/src|/build)(/|$)|/opt/torch/' ; then
  echo "rehearse.sh: an include directory outside the tree, the bundle and /opt/torch (above)" >&2; exit 1
fi
echo "   every include directory is in the tree, the build, the bundle's prefix or /opt/torch"

# ---- 6. run it: tests, a tiny run with a resume, frame folders
libpath="$(in_root /bin/bash -c "cd /src && $env_str tools/gpu/build-with-bundle.sh env" | sed 's/^export LD_LIBRARY_PATH=//; s/\${.*//')"
echo "== ldd /build/bin/vexp: $(in_root /usr/bin/env LD_LIBRARY_PATH="$libpath" ldd /build/bin/vexp | grep -cE 'bundle-prefix') libraries from the bundle, $(in_root /usr/bin/env LD_LIBRARY_PATH="$libpath" ldd /build/bin/vexp | grep -c 'not found') not found"
cat >"$rootfs/rehearse-run.sh" <<'SH'
set -euo pipefail
cd /src
v=/build/bin/vexp
ctest --test-dir /build -R '^(Load|Validate|Extends|Overrides)\.' -j2 2>&1 | tail -3
rm -rf /tmp/r /tmp/frames
$v run tests/cli/data/tiny.toml --out /tmp/r --stop-after 1 --set run.progress=none | tail -1
$v run tests/cli/data/tiny.toml --out /tmp/r --resume --set run.progress=none | tail -2
grep -q '"epoch": *2\|"epochs": *2' /tmp/r/summary.json && ls /tmp/r/checkpoints
$v data make-synthetic --as frames --channels 3 --classes 4 --size 64 --frames 8 --train-clips 32 --val-clips 8 --out /tmp/frames
$v bench data tests/cli/data/tiny_video.toml --set data.params.root=/tmp/frames --set data.params.channels=3 \
  --set 'data.params.mean=[0.5,0.5,0.5]' --set 'data.params.std=[0.25,0.25,0.25]' --set model.node.features.in_channels=3 \
  --threads 2 | tail -2
if $v data make-synthetic --out /tmp/videos --train-clips 2 --val-clips 2 2>/tmp/err; then echo "videos were written without FFmpeg?"; exit 1; fi
echo "make-synthetic --as video says: $(cat /tmp/err)"
SH
in_root /usr/bin/env LD_LIBRARY_PATH="$libpath" /bin/bash /rehearse-run.sh
echo "== rehearsal passed in $((SECONDS - t0)) s"
