#pragma once

// The below/above split of multi-objective TPE, as Optuna 3.1's TPESampler makes it when a
// study has several objectives (MOTPE, Ozaki et al. 2020).

#include <optional>
#include <vector>

#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

struct MotpeSplit {
  // Trial indices in trial order; below_weights[k] is the kernel weight of below[k].
  std::vector<int> below, above;
  std::vector<double> below_weights;
};

// The rule:
// - The observations are the completed trials with every objective reported (not NaN); n of
//   them. Fewer than `n_startup_trials`: nullopt (start-up, random search).
// - n_below = min(ceil(0.1 n), 25). When at most n_below are feasible (violation 0), "below"
//   is the feasible ones and then the least violating ones. Otherwise "below" is chosen among
//   the feasible ones: whole fronts of the non-dominated sort while they fit, then from the
//   next front the greedy hypervolume subset (GreedyHypervolumeSubset, reference point
//   MotpeReferencePoint of that front).
// - Below weights: the feasible members' hypervolume contributions to "below" (reference
//   MotpeReferencePoint of their losses) plus 1e-12, divided by the largest; 1 when there is
//   one; 1e-12 for infeasible members.
// - "above" is every other observation, plus, as in single-objective TPE (where Optuna 3.1's
//   MOTPE drops them), failed trials, pruned ones, completed ones with a missing objective, and
//   with the constant liar the running trials: as infinitely bad results they keep parallel
//   suggestions apart and steer away from configurations that crash.
std::optional<MotpeSplit> SplitMultiObjective(const History& history,
                                              const std::vector<bool>& minimize,
                                              int n_startup_trials, bool constant_liar);

}  // namespace dhpt::optimizer
