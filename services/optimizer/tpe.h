#pragma once

#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// Tree-structured Parzen Estimator with Optuna 3.1's defaults. The rule:
// - Until `n_startup_trials` trials have completed or been pruned, suggest as RandomSearch does.
// - Trials are ranked as Optuna 3.1 ranks them: completed ones first, by objective; then
//   pruned ones, those that got further first and, at the same step, by their last value;
//   then failed trials, and running ones with the constant liar, as infinitely bad, so
//   parallel suggestions spread out instead of piling onto one point and configurations that
//   crash are avoided. A NaN value ranks last within its tier.
// - Of n completed and pruned trials, the best min(ceil(0.1 n), 25) form "below" (so "below"
//   takes a pruned trial only when too few completed), the rest "above"; each set is weighted by
//   TpeObservationWeights in trial order, and modelled by a ParzenEstimator l(x) and g(x).
// - Draw `n_ei_candidates` from l and keep the one with the largest log l(x) - log g(x):
//   per parameter (univariate, the default) or jointly (multivariate).
// - A candidate that was tried already yields to the next best; if all were, RandomSearch.
// - Conditional spaces (as Optuna's TPE): the split into below and above is over all trials,
//   and each parameter's l and g are fitted to the trials of each set where it was active,
//   weighted among themselves; a suggestion draws every parameter and drops the inactive ones;
//   a forbidden candidate yields like a tried one. With condition_on_parent, a child is fitted
//   only to the trials whose parent took the value chosen for this suggestion (parents are
//   ranked first). Multivariate models jointly the parameters that are always active
//   together: the unconditional ones, and each branch's (the children of one parent under the
//   same parent values), as Optuna's group=True does.
// The n-th suggestion's randomness comes from (seed, n) alone.
//
// Constraints: a completed trial with a violation > 0 ranks after every feasible completed and
// every pruned trial, by increasing violation, and before failed and running ones; so it goes
// "below" only when too few trials are feasible (as Optuna 3.1's split with constraints).
//
// Multi-objective studies (`objectives_minimize` with two or more entries) split as Optuna
// 3.1's MOTPE does (SplitMultiObjective: non-dominated rank, then greedy hypervolume subset
// selection; below weighted by hypervolume contribution); the rest of the rule is the same.
//
// Speed: univariate estimators need each parameter's observations sorted by value. The sorted
// order of every trial so far is kept between suggestions and extended with the new trials
// (a history that does not extend the one seen before is sorted afresh), so a suggestion in
// a running study costs a merge per parameter rather than a sort. The result is the same
// either way; tests compare a warm optimiser with a fresh one.
class TpeSearch : public Optimizer {
 public:
  TpeSearch(SearchSpace space, uint64_t seed, bool minimize, TpeOptions options,
            std::vector<bool> objectives_minimize = {});
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

  // The trials (indices into the history, in trial order) modelled by l(x) and g(x);
  // nullopt during start-up (exposed for tests).
  struct Split {
    std::vector<int> below, above;
    // The weight of each of `below` (MOTPE); empty: TpeObservationWeights in trial order.
    std::vector<double> below_weights;
  };
  std::optional<Split> SplitTrials(const History& history) const;

 private:
  SearchSpace space_;
  uint64_t seed_;
  bool minimize_;
  TpeOptions options_;
  std::vector<bool> objectives_minimize_;
  RandomSearch random_;

  // Where a trial stands for the below/above split: lexicographic, smaller is better.
  // nullopt: left out (a running trial without the constant liar, a completed one without a
  // value).
  struct Rank {
    // -inf completed; -last_step pruned (1 without a value); 2 completed but infeasible (loss:
    // the violation); +inf failed or running.
    double tier = 0;
    double loss = 0;  // The objective, negated when maximising.
    friend bool operator<(const Rank& a, const Rank& b) {
      return a.tier != b.tier ? a.tier < b.tier : a.loss < b.loss;
    }
  };
  std::optional<Rank> RankOf(const TrialRecord& trial) const;

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
