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

--equal_compute prints the equal-compute tables (pruning_bench --equal_compute): each pruned
study ran on until it had trained the unpruned study's steps, and compute is counted in those
steps, as a share of that budget, the same unit for both systems. Two targets: the median one
above, and the paired one of each seed (its own unpruned run's best less 0.002; for Optuna, the
unpruned DHPT run of the same seed number: samplers' seeds do not pair, so there it is one more
draw of the target). A DHPT rule meets the goal in a cell when it reaches the target in at least
4 of 5 seeds with a median compute to it below that of Optuna's best pruner there (the least
median; a seed that never reached it counts as infinite); "-" where the rule or any of Optuna's
three pruners has fewer than five seeds.
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


def steps_to(run, target, max_steps):
    """Steps trained until the first completed trial at or past the target (inf: never)."""
    spent = 0
    for trial in run["trials"]:
        spent += trial["pruned_step"] if trial["state"] == "PRUNED" else max_steps
        if trial["state"] == "COMPLETED" and trial["value"] >= target:
            return spent
    return float("inf")


def paired_targets(baseline):
    """Seed -> the unpruned run of that seed's best less the tolerance."""
    return {r["seed"]: best(r) - TOLERANCE for r in baseline}


def reached_paired(group, paired):
    return sum(r["seed"] in paired and cpu_to(r, paired[r["seed"]]) != float("inf")
               for r in group)


def shares(values):
    return " ".join("-" if v == float("inf") else f"{v:.2f}" for v in values)


def data_sets(runs, has_rows, title, header):
    """The loop both tables share: for each model with rows (has_rows(its study prefix)), its
    title (a format string of {model}) and the table's header; then, for each of its data sets
    with unpruned DHPT runs, (study, label, those runs by seed, the median target, the paired
    targets)."""
    for model, prefix in (("XGBoost", "prune-xgb"), ("Random Forest", "prune-rf")):
        if not has_rows(prefix):
            continue
        print(f"\n{title.format(model=model)}\n")
        print(header)
        for suffix, label in DATA_SETS.items():
            study = prefix + (f"-{suffix}" if suffix else "")
            baseline = sorted(runs.get((study, "dhpt", "none"), []), key=lambda r: r["seed"])
            if baseline:
                target = statistics.median(best(r) for r in baseline) - TOLERANCE
                yield study, label, baseline, target, paired_targets(baseline)


