#pragma once

#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// Tree-structured Parzen Estimator with Optuna 3.1's defaults. The rule:
// - Until `n_startup_trials` trials have completed, suggest as RandomSearch does.
// - Losses: completed trials' objectives (negated when maximising); failed trials, and running
//   ones with the constant liar, count as infinitely bad, so parallel suggestions spread out
//   instead of piling onto one point and configurations that crash are avoided.
// - The best min(ceil(0.1 n), 25) form "below", the rest "above"; each set is weighted by
//   TpeObservationWeights in trial order, and modelled by a ParzenEstimator l(x) and g(x).
// - Draw `n_ei_candidates` from l and keep the one with the largest log l(x) - log g(x):
//   per parameter (univariate, the default) or jointly (multivariate).
// - A candidate that was tried already yields to the next best; if all were, RandomSearch.
// The n-th suggestion's randomness comes from (seed, n) alone.
class TpeSearch : public Optimizer {
 public:
  TpeSearch(SearchSpace space, uint64_t seed, bool minimize, TpeOptions options);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

 private:
  SearchSpace space_;
  uint64_t seed_;
  bool minimize_;
  TpeOptions options_;
  RandomSearch random_;
};

}  // namespace dhpt::optimizer
