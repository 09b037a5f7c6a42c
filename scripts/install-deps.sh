#!/usr/bin/env bash
# Installs the Debian 12 packages DHPT builds, tests and benchmarks with; only what is missing.
# Idempotent: a second run installs nothing. Needs root or sudo.
#   scripts/install-deps.sh          what the build and the tests need
#   scripts/install-deps.sh --bench  also the Python peers the benchmarks compare against
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libyaml-cpp-dev libsqlite3-dev libeigen3-dev
  libxgboost-dev xgboost          # xgboost's CMake config points at /usr/bin/xgboost
  libtorch-dev                    # CPU-only libtorch 1.13 for dhpt-gpu-worker
  prometheus-cpp-dev
  prometheus                      # the real Prometheus of the metrics test (promtool too)
  libgtest-dev libgmock-dev libbenchmark-dev
  unzip                           # helm comes zipped inside an npm package (tests/chart)
  gnuplot-nox                     # dhpt compare's plots (SVG and PNG)
  python3                         # the child-process test's CPU burner
  python3-sklearn                 # examples/commands/sklearn_ridge.py, run by the examples test
  openssl                         # the TLS tests make their certificates
  clang libclang-rt-14-dev        # scripts/fuzz.sh: libFuzzer and the sanitizers' runtimes
)
# The chart tests run on Node.js; a machine without it gets Debian's.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
if [[ ${1:-} == --bench ]]; then
  packages+=(python3-optuna python3-torch python3-xgboost)  # run with /usr/bin/python3
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
