#!/usr/bin/python3
"""Peer for multi_objective_quality_bench: the same problems, domains, seeds and budgets through
Optuna 3.1's NSGAIISampler and multi-objective TPESampler (defaults), the hypervolume measured
with the same reference points, written as the same JSON lines.

    nice -n 10 /usr/bin/python3 bench/optuna_mo_quality_peer.py [--seeds 10] [--trials 200] \\
        [--first-seed 0] [--only TPE] [--problems zdt1-10,zdt2-10,dtlz2-8] \\
        --out bench/results/FILE.jsonl

Optuna's TPESampler takes minutes per 200-trial DTLZ2 run (its hypervolume code is Python):
split the seeds over processes with --first-seed.
"""
import argparse
import json
import logging
import math
import time

import numpy as np
import optuna
from optuna._hypervolume import WFG


def zdt(x, square):
    g = 1 + 9 * sum(x[1:]) / (len(x) - 1)
    f1 = x[0]
    return [f1, g * (1 - (f1 / g) ** 2)] if square else [f1, g * (1 - math.sqrt(f1 / g))]


def dtlz2(x):
    g = sum((v - 0.5) ** 2 for v in x[2:])
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    return [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b),
            (1 + g) * math.sin(a)]


# name, variables, function, reference point: as in multi_objective_quality_bench.cc.
PROBLEMS = [
    ("zdt1-10", 10, lambda x: zdt(x, False), [11.0, 11.0]),
    ("zdt2-10", 10, lambda x: zdt(x, True), [11.0, 11.0]),
    ("dtlz2-8", 8, dtlz2, [1.5, 1.5, 1.5]),
]

SAMPLERS = [
    ("optuna NSGAIISampler", lambda seed: optuna.samplers.NSGAIISampler(seed=seed)),
    ("optuna TPESampler", lambda seed: optuna.samplers.TPESampler(seed=seed)),
]


def hypervolume(values, reference):
    inside = [v for v in values if all(a < r for a, r in zip(v, reference))]
    if not inside:
        return 0.0
    return float(WFG().compute(np.asarray(inside), np.asarray(reference)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed + seeds - 1 (to split a run)")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--only", default="", help="only the samplers whose label contains this")
    parser.add_argument("--problems", default=",".join(p[0] for p in PROBLEMS))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    optuna.logging.set_verbosity(logging.ERROR)
    checkpoints = [c for c in (100, 200) if c <= args.trials]
    with open(args.out, "a") as out:
        for name, dims, function, reference in PROBLEMS:
            if name not in args.problems.split(","):
                continue
            for label, make in SAMPLERS:
                if args.only not in label:
                    continue
                for seed in range(args.first_seed, args.first_seed + args.seeds):
                    started = time.time()
                    study = optuna.create_study(directions=["minimize"] * len(reference),
                                                sampler=make(seed))
                    study.optimize(lambda t: function([t.suggest_float(f"x{i + 1}", 0.0, 1.0)
                                                       for i in range(dims)]),
                                   n_trials=args.trials)
                    values = [t.values for t in study.trials]
                    for at in checkpoints:
                        print(json.dumps({"problem": name, "sampler": label, "seed": seed,
                                          "trials": at,
                                          "hypervolume": hypervolume(values[:at], reference),
                                          "reference": reference,
                                          "seconds": round(time.time() - started, 2)}),
                              file=out, flush=True)


if __name__ == "__main__":
    main()
