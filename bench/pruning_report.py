#!/usr/bin/python3
"""Side by side: the JSON lines of bench/pruning_bench.cc and bench/optuna_pruning_peer.py.

For each study and each system/rule, medians over the seeds of: the trials' CPU seconds (pruned
ones included), wall time, the best completed r2, and the CPU seconds spent until a completed
trial came within 0.002 of the target: the median best of DHPT's unpruned runs. One target for
every system, since seeds of different samplers do not pair up.

  /usr/bin/python3 bench/pruning_report.py bench/results/pruning.jsonl
  /usr/bin/python3 bench/pruning_report.py --markdown bench/results/pruning-matrix*.jsonl

--markdown prints the matrix tables of docs/early-stopping.md instead. FILE=RULE reads every
line of FILE as RULE's (earlier runs of a rule beside the current ones).
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


DATA_SETS = {"": "Friedman #1", "friedman3": "Friedman #3", "diabetes": "diabetes",
             "cancer": "breast cancer"}
SYSTEMS = {"none": "none", "median": "Median", "sha": "SuccessiveHalving",
           "hyperband": "Hyperband"}


def markdown(runs):
    """docs/early-stopping.md's matrix tables: one per model, a row per data set and rule."""
    for model, prefix in (("XGBoost", "prune-xgb"), ("Random Forest", "prune-rf")):
        if not any(k[0].startswith(prefix) and k[1:] == ("dhpt", "none") for k in runs):
            continue
        print(f"\n**{model}**: vs unpruned (trial CPU), best r2, reached (seeds), CPU s to "
              "target, pruned trials within reach of the best (median; DHPT only).\n")
        print("| data set (target r2; unpruned bests) | rule | seeds | vs unpruned | best r2 | reached | "
              "CPU s to target | within reach |")
        print("|---|---|--:|--:|--:|--:|--:|--:|")
        for suffix, label in DATA_SETS.items():
            study = prefix + (f"-{suffix}" if suffix else "")
            baseline = runs.get((study, "dhpt", "none"))
            if not baseline:
                continue
            target = statistics.median(best(r) for r in baseline) - TOLERANCE
            base_cpu = statistics.median(
                sum(t["cpu_seconds"] for t in r["trials"]) for r in baseline)
            # The unpruned seeds' bests: how far apart seeds end, against the 0.002 tolerance.
            low, high = min(best(r) for r in baseline), max(best(r) for r in baseline)
            label_with = f"{label} ({target:.4f}; unpruned {low:.4f} to {high:.4f})"
            first = True
            for system in ("dhpt", "optuna"):
                standard = ["none", "median", "asha", "sha", "hyperband"]
                others = sorted(k[2] for k in runs if k[:2] == (study, system)
                                and k[2] not in standard)
                for rule in standard + others:
                    group = runs.get((study, system, rule))
                    if not group:
                        continue
                    cpu = statistics.median(
                        sum(t["cpu_seconds"] for t in r["trials"]) for r in group)
                    to_target = [cpu_to(r, target) for r in group]
                    reached = sum(c != float("inf") for c in to_target)
                    median_to = statistics.median(to_target)
                    reach = [r["pruned_within_reach"] for r in group if "pruned_within_reach" in r]
                    name = (f"DHPT {rule}" if system == "dhpt"
                            else f"Optuna {SYSTEMS.get(rule, rule)}")
                    print(f"| {label_with if first else ''} | {name} | "
                          f"{len(group)} | {cpu / base_cpu:.2f} | "
                          f"{statistics.median(best(r) for r in group):.4f} | "
                          f"{reached}/{len(group)} | "
                          f"{'not reached' if median_to == float('inf') else f'{median_to:.2f}'}"
                          f" | {statistics.median(reach) if len(reach) == len(group) and rule != 'none' else '-'} |")
                    first = False


def main(paths):
    runs = defaultdict(list)  # (study, system, rule) -> runs
    as_markdown = "--markdown" in paths
    for path in (p for p in paths if p != "--markdown"):
        path, _, rule = path.partition("=")  # FILE=RULE: every line of FILE under that rule.
        with open(path) as f:
            for line in f:
                if line.strip():
                    run = json.loads(line)
                    runs[(run["study"], run["system"], rule or run["rule"])].append(run)
    if as_markdown:
        markdown(runs)
        return
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
