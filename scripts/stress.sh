#!/usr/bin/env bash
# Runs every process-level test suite RUNS times in a row (default 20) under parallel ctest
# while a busy loop keeps a core loaded: a test that fails only under load is a race in the
# product, to fix, not to retry. Needs a build (scripts/build.sh). The suites are read from the
# binaries, so a new one is never left out: every suite of integration_test, user_calls_test,
# reflection_test and shutdown_test (real scheduler and worker processes), cli_test's LocalClusterTest, and the
# in-process suites whose threads race (the scheduler core's, the command runner's).
# The result (runs, tests, failures, time, commit) goes to RESULT, by default
# docs/results/stress.txt for a run of every suite, build/stress.txt for a pattern.
#   scripts/stress.sh            every process-level suite, 20 times
#   scripts/stress.sh 5 Faults   the tests matching the ctest -R pattern Faults, 5 times
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/build"
runs=${1:-20}
in_process='SchedulerCoreTest|MultiObjectiveTest|ParetoFrontTest|ClientTrialsTest|WarmStartTest|WatchTest|WatchJournalTest|StudyImportTest|Command[A-Za-z]*Test|LocalClusterTest'
suites() {  # The suite names of a gtest binary.
  "bin/$1" --gtest_list_tests | grep -E '^[A-Za-z_][A-Za-z0-9_/]*\.$' | sed 's/\.$//' | sort -u
}
if [[ $# -ge 2 ]]; then
  tests=$2
  result=${RESULT:-$root/build/stress.txt}
else
  process=$(for binary in integration_test user_calls_test reflection_test shutdown_test; do suites "$binary"; done |
    paste -sd'|')
  tests="^($process|$in_process)\\."
  result=${RESULT:-$root/docs/results/stress.txt}
fi
(while :; do :; done) &
busy=$!
trap 'kill $busy' EXIT
log=$(mktemp)
start=$(date +%s)
status=0
ctest -j4 --repeat until-fail:"$runs" -R "$tests" --output-on-failure --timeout 1200 >"$log" 2>&1 ||
  status=$?
seconds=$(($(date +%s) - start))
cat "$log"
summary=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$log" || echo "no ctest summary")
mkdir -p "$(dirname "$result")"
{
  echo "scripts/stress.sh $runs  (each test up to $runs times in a row, stopping at its first failure)"
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:  $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- || echo ' (with local changes)')"
  echo "machine: $(nproc) cores, one kept busy by the script; ctest -j4"
  echo "pattern: $tests"
  echo "result:  $summary"
  echo "time:    ${seconds} s"
  echo "failed:"
  sed -n '/The following tests FAILED:/,$p' "$log" | grep -E '^\s+[0-9]+ - ' || echo "  none"
} >"$result"
rm -f "$log"
echo "result written to $result"
exit "$status"
