#!/usr/bin/python3
"""Optuna 3.1's pruners on the study bench/pruning_bench.cc runs: the same file (space, fixed
parameters, 60 trials, 1,000 rounds), the same rows (the CSVs pruning_bench --export_dir wrote),
XGBoost 1.7 from Debian on the same threads, validation r2 reported every 10 rounds, TPE with its
defaults. Appends one JSON line per study to --out, in pruning_bench's format.

  /usr/bin/python3 bench/optuna_pruning_peer.py --study=bench/pruning/xgboost.yaml \
      --data=/tmp/dhpt-pruning --out=bench/results/pruning.jsonl
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import optuna
import xgboost as xgb
import yaml

PROGRESS_EVERY = 10  # As DHPT's XGBoost trainer (kProgressEvery).


def load(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return data[:, :-1], data[:, -1]


def suggest(trial, parameter):
    name = parameter["name"]
    if "int_range" in parameter:
        r = parameter["int_range"]
        return trial.suggest_int(name, r["min"], r["max"], log=r.get("log", False))
    if "double_range" in parameter:
        r = parameter["double_range"]
        return trial.suggest_float(name, r["min"], r["max"], log=r.get("log", False))
    if "categorical" in parameter:
        return trial.suggest_categorical(name, parameter["categorical"]["values"])
    if "discrete" in parameter:
        return trial.suggest_categorical(name, parameter["discrete"]["values"])
    raise ValueError(f"parameter {name}: unsupported kind")


class Reporter(xgb.callback.TrainingCallback):
    """Reports validation r2 every PROGRESS_EVERY rounds and stops when Optuna says prune."""

    def __init__(self, trial, rounds, variance):
        self.trial, self.rounds, self.variance = trial, rounds, variance
        self.pruned_step = None
        self.last_value = None

    def after_iteration(self, model, epoch, evals_log):
        step = epoch + 1
        if step % PROGRESS_EVERY and step != self.rounds:
            return False
        rmse = evals_log["validation"]["rmse"][-1]
        self.last_value = 1 - rmse * rmse / self.variance  # = 1 - SSE/SST, as DHPT's r2.
        self.trial.report(self.last_value, step)
        if self.trial.should_prune():
            self.pruned_step = step
            return True
        return False


def run(spec, pruner_name, seed, data, threads):
    (x_train, y_train), (x_val, y_val) = data
    variance = float(np.mean((y_val - y_val.mean()) ** 2))
    fixed = dict(spec["model"].get("fixed", {}))
    rounds = int(fixed.pop("num_boost_round", 100))
    pruner = {"median": optuna.pruners.MedianPruner(),
              "sha": optuna.pruners.SuccessiveHalvingPruner()}[pruner_name]
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed),
                                pruner=pruner)
    records = []

    def objective(trial):
        params = dict(fixed, nthread=threads, verbosity=0, eval_metric="rmse")
        for parameter in spec["parameters"]:
            params[parameter["name"]] = suggest(trial, parameter)
        cpu, wall = time.process_time(), time.perf_counter()
        train = xgb.DMatrix(x_train, label=y_train, nthread=threads)
        validation = xgb.DMatrix(x_val, label=y_val, nthread=threads)
        reporter = Reporter(trial, rounds, variance)
        booster = xgb.train(params, train, rounds, evals=[(validation, "validation")],
                            verbose_eval=False, callbacks=[reporter])
        if reporter.pruned_step is None:
            predicted = booster.predict(validation)
            value = float(1 - np.sum((y_val - predicted) ** 2) / np.sum((y_val - y_val.mean()) ** 2))
        record = {"cpu_seconds": time.process_time() - cpu, "wall_seconds": time.perf_counter() - wall}
        if reporter.pruned_step is not None:
            records.append(dict(record, state="PRUNED", value=reporter.last_value,
                                pruned_step=reporter.pruned_step))
            raise optuna.TrialPruned()
        records.append(dict(record, state="COMPLETED", value=value, pruned_step=0))
        return value

    start = time.perf_counter()
    study.optimize(objective, n_trials=spec["max_trials"])
    return {"system": "optuna", "study": spec["name"], "rule": pruner_name, "seed": seed,
            "wall_seconds": time.perf_counter() - start, "trials": records}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="bench/pruning/xgboost.yaml")
    parser.add_argument("--data", required=True, help="pruning_bench --export_dir")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--pruners", default="median,sha")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    with open(args.study) as f:
        spec = yaml.safe_load(f)
    if spec["model"]["kind"] != "XGBOOST":
        sys.exit("the peer runs XGBoost studies only")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data = (load(f"{args.data}/train.csv"), load(f"{args.data}/validation.csv"))
    out = open(args.out, "a") if args.out else sys.stdout
    for seed in range(1, args.seeds + 1):
        for pruner in args.pruners.split(","):
            result = run(spec, pruner, seed, data, args.threads)
            out.write(json.dumps(result) + "\n")
            out.flush()
            pruned = sum(t["state"] == "PRUNED" for t in result["trials"])
            print(f"optuna {spec['name']} seed {seed} {pruner}: {result['wall_seconds']:.0f} s, "
                  f"{pruned} pruned", file=sys.stderr)


if __name__ == "__main__":
    main()
