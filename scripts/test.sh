#!/usr/bin/env bash
# The whole test suite in one command: install, build, run every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 600
