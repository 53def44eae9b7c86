#!/usr/bin/env bash
# Configures (once) and builds Tessel into build/ with Ninja and ccache.
# Usage: scripts/build.sh [ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${TESSEL_BUILD_DIR:-build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# Two jobs: the machines have 2 cores, and MLIR translation units need ~1 GB each.
ninja -C "$BUILD_DIR" -j "${TESSEL_JOBS:-2}" "$@"
