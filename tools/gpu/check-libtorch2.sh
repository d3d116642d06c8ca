#!/usr/bin/env bash
# Checks vexp against LibTorch 2.x on a CPU machine, in two Debian trixie roots
# (made once with debootstrap and kept between runs, outside the repository):
#   cuda  libtorch-cuda-dev 2.6 (CUDA 12.4), nvidia-cuda-toolkit 12.4, libnccl-dev:
#         configures -DVEXP_CUDA=ON as C++20 and compiles and links every target
#         (CUDA kernels, comm/nccl, tests); no GPU is needed for that.
#   cpu   libtorch-dev 2.6 (CPU) with python3-torch 2.6 for the parity tests:
#         builds everything (C++17) and runs the CPU test suite with ctest.
# The two libtorch packages conflict (same headers), hence two roots.
#
# Usage: tools/gpu/check-libtorch2.sh [cuda] [cpu]      (default: both)
# Environment:
#   VEXP_TRIXIE_ROOT  where the roots, the .deb cache, ccache and logs live
#                     (default ${XDG_CACHE_HOME:-$HOME/.cache}/vexp/trixie; ~9 GB)
#   VEXP_JOBS         build and test parallelism (default 2)
#   VEXP_MIRROR       Debian mirror (default http://deb.debian.org/debian)
#   VEXP_CTEST_ARGS   extra ctest arguments for the cpu suite (e.g. "-R parity")
# Needs root (debootstrap, chroot, mount namespaces), debootstrap and network
# access to the mirror on the first run. The host's packages are not touched:
# everything is installed inside the roots. Mounts (/proc, /dev, the source
# tree, read-only) live in a private mount namespace per step, so they vanish
# with it even if the script is killed; a trap unmounts them on normal exit too.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOP=${VEXP_TRIXIE_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/vexp/trixie}
JOBS=${VEXP_JOBS:-2}
MIRROR=${VEXP_MIRROR:-http://deb.debian.org/debian}
PHASES=("$@")
[ ${#PHASES[@]} -gt 0 ] || PHASES=(cuda cpu)

COMMON_PKGS=(g++ cmake ninja-build make ccache pkg-config ca-certificates
  libtomlplusplus-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin libavformat-dev libavcodec-dev libswscale-dev libturbojpeg0-dev
  libsqlite3-dev libopenblas0-openmp)
# The CPU suite's tools: ffmpeg/ffprobe and sqlite3 in the CLI tests, gnuplot in
# the report tests, python3-torch/-torchvision/-av for the parity tests.
CPU_PKGS=(libtorch-dev ffmpeg sqlite3 gnuplot-nox python3-torch python3-torchvision python3-numpy python3-av)
# nvidia-cuda-toolkit-gcc: nvcc 12.4 supports g++ up to 13 (trixie's default is 14).
CUDA_PKGS=(libtorch-cuda-dev nvidia-cuda-toolkit nvidia-cuda-toolkit-gcc libnccl-dev)

log() { printf '[check-libtorch2 %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "FAILED: $*"; exit 1; }
declare -a TIMINGS=()
# stage NAME LOGFILE CMD...: runs CMD with its output in LOGFILE, prints the time;
# on failure prints the log's tail and exits.
stage() {
  local name=$1 logf=$2; shift 2
  local t0=$SECONDS
  log "$name ... (log: $logf)"
  if ! "$@" >"$logf" 2>&1; then
    tail -n 60 "$logf" | sed 's/^/    /'
    die "$name (after $((SECONDS - t0)) s; full log: $logf)"
  fi
  TIMINGS+=("$(printf '%-28s %5d s' "$name" $((SECONDS - t0)))")
  log "$name done in $((SECONDS - t0)) s"
}

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"
mkdir -p "$TOP/debs" "$TOP/logs"
LOGS=$TOP/logs

# in_root ROOT SCRIPT: runs SCRIPT (bash) as root inside ROOT, in a private mount
# namespace with /proc, /sys, /dev, /dev/pts, /dev/shm, the apt .deb cache, the ccache
# folder and the source tree (read-only, at /src) mounted.
in_root() {
  local root=$1 script=$2 flavour
  flavour=$(basename "$root")
  mkdir -p "$TOP/ccache-$flavour"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  unshare --mount --propagation private -- bash -euo pipefail -c '
    root=$1 top=$2 src=$3 flavour=$4 script=$5
    cleanup() { umount -R "$root/src" "$root/ccache" "$root/var/cache/apt/archives" "$root/dev" "$root/sys" "$root/proc" 2>/dev/null || true; }
    trap cleanup EXIT
    mkdir -p "$root/src" "$root/ccache" "$root/sys"
    mount -t proc proc "$root/proc"
    # Open MPI (hwloc) reads the CPU topology from /sys; without it mpirun crashes.
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount --bind "$top/debs" "$root/var/cache/apt/archives"
    mount --bind "$top/ccache-$flavour" "$root/ccache"
    mount --bind "$src" "$root/src"
    mount -o remount,bind,ro "$root/src"
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      TERM=dumb DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/ccache CCACHE_BASEDIR=/src \
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      chroot "$root" /bin/bash -euo pipefail -c "$script"
  ' in_root "$root" "$TOP" "$SRC" "$flavour" "$script"
}

# make_root FLAVOUR PACKAGES...: debootstraps $TOP/FLAVOUR (once) and installs the
# packages that the root's stamp does not list yet.
make_root() {
  local flavour=$1; shift
  local root=$TOP/$flavour want
  if [ ! -f "$root/.vexp-debootstrap-done" ]; then
    rm -rf "$root"
    stage "$flavour: debootstrap" "$LOGS/$flavour-debootstrap.log" \
      debootstrap --variant=minbase --cache-dir="$TOP/debs" trixie "$root" "$MIRROR"
    touch "$root/.vexp-debootstrap-done"
  fi
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  if [ "$(cat "$root/.vexp-packages" 2>/dev/null)" != "$want" ]; then
    echo "deb $MIRROR trixie main contrib non-free non-free-firmware" >"$root/etc/apt/sources.list"
    local extra=""
    if [ "$flavour" = cuda ]; then
      # libtorch-cuda-2.6 depends on nvidia-cudnn, a contrib *installer* that
      # downloads cuDNN from NVIDIA when it is configured; this check only
      # compiles and links, so a local empty package stands in for it (cuDNN
      # stays absent: nothing of vexp's refers to it; see the CUDA configure).
      extra='
        if ! dpkg-query -W -f="\${Status}" nvidia-cudnn 2>/dev/null | grep -q "install ok installed"; then
          d=$(mktemp -d); mkdir -p "$d/DEBIAN"
          printf "%s\n" "Package: nvidia-cudnn" "Version: 9.0.0.312~cuda12+vexp1" "Architecture: amd64" \
            "Maintainer: vexp check-libtorch2 <nobody@invalid>" \
            "Description: stand-in for the cuDNN installer (check-libtorch2.sh compiles and links only)" >"$d/DEBIAN/control"
          dpkg-deb --build "$d" /tmp/nvidia-cudnn-standin.deb >/dev/null && dpkg -i /tmp/nvidia-cudnn-standin.deb
          rm -rf "$d" /tmp/nvidia-cudnn-standin.deb
        fi'
    fi
    stage "$flavour: apt install" "$LOGS/$flavour-apt.log" in_root "$root" "
      apt-get update -q
      $extra
      apt-get install -y -q --no-install-recommends $*"
    echo "$want" >"$root/.vexp-packages"
  fi
}

# Configure and build inside the root. The build folder (/build/<name>) stays in
# the root, so a rerun is incremental; ccache ($TOP/ccache-<flavour>) survives a
# deleted build folder.
build_in_root() {
  local flavour=$1 name=$2; shift 2
  stage "$flavour: configure" "$LOGS/$flavour-configure.log" in_root "$TOP/$flavour" "
    cmake -S /src -B /build/$name -G Ninja -DVEXP_BUILD_TESTS=ON -DVEXP_WERROR=ON $*"
  stage "$flavour: build" "$LOGS/$flavour-build.log" in_root "$TOP/$flavour" "
    ccache -z >/dev/null; ccache -M 5G >/dev/null
    cmake --build /build/$name -j$JOBS -- -k 0
    ccache -s | grep -E 'Hits|Misses|hit rate' || ccache -s"
  grep -E 'Hits|Misses|hit rate' "$LOGS/$flavour-build.log" | sed 's/^/    ccache: /' || true
}

T_ALL=$SECONDS
log "source $SRC; roots in $TOP; -j$JOBS"
for phase in "${PHASES[@]}"; do
  case $phase in
    cuda)
      make_root cuda "${COMMON_PKGS[@]}" "${CUDA_PKGS[@]}"
      # Unoptimised (build type None: no -O, no -g): it is a compile-and-link
      # check, and optimising would double its time. C++20 (libtorch 2.12+ needs
      # it; 2.6 accepts it): proves the code compiles as C++20. nvcc 12.4 uses g++-13 as its host compiler. sm_90 only (H100/H200)
      # to save time. cuDNN is absent (see make_root): shared libraries' undefined
      # references to it are allowed, vexp's own must all resolve; the tests are
      # listed at ctest time (PRE_TEST) since the binaries cannot start here.
      build_in_root cuda cuda -DCMAKE_BUILD_TYPE=None -DVEXP_CUDA=ON -DVEXP_CXX_STANDARD=20 -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-13 \
        -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST \
        "'-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined'"
      stage "cuda: link check" "$LOGS/cuda-linkcheck.log" in_root "$TOP/cuda" '
        cd /build/cuda
        grep -q "VEXP_CUDA:BOOL=ON" CMakeCache.txt
        grep -E "^(Torch_DIR|CMAKE_CUDA_COMPILER|CMAKE_CXX_STANDARD|VEXP_CXX_STANDARD)" CMakeCache.txt || true
        for f in bin/vexp lib/vexp/plugins/temporal_shift.so lib/vexp/plugins/comm_nccl.so; do
          test -f "$f" || { echo "missing $f"; exit 1; }
        done
        ldd bin/vexp | grep -E "torch_cuda|c10_cuda|cudart" || { echo "bin/vexp is not linked with the CUDA libtorch"; exit 1; }
        ldd lib/vexp/plugins/comm_nccl.so | grep nccl
        nm -D --defined-only lib/vexp/plugins/temporal_shift.so | grep -c " T " >/dev/null
        find bin lib -type f \( -name "*.so" -o -perm -u+x \) | wc -l'
      sed 's/^/    /' "$LOGS/cuda-linkcheck.log"
      ;;
    cpu)
      make_root cpu "${COMMON_PKGS[@]}" "${CPU_PKGS[@]}"
      build_in_root cpu cpu -DCMAKE_BUILD_TYPE=Release
      stage "cpu: ctest" "$LOGS/cpu-ctest.log" in_root "$TOP/cpu" "
        ctest --test-dir /build/cpu --output-on-failure -j$JOBS ${VEXP_CTEST_ARGS:-}"
      grep -E 'tests passed|tests failed|Total Test time|\(Skipped\)|\*\*\*' "$LOGS/cpu-ctest.log" | sed 's/^/    /' | tail -n 30
      ;;
    *) die "unknown phase '$phase' (cuda, cpu)" ;;
  esac
done

log "all passed in $((SECONDS - T_ALL)) s"
printf '    %s\n' "${TIMINGS[@]}"
log "disk: $(du -sh --exclude=proc "$TOP" 2>/dev/null | cut -f1) in $TOP"
