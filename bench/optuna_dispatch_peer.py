#!/usr/bin/python3
"""Peer for dispatch_bench: the same no-op trials (Styblinski-Tang in 2-D, random search)
through Optuna 3.1's in-process loop, one process, no network, with each of its storages:
in-memory, RDB on a SQLite file, and the journal file.

    /usr/bin/python3 bench/optuna_dispatch_peer.py [--trials 10000] [--jobs 1]
        [--storages memory,sqlite,journal]
"""
import argparse
import logging
import os
import statistics
import tempfile
import time

import optuna


def objective(trial):
    x1 = trial.suggest_float("x1", -5, 5)
    x2 = trial.suggest_float("x2", -5, 5)
    return sum(v**4 - 16 * v**2 + 5 * v for v in (x1, x2)) / 2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storages", default="memory")
    args = parser.parse_args()
    optuna.logging.set_verbosity(logging.WARNING)
    for kind in args.storages.split(","):
        rates = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as directory:
                study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0),
                                            storage=make_storage(kind, directory))
                start = time.perf_counter()
                study.optimize(objective, n_trials=args.trials, n_jobs=args.jobs)
                rates.append(args.trials / (time.perf_counter() - start))
        print(f"optuna {optuna.__version__} RandomSampler, {kind} storage, n_jobs={args.jobs}: "
              f"{statistics.median(rates):.0f} trials/s (median of {args.repeats})")


def make_storage(kind, directory):
    if kind == "memory":
        return None
    if kind == "sqlite":
        return f"sqlite:///{os.path.join(directory, 'optuna.db')}"
    if kind == "journal":
        return optuna.storages.JournalStorage(
            optuna.storages.JournalFileStorage(os.path.join(directory, "journal.log")))
    raise SystemExit(f"unknown storage {kind}: memory, sqlite or journal")


if __name__ == "__main__":
    main()
