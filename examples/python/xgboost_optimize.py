#!/usr/bin/python3
"""XGBoost on Friedman #1, tuned with optimize(n_jobs=2): two trials at a time on this
machine, each thread with its own client id, the scheduler's TPE choosing the points.

    DHPT_SCHEDULER=localhost:50051 python3 examples/python/xgboost_optimize.py --trials 40
"""
import argparse

import xgboost as xgb
from sklearn.datasets import make_friedman1
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

import dhpt

X, y = make_friedman1(n_samples=2000, n_features=10, noise=1.0, random_state=0)
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=0)


def objective(trial):
    model = xgb.XGBRegressor(
        max_depth=trial.suggest_int("max_depth", 2, 8),
        learning_rate=trial.suggest_float("eta", 0.01, 0.3, log=True),
        subsample=trial.suggest_float("subsample", 0.5, 1.0),
        n_estimators=trial.suggest_int("n_estimators", 20, 200),
        n_jobs=1)  # One thread per trial: optimize runs two trials at once.
    model.fit(X_train, y_train)
    return r2_score(y_valid, model.predict(X_valid))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--study", default="xgboost-friedman")
    args = parser.parse_args()
    study = dhpt.create_study(
        args.study, load_if_exists=True, objective="r2", direction="maximize",
        algorithm="TPE", seed=1, max_trials=args.trials,
        space={"max_depth": dhpt.int_range(2, 8),
               "eta": dhpt.float_range(0.01, 0.3, log=True),
               "subsample": dhpt.float_range(0.5, 1.0),
               "n_estimators": dhpt.int_range(20, 200)})
    study.optimize(objective, n_jobs=2)
    best = study.best_trial
    print(f"{study.refresh().state}: best r2 {best.value:.4f} (trial {best.number}) "
          f"with {best.params}")
    print(study.trials_dataframe()[["number", "value", "params_max_depth", "params_eta"]]
          .sort_values("value", ascending=False).head(5).to_string(index=False))


if __name__ == "__main__":
    main()
