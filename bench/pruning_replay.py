#!/usr/bin/python3
"""Replays pruning rules offline on recorded full curves (docs/early-stopping.md, "a guard for
late-crossing curves, tried offline"): what a rule would have stopped, and whether it kept the
best model, in seconds instead of a benchmark's hours.

bench/pruning_curves.py --save=FILE trains a pool of random configurations of a pruning-matrix
study to the full budget once. Each replay draws a random order of the pool (random search,
not TPE: the replay asks whether a rule keeps the best of what it is shown, not how a
sampler would move), runs the trials one after another as the matrix does (sequential), and at
each report asks the rule whether to stop, as DHPT's services/study/early_stopping.cc and
Optuna 3.1's pruners decide. Two regimes:

  fixed  the first 60 trials of the order; the target is the best of those 60 when unpruned,
         less 0.002 (the paired target: what the unpruned search on the same trials found)
  equal  trials of the order until they have trained as many steps as 60 full trials (the
         matrix's equal compute, at most 240 trials; past the pool the order draws again);
         the same target (the best of the first 60)

and per rule: the share of replays that reached the target, the median compute (steps, as a
share of 60 full trials) and the median compute until a completed trial reached the target.

Guards (the "could it still catch up" candidates), each on top of a rule: a trial the rule
would stop goes on when an optimistic projection of its final value reaches the best completed
trial's final value:
  slope   its value plus its improvement over its last two reports (one at its second),
          per step, times the steps left (DHPT's percentile rule has it: the catch-up guard)
  leaders its value plus the largest gain any completed trial made from this step to its end

  /usr/bin/python3 bench/pruning_curves.py --study=bench/pruning/xgboost-small.yaml \\
      --data=/tmp/dhpt-pruning-data/split-xgboost-small-diabetes --configurations=120 \\
      --save=/tmp/xgb-diabetes.json
  /usr/bin/python3 bench/pruning_replay.py /tmp/xgb-diabetes.json
"""
import argparse
import json
import math
import random

import numpy as np

TOLERANCE = 0.002  # The matrix's target: the unpruned best less this.
TRIALS = 60        # The matrix's max_trials.
EQUAL_CAP = 240    # The matrix's cap on trials at equal compute.
SLOPE_REPORTS = 2  # The slope guard's window: as kCatchUpReports in early_stopping.cc.


class History:
    """The trials run so far, as indices into the pool's matrix of values (trial x report)."""

    def __init__(self, values, steps):
        self.values, self.steps = values, steps
        self.index, self.reached, self.completed, self.bracket = [], [], [], []

    def add(self, i, reached, completed, bracket):
        self.index.append(i)
        self.reached.append(reached)
        self.completed.append(completed)
        self.bracket.append(bracket)

    def done(self):
        return [i for i, c in zip(self.index, self.completed) if c]


def median_rule(startup, guarded_best):
    """DHPT's percentile rule at 50 (guarded_best: its late-crossing guard) or Optuna's
    MedianPruner (startup 5, no guard). Steps line up here, so a value at a step is exact."""

    def stop(i, j, history, bracket):
        done = history.done()
        if len(done) < startup:
            return None
        values = history.values
        best = values[i, :j + 1].max()
        threshold = float(np.median(values[done, j]))
        if best >= threshold:
            return None
        if guarded_best:
            leader = max(done, key=lambda d: values[d, -1])
            if values[leader, :j + 1].max() < threshold:
                return None
        return threshold

    return stop


