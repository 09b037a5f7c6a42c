#!/usr/bin/python3
"""Peer for model_choice_quality_bench: the same model-choice study file
(bench/model_choice/diabetes.yaml), written define-by-run (model_kind first, then each
parameter whose condition holds), through Optuna 3.1's TPESampler (independent, as by default,
and with multivariate=True, group=True) and RandomSampler, with the same seeds and budgets, on
the rows model_choice_quality_bench --export_dir wrote. XGBoost trials train with XGBoost 1.7
from Debian as DHPT's trainer does (services/worker/xgboost_trainer.cc); Random Forest trials
grow DHPT's chunked forest (chunks of 10 trees, each one booster of one round with its own
seed, learning rate 1, subsample and colsample_bynode 0.8 and lambda 1e-5 unless tuned,
predictions averaged by tree count), as bench/optuna_pruning_peer.py does.

    /usr/bin/python3 bench/optuna_model_choice_peer.py --data=/tmp/dhpt-mc-split \\
        [--study=bench/model_choice/diabetes.yaml] [--seeds 10] [--budgets 50,100] \\
        [--regrets-out FILE]   # every seed's best 1 - r2 per budget, for quality_significance.py
        [--curves-out FILE]    # every trial's model kind and loss, for model_choice_curves.py
        [--first-seed 0]       # seeds first..first+seeds-1, to split a sampler over processes
        [--reseeds 5]          # each run's best point trained again with seeds K..K+N-1, as the bench
        [--objective-seeds K]  # each trial's loss: the mean over the trainer's seeds 0..K-1,
                               # as the bench's --objective_seeds (default 1: seed 0 only)
"""
import argparse
import logging
import statistics
import warnings

import numpy as np
import optuna
import xgboost as xgb
import yaml

from optuna_peer_common import SAMPLERS, load, suggest

FOREST_CHUNK_TREES = 10  # As DHPT's kForestChunkTrees.
DEFAULT_ROUNDS = 100  # As DHPT's kDefaultBoostRounds.


class Trainer:
    def __init__(self, spec, data_dir, threads):
        x_train, y_train = load(f"{data_dir}/train.csv")
        x_val, self.y_val = load(f"{data_dir}/validation.csv")
        self.train = xgb.DMatrix(x_train, label=y_train, nthread=threads)
        self.validation = xgb.DMatrix(x_val, label=self.y_val, nthread=threads)
        y = self.y_val.astype(np.float64)
        self.sst = float(np.sum((y - y.mean()) ** 2))
        self.fixed = dict(spec["model"].get("fixed", {}))
        self.threads = threads
        self.cache = {}

    def r2(self, predicted):
        return float(1 - np.sum((self.y_val.astype(np.float64) - predicted) ** 2) / self.sst)

    def loss(self, kind, tuned):
        """1 - validation r2, as model_choice_quality_bench's loss."""
        key = (kind, tuple(sorted(tuned.items())))
        if key not in self.cache:
            params = dict(self.fixed, **tuned)
            self.cache[key] = 1 - (self.forest(params) if kind == "RANDOM_FOREST"
                                   else self.boosted(params))
        return self.cache[key]

    def fit(self, params, rounds):
        """xgb.train without its closing bst.copy(), a serialisation round trip that frees
        training memory and changes no tree (the same r2 to the last digit): with a booster per
        10-tree chunk it was 40% of the peer's time."""
        booster = xgb.Booster(params, [self.train])
        for i in range(rounds):
            booster.update(self.train, i)
        return booster

    def boosted(self, params):
        rounds = int(params.pop("num_boost_round", params.pop("n_estimators", DEFAULT_ROUNDS)))
        params.update(nthread=self.threads, verbosity=0)
        booster = self.fit(params, rounds)
        return self.r2(booster.predict(self.validation).astype(np.float64))

    def forest(self, params):
        trees = int(params.pop("num_parallel_tree", params.pop("n_estimators", 100)))
        user_seed = int(params.pop("seed", 0))
        base = {"learning_rate": 1, "subsample": 0.8, "colsample_bynode": 0.8, "lambda": 1e-5}
        base.update(params, nthread=self.threads, verbosity=0)
        total = np.zeros(len(self.y_val))
        grown, chunk = 0, 0
        while grown < trees:
            size = min(FOREST_CHUNK_TREES, trees - grown)
            chunk_params = dict(base, num_parallel_tree=size,
                                seed=(user_seed * 1000003 + chunk) % 2147483647)
            booster = self.fit(chunk_params, 1)
            total += size * booster.predict(self.validation).astype(np.float64)
            grown, chunk = grown + size, chunk + 1
        return self.r2(total / grown)


