#!/usr/bin/env bash
# Installs the Debian 12 packages DHPT needs; only what is missing, never recommended extras.
# Idempotent: a second run installs nothing. Needs root or sudo.
#   scripts/install-deps.sh --main   only what the main job needs (scripts/demo.sh)
#   scripts/install-deps.sh --torch  also libtorch, for dhpt-gpu-worker's AutoEncoder
#   scripts/install-deps.sh          everything the build and the tests need (scripts/test.sh)
#   scripts/install-deps.sh --bench  that, and the Python peers the benchmarks compare against
set -euo pipefail

# The scheduler, dhpt-cpu-worker, the dhpt CLI and dhpt-dashboard (which dhpt local starts).
main_packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libabsl-dev libyaml-cpp-dev libsqlite3-dev libeigen3-dev
  libxgboost-dev xgboost          # xgboost's CMake config points at /usr/bin/xgboost
  prometheus-cpp-dev
  libcpp-httplib-dev              # dhpt-dashboard's HTTP server (cpp-httplib 0.11, MIT)
)
# CPU-only libtorch 1.13 for dhpt-gpu-worker: the largest download, so the main job skips it.
torch_packages=(libtorch-dev)
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus                      # the real Prometheus of the metrics test (promtool too)
  unzip                           # helm comes zipped inside an npm package (tests/chart)
  gnuplot-nox                     # dhpt compare's plots (SVG and PNG)
  chromium                        # the browser tests (tests/browser) open pages in it
  python3                         # the child-process test's CPU burner
  python3-sklearn                 # examples/commands/sklearn_gbr.py, run by the examples test
  openssl                         # the TLS tests make their certificates
  # The Python client (clients/python) and its tests and examples (tests/python).
  python3-grpcio python3-protobuf python3-pytest python3-pandas python3-yaml python3-venv
  python3-pip python3-setuptools python3-wheel python3-xgboost
  iproute2 util-linux             # bench/edge_cluster.sh (edge_cluster_test): ip, tc, nsenter
  clang libclang-rt-14-dev        # scripts/fuzz.sh: libFuzzer and the sanitizers' runtimes
)
bench_packages=(python3-optuna python3-torch python3-xgboost
  python3-scipy python3-sklearn)  # run with /usr/bin/python3; these two: Optuna's fANOVA (importance peer)

packages=("${main_packages[@]}")
case ${1:-} in
  --main) ;;
  --torch) packages+=("${torch_packages[@]}") ;;
  ""|--bench)
    packages+=("${torch_packages[@]}" "${test_packages[@]}")
    # The chart tests run on Node.js; a machine without it gets Debian's.
    command -v node >/dev/null || packages+=(nodejs)
    command -v npm >/dev/null || packages+=(npm)
    [[ ${1:-} == --bench ]] && packages+=("${bench_packages[@]}") ;;
  *) echo "usage: $0 [--main|--torch|--bench]" >&2; exit 2 ;;
esac

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
echo "install-deps: installing ${#missing[@]} packages and what they need: ${missing[*]}"
$sudo apt-get update -qq
# -q rather than -qq: a user watching a first install sees each download and set-up go by.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
  -o Dpkg::Use-Pty=0 "${missing[@]}" | grep -E '^(Get:|Setting up|Need to get|After this)' || true
