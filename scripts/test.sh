#!/usr/bin/env bash
# Installs what Tessel needs, builds everything, and runs every test (GoogleTest, lit and the
# PyTorch comparisons) through ctest. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${TESSEL_BUILD_DIR:-build}"
ctest --output-on-failure -j 2 "$@"
