#!/usr/bin/python3
"""Peer for bench/early_stopping_bench.cc: the time Optuna 3.1 takes to judge one report
(trial.should_prune, after the report) with MedianPruner and SuccessiveHalvingPruner, against the
number of finished trials in an in-memory study, each with a 100-report curve rising towards a
level of its own (the bench's histories), the judged trial at its 50th report for the median
pruner and at its 16th (step 160, a rung) for successive halving.

  /usr/bin/python3 bench/optuna_pruner_cost_peer.py
"""
import random
import statistics
import time

import optuna

REPORTS = 100


def curve(top, reports):
    return [(r * 10, top * (1 - 1.0 / (r + 1))) for r in range(1, reports + 1)]


def judge_cost(pruner, others, reports, repeats=50):
    study = optuna.create_study(direction="maximize", pruner=pruner,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    rng = random.Random(7)
    for _ in range(others):
        values = curve(rng.uniform(0.5, 1.0), REPORTS)
        # The rung values successive halving would have recorded for this trial (min_resource
        # 10, reduction_factor 4: steps 10, 40, 160, 640), so it competes as in a real study.
        rungs = {f"completed_rung_{k}": dict(values)[10 * 4**k] for k in range(4)}
        study.add_trial(optuna.trial.create_trial(
            value=values[-1][1], intermediate_values=dict(values), system_attrs=rungs,
            distributions={}, params={}))
    seconds = []
    for _ in range(repeats):
        # A fresh trial each time: successive halving records a trial's rungs as it judges them,
        # so judging the same report again would take a shortcut.
        trial = study.ask()
        for step, value in curve(rng.uniform(0.5, 1.0), reports):
            trial.report(value, step)
        start = time.perf_counter()
        trial.should_prune()
        seconds.append(time.perf_counter() - start)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)  # Out of later trials' way.
    return statistics.median(seconds)


def main():
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"optuna {optuna.__version__}: median time of should_prune, microseconds")
    for name, make, reports in (
            ("median", optuna.pruners.MedianPruner, 50),
            ("successive halving", lambda: optuna.pruners.SuccessiveHalvingPruner(
                min_resource=10, reduction_factor=4), 16)):
        for others in (10, 100, 1000):
            print(f"  {name:18s} {others:5d} finished trials: "
                  f"{judge_cost(make(), others, reports) * 1e6:10.1f}")


if __name__ == "__main__":
    main()