def asha_rule(min_resource, eta, end=None, in_bracket=False, auto_min=False):
    """DHPT's asha (and Hyperband's brackets with in_bracket) and Optuna's SuccessiveHalving
    (auto_min: min_resource is the first completed trial's steps / 100, nothing judged before)."""

    def stop(i, j, history, bracket):
        steps = history.steps
        step = steps[j]
        previous = steps[j - 1] if j > 0 else -1
        base = min_resource
        if auto_min:
            done = history.done()
            if not done:
                return None
            base = max(1, math.ceil(steps[-1] / 100))
        rate = bracket if in_bracket else 0
        k = 0
        while True:
            rung = base * eta ** (rate + k)
            if rung > step or (end is not None and rung >= end):
                return None
            k += 1
            if rung <= previous:
                continue
            r = int(np.searchsorted(steps, rung))  # the first report at or past the rung
            value = history.values[i, r]
            others = [t for t, reached, b in zip(history.index, history.reached, history.bracket)
                      if reached >= r and (not in_bracket or b == bracket)]
            competing = np.concatenate(([value], history.values[others, r]))
            keep = max(1, len(competing) // eta)
            cut = np.sort(competing)[::-1][keep - 1]
            if cut > value:
                return cut

    return stop


def guarded(rule, guard):
    def stop(i, j, history, bracket):
        cut = rule(i, j, history, bracket)
        if cut is None:
            return None
        done = history.done()
        if not done:
            return cut
        values, steps = history.values, history.steps
        best_final = values[done, -1].max()
        value = values[i, j]
        left = steps[-1] - steps[j]
        if guard == "slope":
            if j < 1:
                return cut
            back = j - min(j, SLOPE_REPORTS)
            gain = max(0.0, (value - values[i, back]) / (steps[j] - steps[back])) * left
        else:  # leaders
            gain = float((values[done, -1] - values[done, j]).max())
        return None if value + gain >= best_final else cut

    return stop


def hyperband_weights(min_resource, max_resource, eta):
    n = 1
    r = min_resource
    while r <= max_resource // eta:
        r *= eta
        n += 1
    return [math.ceil(n * eta ** (n - 1 - b) / (n - b)) for b in range(n)]


def replay(values, steps, order, rule, brackets, budget_steps, max_trials):
    history = History(values, steps)
    spent = 0
    for i in order[:max_trials]:
        if budget_steps is not None and spent >= budget_steps:
            break
        reached, completed = len(steps) - 1, True
        if rule is not None:
            for j in range(len(steps)):
                if rule(i, j, history, brackets[i]) is not None:
                    reached, completed = j, False
                    break
        spent += steps[reached]
        history.add(i, reached, completed, brackets[i])
    return history, spent


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+", help="pruning_curves.py --save files")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min_resource", type=int, default=20, help="the derived default for 300")
    args = parser.parse_args()
    for path in args.curves:
        with open(path) as f:
            curves = json.load(f)["curves"]
        steps = np.array([s for s, _ in curves[0]])
        values = np.array([[v for _, v in c] for c in curves])
        last = int(steps[-1])
        weights = hyperband_weights(args.min_resource, last, 3)
        rules = {
            "none": None,
            "DHPT median": median_rule(10, True),
            "DHPT asha": asha_rule(args.min_resource, 4),
            "hyperband": asha_rule(args.min_resource, 3, end=last, in_bracket=True),
            "Optuna Median": median_rule(5, False),
            "Optuna SuccessiveHalving": asha_rule(1, 4, auto_min=True),
        }
        for base in ("DHPT median", "DHPT asha", "hyperband"):
            for guard in ("slope", "leaders"):
                rules[f"{base} + {guard}"] = guarded(rules[base], guard)
        rng = random.Random(args.seed)
        draws = []
        for _ in range(args.replays):
            order = list(range(len(curves)))
            rng.shuffle(order)
            # Past the pool, the equal regime draws again (with replacement), up to the matrix's
            # cap of 240 trials: as TPE, it may come back to a configuration it has tried.
            order += [rng.randrange(len(curves)) for _ in range(EQUAL_CAP - len(order))]
            brackets = rng.choices(range(len(weights)), weights=weights, k=len(curves))
            draws.append((order, brackets))
        print(f"\n{path}: pool {len(curves)} configurations, {args.replays} replays, "
              f"hyperband shares {weights}")
        print("| rule | regime | reached | best kept | compute | compute to target | trials |")
        print("|---|---|--:|--:|--:|--:|--:|")
        for name, rule in rules.items():
            for regime in ("fixed", "equal"):
                if regime == "equal" and rule is None:
                    continue
                reached = kept = 0
                compute, to_target, trials = [], [], []
                for order, brackets in draws:
                    finals = {i: values[i, -1] for i in order[:TRIALS]}
                    best_i = max(finals, key=finals.get)
                    target = finals[best_i] - TOLERANCE
                    history, spent = replay(
                        values, steps, order, rule, brackets,
                        TRIALS * last if regime == "equal" else None,
                        EQUAL_CAP if regime == "equal" else TRIALS)
                    kept += any(i == best_i and c for i, c in zip(history.index, history.completed))
                    running, first = 0, math.inf
                    for i, r, c in zip(history.index, history.reached, history.completed):
                        running += steps[r]
                        if c and values[i, -1] >= target:
                            first = running
                            break
                    reached += first < math.inf
                    compute.append(spent / (TRIALS * last))
                    to_target.append(first / (TRIALS * last))
                    trials.append(len(history.index))
                n = len(draws)
                median_to = float(np.median(to_target))
                print(f"| {name} | {regime} | {reached / n:.2f} | {kept / n:.2f} | "
                      f"{np.median(compute):.2f} | "
                      f"{'-' if math.isinf(median_to) else f'{median_to:.2f}'} | "
                      f"{int(np.median(trials))} |")


if __name__ == "__main__":
    main()
