#!/usr/bin/python3
"""Peer for conditional_quality_bench: the same conditional problem (optimum 0), written
define-by-run, through Optuna 3.1's TPESampler (independent, as by default, and with
multivariate=True, group=True) and RandomSampler, with the same seeds and budgets.

    /usr/bin/python3 bench/optuna_conditional_peer.py [--seeds 10] [--budgets 50,100]
        [--regrets-out FILE]   # every seed's best per budget, for bench/quality_significance.py

The loss is services/optimizer/conditional_benchmark.cc's, line for line.
"""
import argparse
import logging
import math
import statistics
import warnings

import optuna

from optuna_peer_common import SAMPLERS


def objective(trial):
    model = trial.suggest_categorical("model", ["linear", "tree", "net"])
    if model == "linear":
        alpha = trial.suggest_float("alpha", 1e-4, 10, log=True)
        return 0.4 + (math.log10(alpha) + 1) ** 2 / 25
    if model == "tree":
        depth = trial.suggest_int("depth", 1, 12)
        subsample = trial.suggest_float("subsample", 0.1, 1)
        booster = trial.suggest_categorical("booster", ["gbtree", "dart"])
        base = (depth - 8) ** 2 / 60 + (subsample - 0.8) ** 2
        if booster == "dart":
            if depth == 12:
                raise optuna.TrialPruned()  # Forbidden; DHPT never suggests it.
            rate_drop = trial.suggest_float("rate_drop", 0, 1)
            return base + (rate_drop - 0.3) ** 2
        return base + 0.15
    layers = trial.suggest_int("layers", 1, 3)
    width_1 = trial.suggest_int("width_1", 8, 256, log=True)
    loss = 0.05 + 0.05 * (3 - layers) + (math.log2(width_1) - 4 - layers) ** 2 / 40
    for k in range(2, layers + 1):
        width = trial.suggest_int(f"width_{k}", 8, 256, log=True)
        loss += (math.log2(width) - 4 - layers) ** 2 / 40
    return loss


def run(make, seed, budget):
    study = optuna.create_study(sampler=make(seed), direction="minimize")
    best, history = math.inf, []
    # A pruned (forbidden) trial does not count towards the budget, as DHPT never spends one.
    while len(history) < budget:
        trial = study.ask()
        try:
            value = objective(trial)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        study.tell(trial, value)
        best = min(best, value)
        history.append(best)
    return history


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", default="50,100")
    parser.add_argument("--regrets-out")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")  # multivariate/group are experimental in Optuna 3.1.
    logging.getLogger("optuna").setLevel(logging.WARNING)
    budgets = [int(b) for b in args.budgets.split(",")]
    out = open(args.regrets_out, "w") if args.regrets_out else None
    print("| sampler |" + "".join(f" median best @{b} |" for b in budgets))
    print("|---|" + "---|" * len(budgets))
    for label, make in SAMPLERS.items():
        at = [[] for _ in budgets]
        for seed in range(args.seeds):
            history = run(make, seed, max(budgets))
            for k, b in enumerate(budgets):
                at[k].append(history[b - 1])
        print(f"| {label} |" + "".join(f" {statistics.median(v):.4f} |" for v in at), flush=True)
        if out:
            for k, b in enumerate(budgets):
                out.write(f"conditional@{b}\t{label}\t{','.join(repr(v) for v in at[k])}\n")


if __name__ == "__main__":
    main()
