#!/usr/bin/env bash
# issue 32, fifth round: a board's speed prior, from real cgroups. Each emulated board's worker
# reads its cgroup's CPU quota and announces the CPU a trial gets (trial_cpu_cores); before any
# trial has completed, `dhpt workers` shows each board's prior speed from it. An Orin at 10% of
# a host core and a Pi 4 at 2% (--cpu-scale=25 of the benchmark's shares) must be 5x apart,
# the Orin above the median board and the Pi 4 below. Exits 77 (skipped, with the reason) where
# namespaces, cgroups or root are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/dhpt-edge-prior-test.XXXXXX)
status=0
bench/edge_cluster.sh --nodes=orin,pi4:cpu=80 --cpu-scale=25 --out="$out/run" -- \
  sh -c 'build/bin/dhpt workers --json >"$EDGE_OUT/workers.json" &&
         build/bin/dhpt workers >"$EDGE_OUT/workers.txt"' </dev/null || status=$?
[[ $status -eq 77 ]] && exit 77
[[ $status -eq 0 ]] || { echo "FAIL: the cluster or dhpt workers failed ($status); logs in $out"; exit 1; }

/usr/bin/python3 - "$out/run/workers.json" "$out/run/workers.txt" <<'PY'
import json, sys
workers = {w["capabilities"]["labels"]["board"]: w for w in json.load(open(sys.argv[1]))["workers"]}
problems = []
if sorted(workers) != ["orin", "pi4"]:
    problems.append(f"boards listed: {sorted(workers)}")
else:
    cores = {b: w["capabilities"].get("trial_cpu_cores", 0) for b, w in workers.items()}
    prior = {b: w.get("prior_speed", 0) for b, w in workers.items()}
    # Its quota (cpu.cfs_quota_us over cpu.cfs_period_us), one slot, one thread a trial.
    for board, want in (("orin", 0.1), ("pi4", 0.02)):
        if abs(cores[board] - want) > 1e-9:
            problems.append(f"{board} announced {cores[board]} cores a trial, not {want}")
    if not (prior["orin"] > 1 > prior["pi4"] > 0) or abs(prior["orin"] / prior["pi4"] - 5) > 1e-6:
        problems.append(f"prior speeds {prior}: not the Orin 5x the Pi 4 about the median")
    # The table's speed column: the median of 0.1 and 0.02 cores is 0.06.
    table = open(sys.argv[2]).read()
    for text in ("prior 1.67x", "prior 0.33x"):
        if text not in table:
            problems.append(f"dhpt workers does not show '{text}':\n{table}")
print("\n".join(f"FAIL: {p}" for p in problems) or f"ok: {json.dumps(prior)}")
sys.exit(1 if problems else 0)
PY
