"""What the Optuna peers of DHPT's benchmarks share: the rows the C++ bench wrote with
--export_dir, a study file's parameter as Optuna's define-by-run call, and the samplers the
quality peers compare (as in Optuna 3.1). The peers run as /usr/bin/python3 bench/NAME.py, so
this folder is on their path."""

import numpy as np
import optuna


def load(path):
    """A CSV the C++ bench's --export_dir wrote (a header, features, the target last)."""
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return data[:, :-1], data[:, -1]


def suggest(trial, parameter):
    """The study file's `parameter` (its YAML as a dict) drawn by Optuna's trial."""
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


SAMPLERS = {
    "TPESampler": lambda seed: optuna.samplers.TPESampler(seed=seed),
    "TPESampler(group)": lambda seed: optuna.samplers.TPESampler(
        seed=seed, multivariate=True, group=True),
    "RandomSampler": lambda seed: optuna.samplers.RandomSampler(seed=seed),
}
