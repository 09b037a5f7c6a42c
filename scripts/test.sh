#!/usr/bin/env bash
# The whole test suite in one command: install, build, run every test through ctest, then a
# short run of each fuzzer (DHPT_FUZZ_SECONDS each, default 20; 0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
(cd build && ctest --output-on-failure --parallel "$(nproc)" --timeout 600)
fuzz_seconds=${DHPT_FUZZ_SECONDS:-20}
if ((fuzz_seconds > 0)); then
  bash scripts/fuzz.sh "$fuzz_seconds"
fi
