#!/usr/bin/python3
"""Optuna 3.1's pruners on the study bench/pruning_bench.cc runs: the same file (space, fixed
parameters, 60 trials, 1,000 rounds or 50 epochs), the same rows (the CSVs pruning_bench
--export_dir wrote), TPE with its defaults, on the same threads. XGBoost studies train with
XGBoost 1.7 from Debian and report validation r2 every 10 rounds; Random Forest studies grow
DHPT's chunked forest and report r2 every 10 trees; AutoEncoder studies train the
network of services/worker/autoencoder_trainer.cc in Debian's python3-torch (the same layers,
initialisation, AdamW and standardisation) and report validation r2 after every epoch. Appends
one JSON line per study to --out, in pruning_bench's format. --equal_compute runs each study
on until its trials have trained as many steps as max_trials full-length trials (the unpruned
study's compute; at most --equal_compute_max_trials trials), as pruning_bench --equal_compute.

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
import yaml

from optuna_peer_common import load, suggest

PROGRESS_EVERY = 10  # As DHPT's XGBoost trainer (kProgressEvery).
DIVERGED_LOSS = 1e4  # As DHPT's AutoEncoder trainer (kDivergedLoss): such a run fails.


def xgboost_objective(spec, data, threads, records):
    import xgboost as xgb

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

    (x_train, y_train), (x_val, y_val) = data
    variance = float(np.mean((y_val - y_val.mean()) ** 2))
    fixed = dict(spec["model"].get("fixed", {}))
    rounds = int(fixed.pop("num_boost_round", 100))

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
        value = reporter.last_value
        if reporter.pruned_step is None:
            predicted = booster.predict(validation)
            value = float(1 - np.sum((y_val - predicted) ** 2) / np.sum((y_val - y_val.mean()) ** 2))
        return finish(trial, records, cpu, wall, reporter.pruned_step, value)

    return objective


def forest_objective(spec, data, threads, records):
    """DHPT's Random Forest (services/worker/xgboost_trainer.cc, TrainForest): XGBoost's
    random-forest mode grown in chunks of 10 trees, each chunk one booster of one round with its
    own seed, predictions averaged by tree count; validation r2 reported after every chunk."""
    import xgboost as xgb

    (x_train, y_train), (x_val, y_val) = data
    sst = float(np.sum((y_val - y_val.mean()) ** 2))
    fixed = dict(spec["model"].get("fixed", {}))
    trees = int(fixed.pop("n_estimators", fixed.pop("num_parallel_tree", 100)))
    user_seed = int(fixed.pop("seed", 0))

    def objective(trial):
        params = {"learning_rate": 1, "subsample": 0.8, "colsample_bynode": 0.8}
        params.update(fixed, nthread=threads, verbosity=0)
        for parameter in spec["parameters"]:
            params[parameter["name"]] = suggest(trial, parameter)
        cpu, wall = time.process_time(), time.perf_counter()
        train = xgb.DMatrix(x_train, label=y_train, nthread=threads)
        validation = xgb.DMatrix(x_val, label=y_val, nthread=threads)
        total = np.zeros(len(y_val))
        grown, chunk, value, pruned_step = 0, 0, float("nan"), None
        while grown < trees:
            size = min(PROGRESS_EVERY, trees - grown)
            chunk_params = dict(params, num_parallel_tree=size,
                                seed=(user_seed * 1000003 + chunk) % 2147483647)
            booster = xgb.train(chunk_params, train, 1)
            total += size * booster.predict(validation)
            grown, chunk = grown + size, chunk + 1
            value = float(1 - np.sum((y_val - total / grown) ** 2) / sst)
            trial.report(value, grown)
            if grown < trees and trial.should_prune():
                pruned_step = grown
                break
        return finish(trial, records, cpu, wall, pruned_step, value)

    return objective


def autoencoder_objective(spec, data, threads, records):
    import torch

    torch.set_num_threads(threads)
    activations = {"relu": torch.nn.ReLU, "leaky_relu": torch.nn.LeakyReLU, "elu": torch.nn.ELU,
                   "gelu": torch.nn.GELU, "silu": torch.nn.SiLU, "tanh": torch.nn.Tanh}
    defaults = {"hidden_layers": 2, "hidden_width": 64, "width_decay": 0.5, "bottleneck": 8,
                "activation": "relu", "learning_rate": 1e-3, "weight_decay": 0.0, "epochs": 20,
                "batch_size": 64, "seed": 0}
    # Features only: the exported CSV's last column is the generator's target, unused here.
    train = torch.from_numpy(data[0][0])
    validation = torch.from_numpy(data[1][0])

    def network(inputs, c):
        widths, width = [], float(c["hidden_width"])
        for _ in range(int(c["hidden_layers"])):
            widths.append(max(int(c["bottleneck"]), int(round(width))))
            width *= float(c["width_decay"])
        layers, size = [], inputs
        for w in widths:
            layers += [torch.nn.Linear(size, w), activations[c["activation"]]()]
            size = w
        layers.append(torch.nn.Linear(size, int(c["bottleneck"])))
        size = int(c["bottleneck"])
        for w in reversed(widths):
            layers += [torch.nn.Linear(size, w), activations[c["activation"]]()]
            size = w
        layers.append(torch.nn.Linear(size, inputs))
        return torch.nn.Sequential(*layers)

    def objective(trial):
        c = dict(defaults, **spec["model"].get("fixed", {}))
        for parameter in spec["parameters"]:
            c[parameter["name"]] = suggest(trial, parameter)
        cpu, wall = time.process_time(), time.perf_counter()
        torch.manual_seed(int(c["seed"]))
        mean, scale = train.mean(0), train.std(0, unbiased=False)
        scale = torch.where(scale > 1e-6, scale, torch.ones_like(scale))
        train_z, validation_z = (train - mean) / scale, (validation - mean) / scale
        sst = (validation - validation.mean(0)).pow(2).sum().item()
        model = network(train.shape[1], c)
        optimizer = torch.optim.AdamW(model.parameters(), lr=float(c["learning_rate"]),
                                      weight_decay=float(c["weight_decay"]))
        rows, batch = train.shape[0], min(int(c["batch_size"]), train.shape[0])
        value, pruned_step = float("nan"), None
        for epoch in range(1, int(c["epochs"]) + 1):
            model.train()
            order = torch.randperm(rows)
            for start in range(0, rows, batch):
                inputs = train_z.index_select(0, order[start:start + batch])
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(inputs), inputs).backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                reconstruction_z = model(validation_z)
                loss = torch.nn.functional.mse_loss(reconstruction_z, validation_z).item()
                reconstruction = reconstruction_z * scale + mean
                value = 1 - (validation - reconstruction).pow(2).sum().item() / sst
            if not math.isfinite(loss) or loss > DIVERGED_LOSS:
                records.append({"state": "FAILED", "value": -1e9, "pruned_step": 0,
                                "cpu_seconds": time.process_time() - cpu,
                                "wall_seconds": time.perf_counter() - wall})
                return float("nan")  # Optuna records a NaN objective as a failed trial.
            trial.report(value, epoch)
            if trial.should_prune():
                pruned_step = epoch
                break
        return finish(trial, records, cpu, wall, pruned_step, value)

    return objective


def finish(trial, records, cpu, wall, pruned_step, value):
    record = {"cpu_seconds": time.process_time() - cpu, "wall_seconds": time.perf_counter() - wall}
    if pruned_step is not None:
        records.append(dict(record, state="PRUNED", value=value, pruned_step=pruned_step))
        raise optuna.TrialPruned()
    records.append(dict(record, state="COMPLETED", value=value, pruned_step=0))
    return value


OBJECTIVES = {"XGBOOST": xgboost_objective, "RANDOM_FOREST": forest_objective,
              "AUTOENCODER": autoencoder_objective}


def budget(spec):
    """The longest a trial trains, in steps: as DHPT's TrainerBudgetOf for fixed budgets."""
    fixed = spec["model"].get("fixed", {})
    kind = spec["model"]["kind"]
    if kind == "XGBOOST":
        return int(fixed.get("num_boost_round", fixed.get("n_estimators", 100))), PROGRESS_EVERY
    if kind == "RANDOM_FOREST":
        return int(fixed.get("n_estimators", fixed.get("num_parallel_tree", 100))), PROGRESS_EVERY
    return int(fixed.get("epochs", 20)), 1


