#!/usr/bin/python3
"""A COMMAND trial in Python: scikit-learn's gradient boosting on Friedman #1.

DHPT runs it with the trial's parameters as --name=value arguments (they are also in the JSON
file named by $DHPT_PARAMS_FILE). It prints a JSON line with the validation r2 every 10 trees,
which early stopping judges, and `r2=...` and `mse=...` at the end: the trial's result.
Register it on a worker with:
  dhpt-cpu-worker --command='gbr=/usr/bin/python3 /path/to/examples/commands/sklearn_gbr.py'
"""
import json
import os
import sys

from sklearn.datasets import make_friedman1
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import train_test_split


def parameters():
    """The trial's parameters: from the arguments, or from the JSON file."""
    params = {}
    for arg in sys.argv[1:]:
        if arg.startswith("--") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            params[name] = value
    if not params and "DHPT_PARAMS_FILE" in os.environ:
        with open(os.environ["DHPT_PARAMS_FILE"]) as f:
            params = {k: str(v) for k, v in json.load(f).items()}
    return params


def main():
    p = parameters()
    threads = os.environ.get("DHPT_THREADS", "1")
    print(f"training with {p} on {threads} threads", file=sys.stderr)
    x, y = make_friedman1(n_samples=int(p.get("samples", 2000)), noise=1.0, random_state=0)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0)
    model = GradientBoostingRegressor(
        n_estimators=int(float(p.get("n_estimators", 100))),
        learning_rate=float(p.get("learning_rate", 0.1)),
        max_depth=int(float(p.get("max_depth", 3))),
        subsample=float(p.get("subsample", 1.0)),
        random_state=0,
    ).fit(x_train, y_train)
    for trees, predicted in enumerate(model.staged_predict(x_val), start=1):
        if trees % 10 == 0:
            print(json.dumps({"step": trees, "r2": r2_score(y_val, predicted)}), flush=True)
    predicted = model.predict(x_val)
    print(f"r2={r2_score(y_val, predicted):.6f}")
    print(f"mse={mean_squared_error(y_val, predicted):.6f}")


if __name__ == "__main__":
    main()
