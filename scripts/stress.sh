#!/usr/bin/env bash
# Runs the integration tests RUNS times in a row (default 20) under parallel ctest while a busy
# loop keeps a core loaded: a test that fails only under load is a race in the product, to fix,
# not to retry. Needs a build (scripts/build.sh). TESTS is a ctest -R pattern.
#   scripts/stress.sh            the process-level integration tests, 20 times
#   scripts/stress.sh 5 Faults   the fault tests, 5 times
set -euo pipefail
cd "$(dirname "$0")/../build"
runs=${1:-20}
tests=${2:-'^(HardeningTest|DurabilityTest|FaultsTest|StudyFlowTest|ApiTest|SecurityTest|ReflectionTest|EarlyStoppingFlowTest|SchedulerCoreTest|MultiObjectiveTest|ParetoFrontTest|ClientTrialsTest|WarmStartTest|WatchTest|WatchJournalTest|UserCodeTest|ExamplesTest|WorkerShutdownTest|StorageFaultsTest|OptimizerLimitsTest|BackupTest|StudyImportTest|Command[A-Za-z]*Test)\.'}
(while :; do :; done) &
busy=$!
trap 'kill $busy' EXIT
ctest -j4 --repeat until-fail:"$runs" -R "$tests" --output-on-failure --timeout 600
