#include "services/optimizer/motpe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "services/optimizer/pareto.h"
#include "services/optimizer/trial_losses.h"

namespace dhpt::optimizer {
namespace {

constexpr double kEps = 1e-12;  // Optuna's EPS.

}  // namespace

std::optional<MotpeSplit> SplitMultiObjective(const History& history,
                                              const std::vector<bool>& minimize,
                                              int n_startup_trials, bool constant_liar) {
  std::vector<int> observed;                // Trial indices of the observations,
  std::vector<std::vector<double>> losses;  // their losses
  std::vector<double> violations;           // and violations.
  std::vector<int> outcast;                 // Trials that go above whatever their values.
  for (int t = 0; t < static_cast<int>(history.trials.size()); ++t) {
    const TrialRecord& trial = history.trials[t];
    if (std::optional<std::vector<double>> l = CompletedLosses(trial, minimize)) {
      observed.push_back(t);
      losses.push_back(std::move(*l));
      violations.push_back(trial.violation);
    } else if (trial.status != TrialStatus::kRunning || constant_liar) {
      outcast.push_back(t);
    }
  }
  const int n = static_cast<int>(observed.size());
  if (n < n_startup_trials) return std::nullopt;
  const int n_below = std::min({static_cast<int>(std::ceil(0.1 * n)), 25, n});

  std::vector<int> feasible;  // Positions in `observed`.
  for (int k = 0; k < n; ++k) {
    if (violations[k] <= 0) feasible.push_back(k);
  }
  std::vector<int> below;  // Positions in `observed`.
  if (static_cast<int>(feasible.size()) <= n_below) {
    std::vector<int> by_violation(static_cast<size_t>(n));
    std::iota(by_violation.begin(), by_violation.end(), 0);
    std::stable_sort(by_violation.begin(), by_violation.end(),
                     [&](int a, int b) { return violations[a] < violations[b]; });
    below.assign(by_violation.begin(), by_violation.begin() + n_below);
  } else {
    std::vector<std::vector<double>> feasible_losses;
    for (int k : feasible) feasible_losses.push_back(losses[k]);
    const std::vector<int> ranks = NonDominatedRanks(feasible_losses, {}, n_below);
    for (int rank = 0; static_cast<int>(below.size()) < n_below; ++rank) {
      std::vector<int> front;  // Positions in `feasible`.
      for (int k = 0; k < static_cast<int>(ranks.size()); ++k) {
        if (ranks[k] == rank) front.push_back(k);
      }
      if (static_cast<int>(below.size() + front.size()) <= n_below) {
        for (int k : front) below.push_back(feasible[k]);
        continue;
      }
      // Part of this front: the subset that covers the most hypervolume, greedily.
      std::vector<std::vector<double>> front_losses;
      for (int k : front) front_losses.push_back(feasible_losses[k]);
      const std::vector<int> chosen =
          GreedyHypervolumeSubset(front_losses, n_below - static_cast<int>(below.size()),
                                  MotpeReferencePoint(front_losses));
      for (int c : chosen) below.push_back(feasible[front[c]]);
    }
  }
  std::sort(below.begin(), below.end());

  MotpeSplit split;
  std::vector<std::vector<double>> feasible_below;
  for (int k : below) {
    if (violations[k] <= 0) feasible_below.push_back(losses[k]);
  }
  std::vector<double> weights(feasible_below.size(), 1.0);
  if (feasible_below.size() > 1) {
    weights = HypervolumeContributions(feasible_below, MotpeReferencePoint(feasible_below));
    for (double& w : weights) w += kEps;
    const double largest = *std::max_element(weights.begin(), weights.end());
    for (double& w : weights) w = std::clamp(w / largest, 0.0, 1.0);
  }
  std::vector<bool> in_below(static_cast<size_t>(n), false);
  size_t next_feasible = 0;
  for (int k : below) {
    in_below[k] = true;
    split.below.push_back(observed[k]);
    split.below_weights.push_back(violations[k] <= 0 ? weights[next_feasible++] : kEps);
  }
  for (int k = 0; k < n; ++k) {
    if (!in_below[k]) split.above.push_back(observed[k]);
  }
  split.above.insert(split.above.end(), outcast.begin(), outcast.end());
  std::sort(split.above.begin(), split.above.end());
  return split;
}

}  // namespace dhpt::optimizer
