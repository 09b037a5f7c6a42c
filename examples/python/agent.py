#!/usr/bin/python3
"""One study, evaluated from many machines (a Pi, a Jetson, a laptop): create it once, then
start this agent on each machine; each takes trials until the study ends.

    python3 examples/python/agent.py --create --trials 40     # once, anywhere
    python3 examples/python/agent.py                          # on every machine

DHPT_SCHEDULER (and DHPT_TLS_CA, DHPT_AUTH_TOKEN_FILE, ...) say where the scheduler is; give
each machine a DHPT_CLIENT_ID of its own to have its unfinished trial back after a restart.
"""
import argparse
import platform

from sklearn.datasets import make_friedman1
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.model_selection import train_test_split

import dhpt

X, y = make_friedman1(n_samples=1000, n_features=10, noise=1.0, random_state=0)
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=0)


def objective(trial):
    model = GradientBoostingRegressor(
        n_estimators=trial.suggest_int("n_estimators", 10, 100),
        learning_rate=trial.suggest_float("learning_rate", 0.01, 0.5, log=True),
        max_depth=trial.suggest_int("max_depth", 1, 5), random_state=0)
    model.fit(X_train, y_train)
    return {"r2": model.score(X_valid, y_valid)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--create", action="store_true", help="create the study and exit")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--study", default="gbr-agents")
    args = parser.parse_args()
    if args.create:
        study = dhpt.create_study(
            args.study, load_if_exists=True, objective="r2", direction="maximize",
            algorithm="TPE", max_trials=args.trials,
            space={"n_estimators": dhpt.int_range(10, 100),
                   "learning_rate": dhpt.float_range(0.01, 0.5, log=True),
                   "max_depth": dhpt.int_range(1, 5)})
        print(f"created {study.name}: start agents now")
        return
    ran = dhpt.agent(args.study, objective)
    print(f"{platform.node()} ran {ran} trials of {args.study}")


if __name__ == "__main__":
    main()
