#!/usr/bin/python3
"""How early a study's final ranking shows: the measurement behind docs/early-stopping.md's
"why the rules miss the best". Trains N random configurations of a pruning-matrix study
(bench/pruning/*-small.yaml) on the rows pruning_bench --export_dir wrote, recording the
validation r2 every 10 rounds or trees as DHPT's trainers report it, and prints, for each step
a rule could judge at:

  spearman   the rank correlation between the configurations' r2 at that step and at the end
  best kept  whether the configuration that ends best is in the top 1/3 there (what ASHA and
             Hyperband with reduction factor 3 keep) and above the median there (what the
             median rule keeps); over the top 3 finishers: how many are kept

  /usr/bin/python3 bench/pruning_curves.py --study=bench/pruning/xgboost-small.yaml \\
      --data=/tmp/dhpt-pruning-data/split-xgboost-small-diabetes

--save=FILE also writes the curves (JSON) for bench/pruning_replay.py, which replays rules on them.
"""
import argparse
import json
import math
import random

import numpy as np
import yaml

EVERY = 10  # DHPT's trainers report every 10 rounds or trees.


def load(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return data[:, :-1], data[:, -1]


def sample(parameters, rng):
    point = {}
    for p in parameters:
        r = p.get("int_range") or p.get("double_range")
        low, high = r["min"], r["max"]
        if r.get("log"):
            value = math.exp(rng.uniform(math.log(low), math.log(high)))
        else:
            value = rng.uniform(low, high)
        point[p["name"]] = int(round(value)) if "int_range" in p else value
    return point


def curve(spec, point, data):
    import xgboost as xgb

    (x_train, y_train), (x_val, y_val) = data
    sst = float(np.sum((y_val - y_val.mean()) ** 2))
    fixed = dict(spec["model"].get("fixed", {}))
    train = xgb.DMatrix(x_train, label=y_train, nthread=1)
    values = []
    if spec["model"]["kind"] == "XGBOOST":
        rounds = int(fixed.pop("num_boost_round", 100))
        params = dict(fixed, nthread=1, verbosity=0, **point)
        booster = None
        validation = xgb.DMatrix(x_val, label=y_val, nthread=1)
        for step in range(EVERY, rounds + 1, EVERY):
            booster = xgb.train(params, train, EVERY, xgb_model=booster)
            predicted = booster.predict(validation)
            values.append((step, 1 - float(np.sum((y_val - predicted) ** 2)) / sst))
        return values
    # Random Forest as DHPT grows it (bench/optuna_pruning_peer.py forest_objective).
    trees = int(fixed.pop("n_estimators", 100))
    params = {"learning_rate": 1, "subsample": 0.8, "colsample_bynode": 0.8}
    params.update(fixed, nthread=1, verbosity=0, **point)
    validation = xgb.DMatrix(x_val, label=y_val, nthread=1)
    total = np.zeros(len(y_val))
    for chunk, step in enumerate(range(EVERY, trees + 1, EVERY)):
        booster = xgb.train(dict(params, num_parallel_tree=EVERY, seed=chunk), train, 1)
        total += EVERY * booster.predict(validation)
        values.append((step, 1 - float(np.sum((y_val - total / step) ** 2)) / sst))
    return values


def ranks(values):
    order = np.argsort(values)
    r = np.empty(len(values))
    r[order] = np.arange(len(values))
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True)
    parser.add_argument("--data", required=True, help="pruning_bench --export_dir")
    parser.add_argument("--configurations", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", default="20,40,60,100,180")
    parser.add_argument("--save", help="also write the curves as JSON, for bench/pruning_replay.py")
    args = parser.parse_args()
    with open(args.study) as f:
        spec = yaml.safe_load(f)
    data = (load(f"{args.data}/train.csv"), load(f"{args.data}/validation.csv"))
    rng = random.Random(args.seed)
    curves = [dict(curve(spec, sample(spec["parameters"], rng), data))
              for _ in range(args.configurations)]
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"study": args.study, "data": args.data, "seed": args.seed,
                       "curves": [[[s, v] for s, v in sorted(c.items())] for c in curves]}, f)
    last = max(curves[0])
    final = np.array([c[last] for c in curves])
    top = list(np.argsort(-final)[:3])
    print(f"{args.data}: {args.configurations} random configurations, final r2 best "
          f"{final.max():.4f}, median {np.median(final):.4f}")
    print("| step | spearman | best in top 1/3 | best above median | top 3 in top 1/3 |")
    print("|--:|--:|:-:|:-:|--:|")
    for step in (int(s) for s in args.steps.split(",")):
        at = np.array([c[step] for c in curves])
        rho = float(np.corrcoef(ranks(at), ranks(final))[0, 1])
        cut = np.sort(at)[::-1][len(at) // 3 - 1]
        median = float(np.median(at))
        kept = sum(at[i] >= cut for i in top)
        print(f"| {step} | {rho:.2f} | {'yes' if at[top[0]] >= cut else 'no'} | "
              f"{'yes' if at[top[0]] >= median else 'no'} | {kept}/3 |")


if __name__ == "__main__":
    main()
