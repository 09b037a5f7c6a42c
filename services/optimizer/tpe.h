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
//
// Speed: univariate estimators need each parameter's observations sorted by value. The sorted
// order of every trial so far is kept between suggestions and extended with the new trials
// (a history that does not extend the one seen before is sorted afresh), so a suggestion in
// a running study costs a merge per parameter rather than a sort. The result is the same
// either way; tests compare a warm optimiser with a fresh one.
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

  // Every trial's internal values, row after row, and per dimension the trial indices sorted
  // by (value, index): the order a stable sort by value gives.
  struct SortedColumns {
    std::vector<double> internal;
    std::vector<std::vector<int>> order;
  };
  // Brings `columns_` up to `internal` (all trials of the history, row after row).
  void UpdateSortedColumns(const std::vector<double>& internal);
  SortedColumns columns_;
};

}  // namespace dhpt::optimizer