def equal_compute_markdown(runs, equal):
    """The equal-compute tables: a row per data set and rule, both targets."""
    title = ("**{model}, equal compute**: trials (median), trial CPU vs unpruned, best r2; for "
             "each target, the seeds that reached it and the compute at which each seed "
             "(1 to 5) first did, as a share of the unpruned study's steps (- never), then "
             "the median; goal: 4 of 5 seeds and a median below Optuna's best pruner's.")
    header = ("| data set (median target) | rule | trials | CPU vs unpruned | best r2 | "
              "reached | compute to target, per seed | median | goal | "
              "reached, paired | compute to paired target, per seed | median | goal |\n"
              "|---|---|--:|--:|--:|--:|---|--:|---|--:|---|--:|---|")
    # Over the judged cells: name -> [cells, goal met (median target), goal met (paired),
    # seeds at the median target, seeds], so that which rule meets the goal where is counted,
    # not read off the tables by hand.
    summary = defaultdict(lambda: [0, 0, 0, 0, 0])
    for study, label, baseline, target, paired in data_sets(
            runs, lambda prefix: any(k[0].startswith(prefix) for k in equal), title, header):
        base_cpu = {r["seed"]: sum(t["cpu_seconds"] for t in r["trials"]) for r in baseline}
        max_steps = None
        rows = [("dhpt", "none (60 trials)", baseline)]
        for system in ("dhpt", "optuna"):
            for rule in sorted(k[2] for k in equal if k[:2] == (study, system)):
                group = sorted(equal[(study, system, rule)], key=lambda r: r["seed"])
                max_steps = group[0]["budget_steps"] // len(baseline[0]["trials"])
                rows.append((system, rule, group))
        if max_steps is None:
            continue
        budget = max_steps * len(baseline[0]["trials"])
        measured = {}  # (system, rule) -> (reached, median share) for each target
        for system, rule, group in rows:
            median_share = [steps_to(r, target, max_steps) / budget for r in group]
            paired_share = [steps_to(r, paired[r["seed"]], max_steps) / budget
                            if r["seed"] in paired else float("inf") for r in group]
            measured[(system, rule)] = (median_share, paired_share)
        optuna_best = [min((statistics.median(m[i]) for (s, _), m in measured.items()
                            if s == "optuna"), default=float("inf")) for i in (0, 1)]
        # The goal is judged only beside Optuna's three pruners, each with five seeds.
        judged = sum(system == "optuna" and len(group) >= 5
                     for system, _, group in rows) >= 3
        first = True
        for system, rule, group in rows:
            name = f"DHPT {rule}" if system == "dhpt" else f"Optuna {SYSTEMS.get(rule, rule)}"
            cpu = statistics.median(sum(t["cpu_seconds"] for t in r["trials"]) /
                                    base_cpu[r["seed"]] for r in group if r["seed"] in base_cpu)
            cells = []
            counted = summary[name] if judged and len(group) >= 5 else [0] * 5
            counted[0] += 1
            for i, share in enumerate(measured[(system, rule)]):
                reached = sum(v != float("inf") for v in share)
                median = statistics.median(share)
                goal = "-"
                if system == "dhpt" and not rule.startswith("none"):
                    # Judged on five seeds only: fewer (a cell still running) say nothing.
                    goal = ("met" if reached >= 4 and median < optuna_best[i] else "no"
                            ) if len(group) >= 5 and judged else "-"
                counted[1 + i] += goal == "met"
                if i == 0:
                    counted[3:] = [counted[3] + reached, counted[4] + len(group)]
                cells += [f"{reached}/{len(group)}", shares(share),
                          "-" if median == float("inf") else f"{median:.2f}", goal]
            print(f"| {f'{label} ({target:.4f})' if first else ''} | {name} | "
                  f"{statistics.median(len(r['trials']) for r in group):.0f} | {cpu:.2f} | "
                  f"{statistics.median(best(r) for r in group):.4f} | " + " | ".join(cells) + " |")
            first = False
    print("\n**Over the cells judged** (five seeds of the rule and of each Optuna pruner): cells, "
          "cells where a DHPT rule met the goal under each target, and seed runs that reached "
          "the median target.\n")
    print("| rule | cells | goal met, median target | goal met, paired target | "
          "seed runs at the median target |")
    print("|---|--:|--:|--:|--:|")
    for name, (cells, met, met_paired, reached, seeds) in sorted(summary.items()):
        dhpt = name.startswith("DHPT") and "none" not in name
        print(f"| {name} | {cells} | {met if dhpt else '-'} | {met_paired if dhpt else '-'} | "
              f"{reached}/{seeds} |")


def markdown(runs):
    """docs/early-stopping.md's matrix tables: one per model, a row per data set and rule."""
    title = ("**{model}**: vs unpruned (trial CPU), best r2, reached (seeds), CPU s to "
             "target, pruned trials within reach of the best (median; DHPT only).")
    header = ("| data set (target r2; unpruned bests) | rule | seeds | vs unpruned | best r2 | "
              "reached | CPU s to target | within reach | reached, paired target |\n"
              "|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for study, label, baseline, target, paired in data_sets(
            runs, lambda prefix: any(k[0].startswith(prefix) and k[1:] == ("dhpt", "none")
                                     for k in runs), title, header):
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
                shown = len(reach) == len(group) and rule != "none"
                name = (f"DHPT {rule}" if system == "dhpt"
                        else f"Optuna {SYSTEMS.get(rule, rule)}")
                print(f"| {label_with if first else ''} | {name} | "
                      f"{len(group)} | {cpu / base_cpu:.2f} | "
                      f"{statistics.median(best(r) for r in group):.4f} | "
                      f"{reached}/{len(group)} | "
                      f"{'not reached' if median_to == float('inf') else f'{median_to:.2f}'}"
                      f" | {statistics.median(reach) if shown else '-'}"
                      f" | {reached_paired(group, paired)}/{len(group)} |")
                first = False


def main(paths):
    runs = defaultdict(list)  # (study, system, rule) -> runs
    equal = defaultdict(list)  # the same for equal-compute runs
    as_markdown = "--markdown" in paths
    as_equal = "--equal_compute" in paths
    for path in (p for p in paths if p not in ("--markdown", "--equal_compute")):
        path, _, rule = path.partition("=")  # FILE=RULE: every line of FILE under that rule.
        with open(path) as f:
            for line in f:
                if line.strip():
                    run = json.loads(line)
                    into = equal if run.get("mode") == "equal_compute" else runs
                    into[(run["study"], run["system"], rule or run["rule"])].append(run)
    if as_equal:
        equal_compute_markdown(runs, equal)
        return
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
