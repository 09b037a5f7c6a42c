#!/usr/bin/python3
"""Where do the model-choice benchmark's optimisers differ: in the first trials or later, in
the model kind they choose, and how far from the best r2 anyone found?

    /usr/bin/python3 bench/model_choice_curves.py [--regrets-out=FILE] CURVES_FILE [CURVES_FILE ...]

Reads what model_choice_quality_bench --curves_out and optuna_model_choice_peer.py
--curves-out write (label, seed, then each trial's MODEL_KIND:loss with loss = 1 - r2) and
prints, per optimiser: the median best r2 after 10, 20, 30, 50 and 100 trials, the seeds'
spread at 50 (interquartile range), the share of trials 11-50 and 51-100 that chose
RANDOM_FOREST, the median best r2 of each kind at 50, and the median gap at 50 and 100 to the
best r2 of any trial in the files (the best known). --regrets-out also writes each seed's best
loss at 50 and 100 trials as the benches' --regrets_out do (model_choice@BUDGET), for
quality_significance.py: one optimiser's seeds may then come from several processes
(--first_seed), joined here by label and ordered by seed. Python's standard library only.
"""
import statistics
import sys

CHECKPOINTS = (10, 20, 30, 50, 100)


def read(paths):
    runs = {}  # label -> [[(kind, loss), ...] per seed]
    for path in paths:
        with open(path) as f:
            for line in f:
                label, seed, trials = line.rstrip("\n").split("\t")
                run = []
                for item in trials.split(","):
                    kind, loss = item.rsplit(":", 1)
                    run.append((kind, float(loss)))
                runs.setdefault(label, []).append((int(seed), run))
    return {label: [run for _, run in sorted(seeds, key=lambda s: s[0])]
            for label, seeds in runs.items()}


def write_regrets(path, runs, budgets=(50, 100)):
    with open(path, "w") as out:
        for label, seeds in runs.items():
            for b in budgets:
                bests = [min(l for _, l in run[:b]) for run in seeds]
                out.write(f"model_choice@{b}\t{label}\t{','.join(repr(v) for v in bests)}\n")


def quartiles(values):
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def main():
    regrets = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--regrets-out=")]
    runs = read([a for a in sys.argv[1:] if not a.startswith("--")])
    if regrets:
        write_regrets(regrets[0], runs)
    best_known = min(loss for seeds in runs.values() for run in seeds for _, loss in run)
    print(f"best known r2 (any trial of any run): {1 - best_known:.4f}\n")
    print("| optimiser | seeds | " + " | ".join(f"r2 @{c}" for c in CHECKPOINTS) +
          " | IQR @50 | RF share 11-50 | RF share 51-100 | best RF @50 | best XGB @50"
          " | gap to best known @50 | @100 |")
    print("|---|---|" + "---|" * (len(CHECKPOINTS) + 7))
    for label, seeds in runs.items():
        cells = []
        for c in CHECKPOINTS:
            cells.append(statistics.median(1 - min(l for _, l in run[:c]) for run in seeds))
        at50 = [1 - min(l for _, l in run[:50]) for run in seeds]
        low, high = quartiles(at50)
        share = lambda a, b: statistics.mean(  # noqa: E731
            sum(k == "RANDOM_FOREST" for k, _ in run[a:b]) / len(run[a:b]) for run in seeds)

        def kind_best(kind):
            bests = [1 - min((l for k, l in run[:50] if k == kind), default=1.0) for run in seeds]
            return statistics.median(bests)

        gap = lambda c: statistics.median(  # noqa: E731
            min(l for _, l in run[:c]) - best_known for run in seeds)
        print(f"| {label} | {len(seeds)} | " + " | ".join(f"{v:.4f}" for v in cells) +
              f" | [{low:.4f}, {high:.4f}] | {share(10, 50):.2f} | {share(50, 100):.2f}"
              f" | {kind_best('RANDOM_FOREST'):.4f} | {kind_best('XGBOOST'):.4f}"
              f" | {gap(50):.4f} | {gap(100):.4f} |")


if __name__ == "__main__":
    main()
