#!/usr/bin/python3
"""How much of the model-choice benchmark's r2 is the configuration, and how much the draw?

    /usr/bin/python3 bench/model_choice_noise.py --data=/tmp/dhpt-mc-split

Trains, with bench/optuna_model_choice_peer.py's trainer (DHPT's r2 to 1e-8), the best forest
and the best XGBoost point of 2,000 random trials of bench/model_choice/diabetes.yaml (seed 0
of model_choice_quality_bench's RANDOM), then 20 neighbours of each (a Gaussian step of the
given size on subsample and colsample_bynode for the forest, a relative step on eta and lambda
for XGBoost), the forest again with seeds 1-5 and with more trees. Prints each set's median,
standard deviation and range of r2.
"""
import argparse
import random
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from optuna_model_choice_peer import Trainer  # noqa: E402

FOREST = {"num_parallel_tree": 18, "max_depth": 6, "colsample_bynode": 0.62094095965013729,
          "subsample": 0.25416308423021}
BOOSTED = {"num_boost_round": 95, "max_depth": 1, "eta": 0.42042183728537003,
           "min_child_weight": 0.85405923967593178, "lambda": 13.977710364961087}


def summary(label, r2):
    print(f"{label}: median {statistics.median(r2):.4f}, sd {statistics.stdev(r2):.4f}, "
          f"range [{min(r2):.4f}, {max(r2):.4f}]", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", default="bench/model_choice/diabetes.yaml")
    parser.add_argument("--data", required=True, help="model_choice_quality_bench's --export_dir")
    args = parser.parse_args()
    with open(args.study) as f:
        trainer = Trainer(yaml.safe_load(f), args.data, 1)
    r2 = lambda kind, params: 1 - trainer.loss(kind, dict(params))  # noqa: E731
    rng = random.Random(0)
    print(f"forest {FOREST}: r2 {r2('RANDOM_FOREST', FOREST):.4f}")
    for step in (0.001, 0.01):
        near = []
        for _ in range(20):
            p = dict(FOREST)
            p["subsample"] = min(1, max(0.2, p["subsample"] + rng.gauss(0, step)))
            p["colsample_bynode"] = min(1, max(0.1, p["colsample_bynode"] + rng.gauss(0, step)))
            near.append(r2("RANDOM_FOREST", p))
        summary(f"  20 neighbours, step {step}", near)
    summary("  seeds 1-5", [r2("RANDOM_FOREST", dict(FOREST, seed=s)) for s in range(1, 6)])
    for trees in (50, 200):
        print(f"  {trees} trees: r2 {r2('RANDOM_FOREST', dict(FOREST, num_parallel_tree=trees)):.4f}")
    print(f"XGBoost {BOOSTED}: r2 {r2('XGBOOST', BOOSTED):.4f}")
    for step in (0.01, 0.05):
        near = []
        for _ in range(20):
            p = dict(BOOSTED)
            p["eta"] *= 1 + rng.gauss(0, step)
            p["lambda"] *= 1 + rng.gauss(0, step)
            near.append(r2("XGBOOST", p))
        summary(f"  20 neighbours, relative step {step}", near)


if __name__ == "__main__":
    main()
