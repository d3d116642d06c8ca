#!/usr/bin/env bash
# Builds vexp against the GPU bundle (tools/gpu/bundle.sh) unpacked into a private
# prefix, plus a LibTorch: the one code path of tools/bench/gpu.sh (on the GPU machine)
# and tools/gpu/rehearse.sh (its CPU rehearsal in a clean root). From the repository root:
#
#   tools/gpu/build-with-bundle.sh check       the machine's glibc / libstdc++ against the bundle's needs
#   tools/gpu/build-with-bundle.sh unpack      the .debs into BUILD_DIR/bundle-prefix (never /)
#   tools/gpu/build-with-bundle.sh configure   cmake, CMAKE_PREFIX_PATH = the prefix + TORCH_PREFIX
#   tools/gpu/build-with-bundle.sh build       cmake --build for TARGETS (default: all)
#   tools/gpu/build-with-bundle.sh env         prints the LD_LIBRARY_PATH vexp's binaries need
#
# Environment: BUILD_DIR (required), BUNDLE_DIR (default gpu-bundle), TORCH_PREFIX (a
# LibTorch's CMake prefix: torch.utils.cmake_prefix_path), CMAKE_ARGS (more -D options,
# e.g. -DVEXP_CUDA=ON), TARGETS, JOBS (default: every core), PYTHON (for unpacking
# where there is no dpkg), LINK_DIRS (more folders, colon-separated, where the linker
# and `env` find the dependencies of a LibTorch that is not installed either, such as
# Debian's unpacked with dpkg -x; a pip wheel's LibTorch finds its own through RUNPATH).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
: "${BUILD_DIR:?set BUILD_DIR}"
bundle=$(realpath -m "${BUNDLE_DIR:-gpu-bundle}")
build=$(realpath -m "$BUILD_DIR")
prefix="$build/bundle-prefix"
arch=x86_64-linux-gnu   # the bundle's .debs are amd64: Debian's multiarch folder
libdir="$prefix/usr/lib/$arch"
[ -f "$bundle/bundle.env" ] || { echo "build-with-bundle: no bundle at $bundle (make it with tools/gpu/bundle.sh on a Debian CPU machine and carry it)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$bundle/bundle.env"

# version_ge A B: A >= B (dotted numbers)
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }

cmd=${1:-}
case "$cmd" in
check)
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  [ -n "$glibc" ] || glibc=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]\+\.[0-9]\+$' || true)
  if [ -z "$glibc" ]; then
    echo "check: cannot tell this machine's glibc version (no getconf GNU_LIBC_VERSION, no ldd): not glibc?"; exit 1
  fi
  if version_ge "$glibc" "$BUNDLE_GLIBC_MAX"; then
    echo "check: glibc $glibc >= $BUNDLE_GLIBC_MAX, the highest the bundle's libraries ($BUNDLE_DEBIAN) need: ok"
  else
    echo "check: this machine's glibc $glibc is OLDER than $BUNDLE_GLIBC_MAX, which the bundle's $BUNDLE_DEBIAN libraries need:"
    echo "       they will not load here; build the bundle from an older Debian (docs/gpu.md)"
    exit 1
  fi
  # The C++ libraries the build links (toml++; spdlog/fmt are header-only) need the
  # compiler's libstdc++ to be at least as new as bookworm's, the highest listed.
  stdcxx=$(${CXX:-c++} -print-file-name=libstdc++.so.6 2>/dev/null || true)
  if [ -f "$stdcxx" ]; then
    have=$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$(readlink -f "$stdcxx")" | sed 's/GLIBCXX_//' | sort -uV | tail -1)
    if version_ge "$have" "$BUNDLE_GLIBCXX_MAX"; then
      echo "check: libstdc++ has GLIBCXX_$have >= $BUNDLE_GLIBCXX_MAX: ok"
    else
      echo "check: warning: libstdc++ ($stdcxx) has GLIBCXX_$have < $BUNDLE_GLIBCXX_MAX; a bundled C++ library that needs it will not load"
    fi
  fi
  ;;
unpack)
  stamp="$prefix/.bundle-stamp"
  want=$(cd "$bundle/debs" && ls -1 ./*.deb | sort | md5sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then echo "unpack: $prefix is up to date"; exit 0; fi
  rm -rf "$prefix"
  mkdir -p "$prefix"
  n=0
  for d in "$bundle"/debs/*.deb; do
    if command -v dpkg >/dev/null; then
      dpkg -x "$d" "$prefix"
    else  # no dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}
      "${PYTHON:-python3}" - "$d" "$prefix" <<'PY'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
blob = open(deb, "rb").read()
assert blob[:8] == b"!<arch>\n", deb + ": not a .deb"
pos = 8
while pos < len(blob):
    name, size = blob[pos:pos + 16].decode().strip().rstrip("/"), int(blob[pos + 48:pos + 58])
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(blob[pos + 60:pos + 60 + size])) as t:
            t.extractall(dest, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(dest)
        break
    pos += 60 + size + (size & 1)
else:
    sys.exit(deb + ": no data.tar member")
PY
    fi
    n=$((n + 1))
  done
  echo "$want" >"$stamp"
  echo "unpack: $n .debs into $prefix ($(du -sh "$prefix" | cut -f1))"
  ;;
configure)
  # The linker must find the dependencies of the shared libraries it links against
  # (libavutil's libva, libX11...): they are in the prefix, which is on no search path.
  rpath_link="$libdir${LINK_DIRS:+:$LINK_DIRS}"
  gen=()
  command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && gen=(-G Ninja)
  # shellcheck disable=SC2086
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix/usr;${TORCH_PREFIX:-}" -DCMAKE_LIBRARY_ARCHITECTURE=$arch \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$rpath_link" -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$rpath_link" \
    -DCMAKE_MODULE_LINKER_FLAGS="-Wl,-rpath-link,$rpath_link" \
    -DVEXP_VIDEO=OFF -DVEXP_HEADER_ONLY_LOGGING=ON -DVEXP_BUILD_TESTS=ON ${CMAKE_ARGS:-}
  ;;
build)
  # shellcheck disable=SC2086
  cmake --build "$build" -j"${JOBS:-$(nproc)}" --target ${TARGETS:-all}
  ;;
env)
  # libavutil's own dependencies (libva, libX11, ...) are found through this, not
  # through the binaries' RUNPATH (which is not searched for a library's dependencies).
  echo "export LD_LIBRARY_PATH=$libdir${LINK_DIRS:+:$LINK_DIRS}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  ;;
*)
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
