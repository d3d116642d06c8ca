#!/usr/bin/env bash
# Installs the Debian packages vexp needs that are not installed yet.
#   tools/install-deps.sh        everything: building, the demo, the whole test suite (make test, CI)
#   tools/install-deps.sh demo   only what `make demo` needs: building vexp and its plugins, and
#                                configuring the build folder the way `make test` does
set -euo pipefail
# Building vexp and its plugins.
packages=(
  cmake g++ make pkg-config ccache
  libtorch-dev libopenblas0-openmp
  libtomlplusplus-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libopenmpi-dev
  libavformat-dev libavcodec-dev libswscale-dev libturbojpeg0-dev
  libsqlite3-dev
)
# Configuring with the tests on (make demo and make test share one build folder and one
# configuration; see the Makefile): CMake looks for GoogleTest and mpirun then.
packages+=(libgtest-dev openmpi-bin)
case "${1:-all}" in
  demo) ;;
  all)
    # The rest of the test suite, and vexp's figures: ffmpeg (test videos), gnuplot
    # (vexp plan --plot, the sweep PNGs), Chromium (the HTML reports opened headless),
    # Slurm (the Slurm tests), PyTorch for Python (checkpoints read back, parity).
    packages+=(
      ffmpeg gnuplot-nox
      chromium
      slurm-wlm munge
      python3-torch python3-torchvision python3-numpy python3-av
    )
    ;;
  *) echo "usage: tools/install-deps.sh [demo]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