def make_pruner(name, spec):
    if name == "median":
        return optuna.pruners.MedianPruner()
    if name == "sha":
        return optuna.pruners.SuccessiveHalvingPruner()
    if name == "hyperband":
        # Reduction factor 3 (Optuna's default) and the same first rung as DHPT's derived
        # default (max / 27, rounded up to a report interval), so that the two compare alike.
        max_resource, every = budget(spec)
        min_resource = max(every, math.ceil(math.ceil(max_resource / 27) / every) * every)
        return optuna.pruners.HyperbandPruner(min_resource=min_resource,
                                              max_resource=max_resource, reduction_factor=3)
    raise ValueError(f"unknown pruner {name}")


def run(spec, pruner_name, seed, data, threads, equal_compute_max_trials=0):
    pruner = make_pruner(pruner_name, spec)
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed),
                                pruner=pruner)
    records = []
    objective = OBJECTIVES[spec["model"]["kind"]](spec, data, threads, records)
    start = time.perf_counter()
    n_trials, callbacks, extra = spec["max_trials"], [], {}
    if equal_compute_max_trials:
        # The unpruned study's steps: every one of its max_trials trials trains them all.
        max_steps = budget(spec)[0]
        budget_steps = spec["max_trials"] * max_steps
        n_trials = equal_compute_max_trials
        extra = {"mode": "equal_compute", "budget_steps": budget_steps}

        def stop_when_spent(study, _):
            if sum(t["pruned_step"] or max_steps for t in records) >= budget_steps:
                study.stop()

        callbacks = [stop_when_spent]
    study.optimize(objective, n_trials=n_trials, callbacks=callbacks)
    return {"system": "optuna", "study": spec["name"], "rule": pruner_name, "seed": seed,
            "wall_seconds": time.perf_counter() - start, **extra, "trials": records}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="bench/pruning/xgboost.yaml")
    parser.add_argument("--data", required=True, help="pruning_bench --export_dir")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first_seed", type=int, default=1,
                        help="start at this seed (seeds first_seed..N): completes a stopped cell")
    parser.add_argument("--pruners", default="median,sha,hyperband")
    parser.add_argument("--name", default="",
                        help="the study's name, as pruning_bench --csv makes it (NAME-STEM)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="")
    parser.add_argument("--equal_compute", action="store_true",
                        help="run each study until it has trained the unpruned study's steps")
    parser.add_argument("--equal_compute_max_trials", type=int, default=240)
    args = parser.parse_args()
    with open(args.study) as f:
        spec = yaml.safe_load(f)
    if args.name:
        spec["name"] = args.name
    if spec["model"]["kind"] not in OBJECTIVES:
        sys.exit(f"the peer runs {' and '.join(OBJECTIVES)} studies only")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data = (load(f"{args.data}/train.csv"), load(f"{args.data}/validation.csv"))
    out = open(args.out, "a") if args.out else sys.stdout
    for seed in range(args.first_seed, args.seeds + 1):
        for pruner in args.pruners.split(","):
            result = run(spec, pruner, seed, data, args.threads,
                         args.equal_compute_max_trials if args.equal_compute else 0)
            out.write(json.dumps(result) + "\n")
            out.flush()
            pruned = sum(t["state"] == "PRUNED" for t in result["trials"])
            print(f"optuna {spec['name']} seed {seed} {pruner}: {result['wall_seconds']:.0f} s, "
                  f"{pruned} pruned", file=sys.stderr)


if __name__ == "__main__":
    main()
