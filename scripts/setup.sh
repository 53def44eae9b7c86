#!/usr/bin/env bash
# Installs every Debian package Tessel needs to build, test and run.
# Then creates the test venv of the Python packages Debian lacks (safetensors, for the checkpoint
# interop tests; TESSEL_TEST_PYTHON in test/CMakeLists.txt points at its python).
# Idempotent: when everything is already installed it only runs dpkg-query and one python import
# and exits (well under a second).
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config libcli11-dev
  # LLVM/MLIR 22 (shared libMLIR + libLLVM), lit and FileCheck
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # libraries
  libfmt-dev libgtest-dev libgmock-dev nlohmann-json3-dev zlib1g-dev libopenblas-dev
  libopenblas0-openmp
  # oneDNN 2.x (OpenMP runtime): the CPU executor's other GEMM library (runtime/exec/CpuGemm.h)
  libdnnl-dev
  # MPI (CPU collectives, runtime/comm): OpenMPI 4.1 headers, library and mpirun
  libopenmpi-dev openmpi-bin
  # test oracle (CPU PyTorch for the system interpreter) and data
  python3-torch python3-numpy fortunes dataset-fashion-mnist
  # headless browser: the run report page's rendering test (test/lit/tools/run-report-render.test)
  chromium
  # libFuzzer (clang -fsanitize=fuzzer) for test/fuzz; python3-venv for the test venv below
  clang libclang-rt-dev python3-venv
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -ne 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# The test venv: Debian's packages (numpy, torch) plus safetensors, the format's reference
# reader, pinned so that the interop tests read files with one known version.
VENV="${TESSEL_TEST_VENV:-$HOME/.cache/tessel/test-venv}"
# Debian's interpreter (/usr/bin/python3), whatever python3 comes first on PATH: only its site
# packages hold Debian's numpy and torch. A venv made from another interpreter is made again.
if ! "$VENV/bin/python" -c "import safetensors, numpy, torch" 2>/dev/null; then
  echo "setup: creating the test venv $VENV"
  rm -rf "$VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q safetensors==0.8.0
fi
