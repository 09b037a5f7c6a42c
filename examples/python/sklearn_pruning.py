#!/usr/bin/python3
"""An Optuna-style study with pruning: scikit-learn's SGDRegressor trained epoch by epoch on
Friedman #1, each epoch's validation r2 reported, and unpromising trials pruned by the study's
median rule (the scheduler's, as Optuna's MedianPruner).

    DHPT_SCHEDULER=localhost:50051 python3 examples/python/sklearn_pruning.py --trials 30
"""
import argparse

from sklearn.datasets import make_friedman1
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import dhpt

X, y = make_friedman1(n_samples=2000, n_features=10, noise=1.0, random_state=0)
X = StandardScaler().fit_transform(X)
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=0)
EPOCHS = 20


def objective(trial):
    # The same lines as with Optuna: each returns the value the scheduler chose.
    alpha = trial.suggest_float("alpha", 1e-6, 1e-1, log=True)
    eta0 = trial.suggest_float("eta0", 1e-4, 1e-1, log=True)
    penalty = trial.suggest_categorical("penalty", ["l2", "l1", "elasticnet"])
    model = SGDRegressor(alpha=alpha, eta0=eta0, penalty=penalty, learning_rate="constant",
                         random_state=trial.number)
    for epoch in range(EPOCHS):
        model.partial_fit(X_train, y_train)
        r2 = model.score(X_valid, y_valid)
        trial.report(r2, epoch)
        if trial.should_prune():
            raise dhpt.TrialPruned()
    return r2


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--study", default="sklearn-sgd")
    args = parser.parse_args()
    study = dhpt.create_study(
        args.study, load_if_exists=True, objective="r2", direction="maximize", algorithm="TPE",
        space={"alpha": dhpt.float_range(1e-6, 1e-1, log=True),
               "eta0": dhpt.float_range(1e-4, 1e-1, log=True),
               "penalty": dhpt.categorical(["l2", "l1", "elasticnet"])},
        early_stopping={"median": {"n_startup_trials": 3, "n_warmup_steps": 2}},
        max_trials=args.trials)
    study.optimize(objective)
    study.refresh()
    print(f"{study.name}: {study.state}, {study.counts['completed']} completed, "
          f"{study.counts['pruned']} pruned")
    best = study.best_trial
    print(f"best r2 {best.value:.4f} with {best.params}")


if __name__ == "__main__":
    main()
