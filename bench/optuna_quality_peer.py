#!/usr/bin/python3
"""Peer for optimizer_quality_bench: the same functions, domains, seeds and budgets through
Optuna 3.1's TPESampler, CmaEsSampler and RandomSampler, in the same table format.

    /usr/bin/python3 bench/optuna_quality_peer.py [--seeds 10] [--trials 100] [--only TPE]
        [--regrets-out FILE]   # every seed's final regret, for bench/quality_significance.py
"""
import argparse
import logging
import math

import numpy as np
import optuna

PI = math.pi


def branin(x):
    x1, x2 = x
    b, c, t = 5.1 / (4 * PI * PI), 5 / PI, 1 / (8 * PI)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
     [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886], [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650], [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6(x):
    return -sum(ALPHA[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j]) ** 2 for j in range(6)))
                for i in range(4))


def rosenbrock(x):
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1))


def ackley(x):
    d = len(x)
    return (-20 * math.exp(-0.2 * math.sqrt(sum(v * v for v in x) / d))
            - math.exp(sum(math.cos(2 * PI * v) for v in x) / d) + 20 + math.e)


PROBLEMS = [  # name, dims, function, bounds, minimum
    ("branin", 2, branin, [(-5, 10), (0, 15)], 0.397887357729738),
    ("hartmann6", 6, hartmann6, [(0, 1)] * 6, -3.32236801141551),
    ("rosenbrock", 4, rosenbrock, [(-5, 10)] * 4, 0.0),
    ("ackley", 5, ackley, [(-32.768, 32.768)] * 5, 0.0),
]

SAMPLERS = [
    ("optuna TPESampler", lambda seed: optuna.samplers.TPESampler(seed=seed)),
    ("optuna CmaEsSampler", lambda seed: optuna.samplers.CmaEsSampler(seed=seed)),
    ("optuna RandomSampler", lambda seed: optuna.samplers.RandomSampler(seed=seed)),
]


def best_so_far(make_sampler, seed, function, bounds, trials):
    study = optuna.create_study(sampler=make_sampler(seed))
    study.optimize(lambda t: function([t.suggest_float(f"x{i + 1}", lo, hi)
                                       for i, (lo, hi) in enumerate(bounds)]), n_trials=trials)
    return np.minimum.accumulate([t.value for t in study.trials])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--only", default="", help="only the samplers whose label contains this")
    parser.add_argument("--regrets-out", default="")
    args = parser.parse_args()
    regrets_out = open(args.regrets_out, "w") if args.regrets_out else None
    optuna.logging.set_verbosity(logging.ERROR)
    checkpoints = [25, 50, 100]
    for name, dims, function, bounds, minimum in PROBLEMS:
        for label, make in SAMPLERS:
            if args.only not in label:
                continue
            regrets = [[] for _ in checkpoints]
            for seed in range(args.seeds):
                best = best_so_far(make, seed, function, bounds, args.trials)
                for c, at in enumerate(checkpoints):
                    regrets[c].append(best[min(at, len(best)) - 1] - minimum)
            cells = " |".join(f" {np.median(r):.4g} [{np.quantile(r, 0.25):.3g}, {np.quantile(r, 0.75):.3g}]"
                              for r in regrets)
            print(f"| {name}-{dims} | {label} |{cells} |", flush=True)
            if regrets_out:
                print(f"{name}-{dims}\t{label}\t" + ",".join(repr(float(v)) for v in regrets[-1]),
                      file=regrets_out, flush=True)


if __name__ == "__main__":
    main()
