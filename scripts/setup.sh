#!/usr/bin/env bash
# Installs everything ds needs from Debian's packages; safe to run again (idempotent).
set -euo pipefail

pkgs=(
  cmake ninja-build ccache g++ lld
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libtorch-dev python3-torch python3-torchvision python3-numpy
  libopenmpi-dev openmpi-bin
  libdnnl-dev
  libgtest-dev
  bc
  clang-22 libclang-rt-22-dev
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
