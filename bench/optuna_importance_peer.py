#!/usr/bin/python3
"""Peer for importance_bench: Optuna 3.1's FanovaImportanceEvaluator (Debian's python3-optuna)
on the same 1,000 trials, its time, and the Spearman rank correlation of its importances with
DHPT's fANOVA and PED-ANOVA. Optuna 3.1 has no PedAnovaImportanceEvaluator (it arrived in
Optuna 3.6), so PED-ANOVA is compared with Optuna's fANOVA too. Exits 1 when DHPT's fANOVA
ranks the parameters with a correlation below 0.9.

    build/bin/importance_bench --out=/tmp/importance
    /usr/bin/python3 bench/optuna_importance_peer.py /tmp/importance
"""
import csv
import logging
import sys
import time

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from scipy.stats import spearmanr

COLOURS = ["red", "green", "blue", "grey"]


def distributions():
    dists = {}
    for p in range(10):
        name = f"x{p}"
        if p == 1:
            dists[name] = FloatDistribution(1e-4, 1, log=True)
        elif p == 2:
            dists[name] = IntDistribution(0, 20)
        elif p == 3:
            dists[name] = CategoricalDistribution(COLOURS)
        elif p == 4:
            dists[name] = FloatDistribution(0, 1, step=0.1)
        else:
            dists[name] = FloatDistribution(0, 1)
    return dists


def main(folder):
    optuna.logging.set_verbosity(logging.ERROR)
    dists = distributions()
    study = optuna.create_study()
    with open(f"{folder}/trials.csv") as f:
        for row in csv.DictReader(f):
            params = {}
            for name, dist in dists.items():
                if isinstance(dist, CategoricalDistribution):
                    params[name] = row[name]
                elif isinstance(dist, IntDistribution):
                    params[name] = int(round(float(row[name])))
                else:
                    params[name] = float(row[name])
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions=dists, value=float(row["loss"])))
    start, cpu_start = time.perf_counter(), time.process_time()
    optuna_importances = optuna.importance.get_param_importances(
        study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    dhpt = {}
    with open(f"{folder}/dhpt_importances.csv") as f:
        for row in csv.DictReader(f):
            dhpt.setdefault(row["evaluator"], {})[row["param"]] = float(row["importance"])
    names = sorted(dists)
    print(f"| Optuna 3.1 fanova | {len(study.trials)} x {len(dists)} | {1e3 * seconds:.0f} | "
          f"{1e3 * cpu_seconds:.0f} |")
    print()
    print("| parameter | truth weight | Optuna 3.1 fANOVA | DHPT fANOVA | DHPT PED-ANOVA |")
    print("|---|---|---|---|---|")
    weights = [10, 6, 4, 3, 2, 1.5, 1, 0.5, 0.25, 0]
    for name in names:
        print(f"| {name} | {weights[int(name[1:])]} | {optuna_importances[name]:.3f} | "
              f"{dhpt['fanova'][name]:.3f} | {dhpt['ped-anova'][name]:.3f} |")
    ok = True
    for evaluator in ("fanova", "ped-anova"):
        rho = spearmanr([optuna_importances[n] for n in names],
                        [dhpt[evaluator][n] for n in names]).correlation
        truth = spearmanr([weights[int(n[1:])] for n in names],
                          [dhpt[evaluator][n] for n in names]).correlation
        print(f"\nDHPT {evaluator}: Spearman rank correlation with Optuna's fANOVA {rho:.3f}, "
              f"with the truth's weights {truth:.3f}")
        if evaluator == "fanova" and rho < 0.9:
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/importance"))
