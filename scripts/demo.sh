#!/usr/bin/env bash
# The main job in one command: installs what it needs, builds the scheduler, the workers and the
# CLI (not the tests: scripts/test.sh builds those), and runs a local study with the scheduler
# and workers started for you. Arguments go to `dhpt local`, e.g. --demo=random-forest or
# --study=FILE; an AutoEncoder study (or --gpu-workers) also installs libtorch and builds
# dhpt-gpu-worker.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

# Only an AutoEncoder study needs libtorch and dhpt-gpu-worker.
needs_gpu_worker() {
  for arg; do
    case $arg in
      --study=*) grep -qi autoencoder "${arg#--study=}" 2>/dev/null && return 0 ;;
      *autoencoder* | --gpu[-_]workers=[1-9]*) return 0 ;;
    esac
  done
  return 1
}

step "1/3 packages (scripts/install-deps.sh)"
if needs_gpu_worker "$@"; then bash scripts/install-deps.sh --torch; else bash scripts/install-deps.sh --main; fi

step "2/3 building dhpt, dhpt-scheduler, the workers and dhpt-dashboard into build/"
options=()
if [[ ! -f build/CMakeCache.txt ]]; then
  # A first build skips the tests, the benchmarks and debug information (a fifth of the
  # compile time); scripts/test.sh turns them on in the same tree.
  options=(-DCMAKE_BUILD_TYPE=Release -DDHPT_BUILD_TESTS=OFF -DDHPT_BUILD_BENCHMARKS=OFF
    -DDHPT_WITH_TORCH=OFF)
fi
targets=(dhpt dhpt-scheduler dhpt-cpu-worker dhpt-dashboard)  # dhpt local starts the dashboard
if needs_gpu_worker "$@"; then
  options+=(-DDHPT_WITH_TORCH=ON)
  targets+=(dhpt-gpu-worker)
fi
cmake -S . -B build -G Ninja "${options[@]}" >/dev/null
cmake --build build --parallel "$(nproc)" --target "${targets[@]}"

step "3/3 the study (build/bin/dhpt local $*)"
exec build/bin/dhpt local "$@"
