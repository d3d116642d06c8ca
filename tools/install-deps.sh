#!/usr/bin/env bash
# Installs the Debian packages vexp needs that are not installed yet.
set -euo pipefail
packages=(
  cmake g++ make pkg-config ccache
  libtorch-dev libopenblas0-openmp
  libtomlplusplus-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev
  libopenmpi-dev openmpi-bin
  libavformat-dev libavcodec-dev libswscale-dev libturbojpeg0-dev ffmpeg
  libsqlite3-dev gnuplot-nox
  chromium
  slurm-wlm munge
  python3-torch python3-torchvision python3-numpy python3-av
)
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
