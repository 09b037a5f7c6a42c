#!/usr/bin/python3
"""Multi-objective quality, side by side: the median hypervolume of every (problem, sampler,
trials) in the JSON lines of multi_objective_quality_bench and optuna_mo_quality_peer.py, then
for each problem and budget DHPT's best sampler (highest median) against Optuna's best, with
the probability that a run of ours has the higher hypervolume (ties count half) and the
two-sided Mann-Whitney p-value (quality_significance.mann_whitney: normal approximation with
the tie correction, rough for 10 runs each).

    /usr/bin/python3 bench/mo_quality_significance.py bench/results/multi-objective-dhpt.jsonl \\
        bench/results/multi-objective-optuna.jsonl ["dhpt TPE=optuna TPESampler" ...]

Each optional OURS=PEER pair adds the same comparison for those two samplers.
"""
import json
import os
import sys
from collections import defaultdict
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_significance import mann_whitney  # noqa: E402


def read(path):
    runs = defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                runs[(r["problem"], r["trials"], r["sampler"])].append(r["hypervolume"])
    return runs


def main():
    ours, theirs = read(sys.argv[1]), read(sys.argv[2])
    runs = {**ours, **theirs}
    problems = sorted({p for p, _, _ in runs}, key=lambda p: (p[:4] == "dtlz", p))
    budgets = sorted({t for _, t, _ in runs})
    samplers = sorted({s for _, _, s in runs}, key=lambda s: (s.startswith("optuna"), s))
    print("| problem | sampler | " + " | ".join(f"median HV @{t}" for t in budgets) + " |")
    print("|---|---|" + "---|" * len(budgets))
    for p in problems:
        for s in samplers:
            if any((p, t, s) in runs for t in budgets):
                cells = [f"{median(runs[(p, t, s)]):.4f}" if (p, t, s) in runs else "-" for t in budgets]
                print(f"| {p} | {s} | " + " | ".join(cells) + " |")
    print()
    print("Best of each side in bold.\n")
    print("| problem | trials | DHPT | Optuna | median DHPT | median Optuna | "
          "P(DHPT higher) | p (Mann-Whitney) |")
    print("|---|---|---|---|---|---|---|---|")
    pairs = [tuple(arg.split("=")) for arg in sys.argv[3:]]
    for p in problems:
        for t in budgets:
            for mine, peer in pairs:
                if (p, t, mine) in ours and (p, t, peer) in theirs:
                    compare(p, t, (p, t, mine), (p, t, peer), ours, theirs)
            def best(table):
                keys = [k for k in table if k[0] == p and k[1] == t]
                return max(keys, key=lambda k: median(table[k]), default=None)
            a, b = best(ours), best(theirs)
            if a is None or b is None:
                continue
            compare(p, t, a, b, ours, theirs, "**")


def compare(p, t, a, b, ours, theirs, mark=""):
    superiority, pvalue = mann_whitney(ours[a], theirs[b])
    # mann_whitney's superiority is P(first lower); hypervolume is better higher.
    print(f"| {p} | {t} | {mark}{a[2]}{mark} | {mark}{b[2]}{mark} | {median(ours[a]):.4f} | "
          f"{median(theirs[b]):.4f} | {1 - superiority:.2f} | {pvalue:.3g} |")


if __name__ == "__main__":
    main()
