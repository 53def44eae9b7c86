#!/usr/bin/env bash
# The main job: installs what Tessel needs, builds it, then runs tessel-gpt on the default
# corpus (the Debian fortunes files). Extra arguments go to tessel-gpt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh tessel-gpt
exec "${TESSEL_BUILD_DIR:-build}/bin/tessel-gpt" --steps 5 "$@"
