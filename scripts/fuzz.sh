#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang, ASan and UBSan (build-fuzz/, apart from the
# g++ build in build/) and runs each for SECONDS (default 60) over its corpus in fuzz/corpus/.
# Fails on the first crash, leak, timeout or out-of-memory; libFuzzer writes the input that
# did it as build-fuzz/findings/<fuzzer>/crash-* (or leak-, timeout-, oom-).
#   scripts/fuzz.sh          a minute each
#   scripts/fuzz.sh 3600     an hour each
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
fuzzers=(spec_fuzzer csv_fuzzer worker_messages_fuzzer)

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDHPT_FUZZ=ON -DDHPT_WITH_TORCH=OFF -DDHPT_BUILD_TESTS=OFF -DDHPT_BUILD_BENCHMARKS=OFF \
  -DDHPT_NATIVE=OFF >/dev/null
cmake --build build-fuzz --parallel "$(nproc)" --target "${fuzzers[@]}"

for fuzzer in "${fuzzers[@]}"; do
  # New inputs go to a scratch corpus, so the committed seeds stay small and reviewed.
  work=build-fuzz/corpus/$fuzzer
  findings=build-fuzz/findings/$fuzzer
  mkdir -p "$work" "$findings"
  echo "fuzz: $fuzzer for ${seconds}s"
  # Only the end of the output is kept: the scheduler core logs every event, hundreds of MB an
  # hour, and a crash report is at the end.
  set +e
  build-fuzz/bin/$fuzzer "$work" "fuzz/corpus/$fuzzer" -max_total_time="$seconds" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/" 2>&1 |
    tail -n 400 >"build-fuzz/$fuzzer.log"
  status=${PIPESTATUS[0]}
  set -e
  if ((status != 0)); then
    tail -n 60 "build-fuzz/$fuzzer.log" >&2
    echo "fuzz: $fuzzer failed (exit $status); the input is in $findings/" >&2
    exit 1
  fi
  grep -E '^#[0-9]+.*DONE' "build-fuzz/$fuzzer.log" | tail -n 1
done
echo "fuzz: no crash in ${#fuzzers[@]} fuzzers, ${seconds}s each"
