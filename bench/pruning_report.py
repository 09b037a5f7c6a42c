#!/usr/bin/python3
"""Side by side: the JSON lines of bench/pruning_bench.cc and bench/optuna_pruning_peer.py.

For each study and each system/rule, medians over the seeds of: the trials' CPU seconds (pruned
ones included), wall time, the best completed r2, and the CPU seconds spent until a completed
trial came within 0.002 of the target: the median best of DHPT's unpruned runs. One target for
every system, since seeds of different samplers do not pair up.

  /usr/bin/python3 bench/pruning_report.py bench/results/pruning.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

TOLERANCE = 0.002


def best(run):
    values = [t["value"] for t in run["trials"] if t["state"] == "COMPLETED"]
    return max(values) if values else float("-inf")


def cpu_to(run, target):
    spent = 0.0
    for trial in run["trials"]:
        spent += trial["cpu_seconds"]
        if trial["state"] == "COMPLETED" and trial["value"] >= target:
            return spent
    return float("inf")


def main(paths):
    runs = defaultdict(list)  # (study, system, rule) -> runs
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.strip():
                    run = json.loads(line)
                    runs[(run["study"], run["system"], run["rule"])].append(run)
    for study in sorted({key[0] for key in runs}):
        baseline = runs.get((study, "dhpt", "none"))
        if not baseline:
            print(f"{study}: no unpruned DHPT run to compare with", file=sys.stderr)
            continue
        target = statistics.median(best(r) for r in baseline) - TOLERANCE
        base_cpu = statistics.median(sum(t["cpu_seconds"] for t in r["trials"]) for r in baseline)
        digits = 0 if base_cpu >= 50 else 2  # Small studies (the matrix) need the decimals.
        print(f"\n{study}: target r2 {target:.4f} (median unpruned best - {TOLERANCE})\n")
        print("| system | rule | seeds | trials pruned | trial CPU s | vs unpruned | wall s "
              "| best r2 | CPU s to target | reached |")
        print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for (s, system, rule), group in sorted(runs.items()):
            if s != study:
                continue
            cpu = statistics.median(sum(t["cpu_seconds"] for t in r["trials"]) for r in group)
            pruned = statistics.median(
                sum(t["state"] == "PRUNED" for t in r["trials"]) for r in group)
            to_target = [cpu_to(r, target) for r in group]
            reached = sum(c != float("inf") for c in to_target)
            median_to = statistics.median(to_target)
            print(f"| {system} | {rule} | {len(group)} | {pruned:.0f} | {cpu:.{digits}f} | "
                  f"{cpu / base_cpu:.2f} | "
                  f"{statistics.median(r['wall_seconds'] for r in group):.0f} | "
                  f"{statistics.median(best(r) for r in group):.4f} | "
                  f"{'not reached' if median_to == float('inf') else f'{median_to:.{digits}f}'} | "
                  f"{reached}/{len(group)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
