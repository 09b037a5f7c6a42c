#!/usr/bin/env bash
# issue 32 item 5: a tiny `dhpt compare` on three emulated boards (orin, pi4, nano;
# bench/edge/compare.sh): the report must have a row per board with sane numbers. Each board
# that ran trials was busy (busy time and CPU > 0), no board used more CPU than its cap over
# the interval measured, the trials' own CPU fits in the board's cgroup CPU, and both runs
# completed every trial. Exits 77 (skipped, with the reason) where namespaces, cgroups or root
# are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/dhpt-edge-compare-test.XXXXXX)
# Tiny: 6 XGBoost trials on 2,000 rows, each about a second on a board.
cat >"$out/edge-tiny.yaml" <<'YAML'
name: edge-tiny
model: {kind: XGBOOST, fixed: {objective: "reg:squarederror", tree_method: hist}}
dataset: {friedman1: {samples: 2000, features: 10, noise: 1.0, seed: 0}, validation_fraction: 0.2}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: RANDOM, seed: 5}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
  - {name: num_boost_round, int_range: {min: 40, max: 120, step: 40}}
max_trials: 6
parallel_trials: 3
YAML

status=0
bench/edge/compare.sh --nodes=orin,pi4,nano --out="$out/run" "$out/edge-tiny.yaml" || status=$?
[[ $status -eq 77 ]] && exit 77
[[ $status -eq 0 ]] || { echo "FAIL: the comparison failed ($status); logs in $out"; exit 1; }

/usr/bin/python3 - "$out/run" <<'PY'
import json, sys
out = sys.argv[1]
problems = []
edge = json.load(open(f"{out}/edge-compare.json"))
[study] = edge["studies"]
report = json.load(open(f"{out}/edge-tiny/report.json"))
# The report's own rows (dhpt compare, from the workers listed and the trials): one per board,
# with the board label the cluster gave each worker.
rows = {n["node"]: n for n in report["framework"].get("nodes", [])}
if {k: v.get("board") for k, v in rows.items()} != {"n1": "orin", "n2": "pi4", "n3": "nano"}:
    problems.append(f"report.json's framework nodes are not one per board: {rows}")
# Five workers (the orin's and the nano's GPU workers too), of which three run XGBoost: the
# framework run's slots are those three.
if report["framework"].get("workers") != 3:
    problems.append(f"the framework run counts {report['framework'].get('workers')} workers, "
                    "not the 3 that run XGBoost")
for name, run in (("sequential", report["sequential"]), ("framework", report["framework"])):
    done = run.get("summary", {}).get("trials_completed", 0)
    if done != 6:
        problems.append(f"the {name} run completed {done} trials, not 6")
boards = study["boards"]
if [(b["node"], b["board"]) for b in boards] != [("n1", "orin"), ("n2", "pi4"), ("n3", "nano")]:
    problems.append(f"edge-compare.json's boards: {[(b['node'], b['board']) for b in boards]}")
if sum(b["trials"] for b in boards) != 6:
    problems.append(f"the boards ran {sum(b['trials'] for b in boards)} trials, not 6")
# A board's CPU over an interval cannot exceed its cap times the interval; CFS may overrun a
# quota by part of one 100 ms period at each end of the interval.
SLACK = 0.2
for b in boards:
    where = f"{b['node']} ({b['board']})"
    if b["trials"] > 0:
        if not b["busy_seconds"] > 0:
            problems.append(f"{where} ran {b['trials']} trials but was busy {b['busy_seconds']} s")
        if not b["trial_cpu_seconds"] > 0 or not b["cgroup_cpu_seconds"] > 0:
            problems.append(f"{where} ran trials with no CPU time: {b}")
    limit = b["cap_cores"] * (b["cgroup_interval_seconds"] + SLACK)
    if not 0 <= b["cgroup_cpu_seconds"] <= limit:
        problems.append(f"{where} used {b['cgroup_cpu_seconds']:.2f} CPU s in "
                        f"{b['cgroup_interval_seconds']:.2f} s, over its cap of {b['cap_cores']} cores")
    if b["trial_cpu_seconds"] > b["cgroup_cpu_seconds"] + 0.05:
        problems.append(f"{where}: its trials' CPU ({b['trial_cpu_seconds']:.2f} s) exceeds its "
                        f"cgroup's over the run ({b['cgroup_cpu_seconds']:.2f} s)")
    if not 0 <= b["idle_seconds"] <= study["framework"]["wall_seconds"] * max(1, b["slots"]):
        problems.append(f"{where}: idle {b['idle_seconds']} s outside the run's slot time")
    if not b["peak_memory_mib"] > 0:
        problems.append(f"{where}: no memory measured")
s = study["sequential"]
if not (s["cgroup_cpu_seconds"] > 0 and
        s["cgroup_cpu_seconds"] <= s["cap_cores"] * (s["cgroup_interval_seconds"] + SLACK)):
    problems.append(f"the sequential board's CPU is not within its cap: {s}")
print("edge_compare_test: " + "; ".join(
    f"{b['node']} {b['board']}: {b['trials']} trials, busy {b['busy_seconds']:.1f} s, "
    f"{100 * b['utilisation_of_cap']:.0f}% of cap" for b in boards))
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
echo "edge_compare_test: passed (logs in $out)"
