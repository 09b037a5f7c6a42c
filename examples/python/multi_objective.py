#!/usr/bin/python3
"""Two objectives at once: a random forest's validation r2 (maximize) against its size in
trees times depth, a stand-in for inference cost (minimize). best_trials is the Pareto front.

    DHPT_SCHEDULER=localhost:50051 python3 examples/python/multi_objective.py --trials 30
"""
import argparse

from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor
from sklearn.model_selection import train_test_split

import dhpt

X, y = make_friedman1(n_samples=1000, n_features=10, noise=1.0, random_state=0)
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=0)


def objective(trial):
    trees = trial.suggest_int("n_estimators", 5, 100)
    depth = trial.suggest_int("max_depth", 2, 12)
    model = RandomForestRegressor(n_estimators=trees, max_depth=depth, random_state=0, n_jobs=1)
    model.fit(X_train, y_train)
    nodes = sum(tree.tree_.node_count for tree in model.estimators_)
    # A dict: the two objectives by metric name, and another metric to keep.
    return {"r2": model.score(X_valid, y_valid), "cost": trees * depth, "nodes": nodes}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--study", default="forest-r2-vs-cost")
    args = parser.parse_args()
    study = dhpt.create_study(
        args.study, load_if_exists=True, algorithm="NSGA2", seed=3, max_trials=args.trials,
        objectives=[("r2", "maximize"), ("cost", "minimize")],
        space={"n_estimators": dhpt.int_range(5, 100), "max_depth": dhpt.int_range(2, 12)})
    study.optimize(objective)
    print(f"{study.refresh().state}: Pareto front of {len(study.best_trials)} trials")
    for trial in sorted(study.best_trials, key=lambda t: t.values[1]):
        r2, cost = trial.values
        print(f"  trial {trial.number:3d}: r2 {r2:.4f}, cost {cost:5.0f}, "
              f"{trial.metrics['nodes']:.0f} nodes, {trial.params}")


if __name__ == "__main__":
    main()