def mean_loss(trainer, kind, tuned, seeds):
    """The mean of 1 - r2 over the trainer's `seeds`, as the bench's Evaluator::Objective;
    seed 0 is the trainer's default, left unset so that its cache key is the old one."""
    return statistics.mean(trainer.loss(kind, dict(tuned, seed=s) if s else dict(tuned))
                           for s in seeds)


def make_objective(spec, trainer, objective_seeds=1):
    parameters = spec["parameters"]

    def objective(trial):
        values = {}
        for parameter in parameters:
            condition = parameter.get("condition")
            if condition and values.get(condition["parent"]) not in condition["values"]:
                continue  # Inactive: define-by-run never asks for it.
            values[parameter["name"]] = suggest(trial, parameter)
        kind = values.pop("model_kind")
        trial.set_user_attr("kind", kind)
        return mean_loss(trainer, kind, values, range(objective_seeds))

    return objective


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", default="bench/model_choice/diabetes.yaml")
    parser.add_argument("--data", required=True, help="model_choice_quality_bench's --export_dir")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first..first+seeds-1, to split a sampler over processes")
    parser.add_argument("--budgets", default="50,100")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--samplers", default=",".join(SAMPLERS))
    parser.add_argument("--regrets-out")
    parser.add_argument("--curves-out")
    parser.add_argument("--reseeds", type=int, default=5,
                        help="train each run's best point again with seeds K..K+N-1 (0 = off)")
    parser.add_argument("--objective-seeds", type=int, default=1,
                        help="each trial's loss is the mean over the trainer's seeds 0..K-1")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore")  # multivariate/group are experimental in Optuna 3.1.
    logging.getLogger("optuna").setLevel(logging.WARNING)
    with open(args.study) as f:
        spec = yaml.safe_load(f)
    trainer = Trainer(spec, args.data, args.threads)
    if args.objective_seeds < 1:
        parser.error("--objective-seeds must be at least 1")
    objective = make_objective(spec, trainer, args.objective_seeds)
    reseeds = range(args.objective_seeds, args.objective_seeds + args.reseeds)  # No trial saw them.
    budgets = [int(b) for b in args.budgets.split(",")]
    out = open(args.regrets_out, "w") if args.regrets_out else None
    curves = open(args.curves_out, "w") if args.curves_out else None
    print("| sampler |" + "".join(f" median best r2 @{b} |" for b in budgets) +
          "".join(f" its r2 over seeds {reseeds[0]}-{reseeds[-1]} @{b} |"
                  for b in budgets if args.reseeds))
    print("|---|" + "---|" * (len(budgets) * (2 if args.reseeds else 1)))
    for label in args.samplers.split(","):
        at = [[] for _ in budgets]
        reseeded = [[] for _ in budgets]
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            study = optuna.create_study(sampler=SAMPLERS[label](seed), direction="minimize")
            history = []
            for _ in range(max(budgets)):
                trial = study.ask()
                value = objective(trial)
                study.tell(trial, value)
                history.append(min(value, history[-1]) if history else value)
            for k, b in enumerate(budgets):
                at[k].append(history[b - 1])
                if args.reseeds:
                    chosen = min(study.trials[:b], key=lambda t: t.value)
                    values = dict(chosen.params)
                    kind = values.pop("model_kind")
                    reseeded[k].append(mean_loss(trainer, kind, values, reseeds))
            if curves:
                trials = study.trials[:max(budgets)]
                curves.write(f"{label}\t{seed}\t" + ",".join(
                    f"{t.user_attrs['kind']}:{t.value!r}" for t in trials) + "\n")
                curves.flush()
        print(f"| {label} |" + "".join(f" {1 - statistics.median(v):.4f} |"
                                      for v in at + (reseeded if args.reseeds else [])),
              flush=True)
        if out:
            for k, b in enumerate(budgets):
                out.write(f"model_choice@{b}\t{label}\t{','.join(repr(v) for v in at[k])}\n")
                if args.reseeds:
                    out.write(f"model_choice_reseeded@{b}\t{label}\t"
                              f"{','.join(repr(v) for v in reseeded[k])}\n")
            out.flush()


if __name__ == "__main__":
    main()
