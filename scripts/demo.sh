#!/usr/bin/env bash
# The main job in one command: install, build, and run a local study (scheduler and workers
# started for you). Arguments go to `dhpt local`, e.g. --demo=random-forest or --study=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/bin/dhpt local "$@"
