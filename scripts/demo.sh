#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, then trains tessel-gpt on the default
# corpus (the Debian fortunes files) for a few hundred steps and prints bytes sampled from
# it. Extra arguments go to tessel-gpt (e.g. --steps 1000, --data FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tessel-gpt
exec "${TESSEL_BUILD_DIR:-build}/bin/tessel-gpt" "$@"
