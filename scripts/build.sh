#!/usr/bin/env bash
# Installs what is missing (scripts/install-deps.sh) and builds everything into build/: the
# services, every test and the benchmarks (a tree first built by scripts/demo.sh is widened).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDHPT_BUILD_TESTS=ON \
  -DDHPT_BUILD_BENCHMARKS=ON -DDHPT_WITH_TORCH=ON >/dev/null
cmake --build build --parallel "$(nproc)"
