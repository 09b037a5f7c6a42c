#!/usr/bin/python3
"""Peer for optimizer_cost_bench: the time Optuna 3.1's TPESampler takes for one suggestion
of 10 parameters after 100, 300 and 1,000 finished trials (Styblinski-Tang on random points).
Optuna 3.1 has no Gaussian-process sampler (GPSampler arrived in 3.6; BoTorchSampler needs
BoTorch, which Debian does not package), so there is no GP peer to time here.

    /usr/bin/python3 bench/optuna_cost_peer.py
"""
import logging
import time

import numpy as np
import optuna
from optuna.distributions import FloatDistribution

DIMS = 10


def styblinski_tang(x):
    return sum(v**4 - 16 * v**2 + 5 * v for v in x) / 2


def main():
    optuna.logging.set_verbosity(logging.ERROR)
    rng = np.random.RandomState(7)
    distributions = {f"x{i + 1}": FloatDistribution(-5, 5) for i in range(DIMS)}
    for finished in (100, 300, 1000):
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
        for _ in range(finished):
            params = {name: rng.uniform(-5, 5) for name in distributions}
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=distributions,
                value=styblinski_tang(list(params.values()))))
        timings = []
        for _ in range(10):
            start = time.perf_counter()
            trial = study.ask(distributions)  # Samples all ten parameters.
            timings.append(time.perf_counter() - start)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # Keeps the history size fixed.
        print(f"optuna TPESampler, {finished} trials: {1e3 * np.median(timings):.2f} ms per suggestion")


if __name__ == "__main__":
    main()
