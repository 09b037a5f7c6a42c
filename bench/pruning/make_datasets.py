#!/usr/bin/python3
"""The CSV data sets of the small pruning matrix, each with its target in column y, from what
Debian's python3-sklearn ships or generates
(docs/early-stopping.md#benchmark-four-data-sets-xgboost-and-random-forest):

  friedman3  synthetic: sklearn's make_friedman3 (arctan of a ratio; noise 0.1), 400 rows
  diabetes   real: the diabetes progression data (442 patients, 10 measurements)
  cancer     real: the breast cancer cell nuclei (569 rows), regressing "mean smoothness"
             on the other measurements (its "worst" and "error" variants left out)

Friedman #1 comes from DHPT's own generator (the study file's dataset). Deterministic.

  /usr/bin/python3 bench/pruning/make_datasets.py /tmp/dhpt-pruning-data
"""
import sys

import numpy as np
from sklearn import datasets


def write(path, x, y, names):
    with open(path, "w") as f:
        f.write(",".join(names + ["y"]) + "\n")
        for row, target in zip(x, y):
            f.write(",".join(f"{v:.9g}" for v in row) + f",{target:.9g}\n")


def main(out):
    x, y = datasets.make_friedman3(n_samples=400, noise=0.1, random_state=0)
    write(f"{out}/friedman3.csv", x, y, [f"x{i + 1}" for i in range(x.shape[1])])
    diabetes = datasets.load_diabetes()
    write(f"{out}/diabetes.csv", diabetes.data, diabetes.target, list(diabetes.feature_names))
    cancer = datasets.load_breast_cancer()
    names = list(cancer.feature_names)
    keep = [i for i, n in enumerate(names) if "smoothness" not in n]
    target = names.index("mean smoothness")
    write(f"{out}/cancer.csv", cancer.data[:, keep], cancer.data[:, target],
          [names[i].replace(" ", "_") for i in keep])


if __name__ == "__main__":
    import os
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/dhpt-pruning-data"
    os.makedirs(out, exist_ok=True)
    main(out)
