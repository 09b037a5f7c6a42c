#pragma once

#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// Bayesian optimisation with a Gaussian process. The rule:
// - Until `n_startup_trials` trials have completed or been pruned, suggest as RandomSearch does.
// - Inputs: numeric parameters scaled to [0, 1] in the transformed (log) space; each
//   categorical or discrete parameter one-hot. Targets: completed objectives (negated when
//   maximising), Yeo-Johnson-warped and standardised (YeoJohnsonStandardize; only
//   standardised with warp_objective off). A pruned trial joins with the last value it
//   reported, but no worse than the worst completed objective: an early stop marks a poor
//   region without becoming an outlier. Failed trials are left out of the model. A completed
//   trial outside the constraints (violation > 0) joins as no better than the worst feasible
//   one; while no trial is feasible, the GP models the violation of the completed trials
//   instead (pruned ones left out), which leads the search to the feasible region.
// - Hyperparameters: Matern-5/2 ARD, fitted by maximising the marginal likelihood with priors
//   (GaussianProcess::Fit) on at most `max_fit_points` trials (the best half and the most
//   recent half), then conditioned on every completed trial.
// - Running trials are fantasised with the worst value seen (constant liar, CL-max), so
//   parallel suggestions spread out instead of collapsing onto one point.
// - log EI is maximised over `candidates` scrambled Halton points and perturbations of the best
//   trials, each rounded exactly to a valid point (lattice, one category) before it is scored;
//   the best few are refined by a shrinking coordinate search. A point tried already is
//   skipped; if every candidate was, RandomSearch.
// The n-th suggestion's randomness comes from (seed, n) alone.
class BayesianOptimization : public Optimizer {
 public:
  BayesianOptimization(SearchSpace space, uint64_t seed, bool minimize,
                       BayesianOptions options);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

 private:
  SearchSpace space_;
  uint64_t seed_;
  bool minimize_;
  BayesianOptions options_;
  RandomSearch random_;
};

}  // namespace dhpt::optimizer
