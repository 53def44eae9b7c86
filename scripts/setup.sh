#!/usr/bin/env bash
# Installs every Debian package Tessel needs to build, test and run.
# Idempotent: when everything is already installed it only runs dpkg-query and exits (well under a second).
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config libcli11-dev
  # LLVM/MLIR 22 (shared libMLIR + libLLVM), lit and FileCheck
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # libraries
  libfmt-dev libgtest-dev libgmock-dev nlohmann-json3-dev zlib1g-dev libopenblas-dev
  libopenblas0-openmp
  # MPI (CPU collectives, runtime/comm): OpenMPI 4.1 headers, library and mpirun
  libopenmpi-dev openmpi-bin
  # test oracle (CPU PyTorch for the system interpreter) and data
  python3-torch python3-numpy fortunes dataset-fashion-mnist
  # headless browser: the run report page's rendering test (test/lit/tools/run-report-render.test)
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
