#pragma once

#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

// ParEGO (Knowles 2006) on DHPT's Gaussian-process BO: BAYESIAN in a multi-objective study.
// The rule, for the n-th suggestion:
// - Losses (objectives, negated where maximised) of the completed trials are normalised to
//   [0, 1] per objective by the smallest and largest among the feasible ones (all of them while
//   none is feasible).
// - A weight vector w is drawn uniformly from the simplex, from (seed, n) alone, and each trial
//   is scalarised by the augmented Chebyshev function max_i w_i f_i + 0.05 sum_i w_i f_i.
// - BayesianOptimization (same options and seed) then suggests for the scalarised history:
//   start-up, constraints (an infeasible trial no better than the worst feasible), constant
//   liar for running trials, log EI, no duplicates. Pruned trials and completed ones with a
//   missing or NaN objective count as failed.
// - Past `max_fit_points` completed trials, the GP sees only that many: the best half by the
//   scalarised value (feasible ones first, then by violation) and the most recent half; the
//   rest count as failed. This bounds the cost of a suggestion, which otherwise grows with the
//   cube of the history (119 ms of CPU at 1,000 trials without the cap, 28 ms at 128 points,
//   4.8 ms at kParEgoMaxFitPoints = 40, the default of multi-objective studies;
//   bench/optimizer_cost_bench); the trials left out lie far from the current weights' optimum
//   or were superseded by newer ones.
// - Memory: the scalarised history copies only the points the GP reads (modelled trials and
//   the most recent max(max_model_points, max_fit_points) running ones, which BAYESIAN
//   conditions on); older running trials count as failed there.
// Different weights on successive suggestions spread them along the Pareto front.
class ParEgo : public Optimizer {
 public:
  ParEgo(SearchSpace space, uint64_t seed, std::vector<bool> minimize, BayesianOptions options);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

  // The weights of the suggestion after `trials` trials (exposed for tests).
  std::vector<double> Weights(size_t trials) const;
  // The history BayesianOptimization sees, one scalar per completed trial.
  std::vector<TrialRecord> Scalarised(const History& history) const;

  static constexpr double kRho = 0.05;

 private:
  SearchSpace space_;
  uint64_t seed_;
  std::vector<bool> minimize_;
  BayesianOptions options_;
  BayesianOptimization scalar_;
};

}  // namespace dhpt::optimizer
