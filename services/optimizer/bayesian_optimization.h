#pragma once

#include <optional>

#include "services/optimizer/gaussian_process.h"
#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// Bayesian optimisation with a Gaussian process. The rule:
// - Until `n_startup_trials` trials have completed or been pruned, suggest as RandomSearch does.
// - Inputs: numeric parameters scaled to [0, 1] in the transformed (log) space; each
//   categorical or discrete parameter one-hot; in a conditional space an inactive parameter is
//   imputed with a constant (-1, or an all-zero one-hot; kInactiveCoordinate says why) and
//   candidates are made canonical before they are scored. Targets: completed objectives
//   (negated when maximising), Yeo-Johnson-warped and standardised (YeoJohnsonStandardize; only
//   standardised with warp_objective off). A pruned trial joins with the last value it
//   reported, but no worse than the worst completed objective: an early stop marks a poor
//   region without becoming an outlier. Failed trials are left out of the model. A completed
//   trial outside the constraints (violation > 0) joins as no better than the worst feasible
//   one; while no trial is feasible, the GP models the violation of the completed trials
//   instead (pruned ones left out), which leads the search to the feasible region.
// - Hyperparameters: Matern-5/2 ARD, fitted by maximising the marginal likelihood with priors
//   (GaussianProcess::Fit) on at most `max_fit_points` trials (the best half and the most
//   recent half) of the first m observed ones (FitPrefix: m steps up by `refit_growth`, so the
//   fit is redone only when m moves; the last fit's inputs and result are kept, and a fit with
//   the same inputs is not redone), then conditioned on at most max(max_model_points,
//   max_fit_points) trials chosen alike from all of them, running ones included (every trial
//   while there are no more).
// - Running trials are fantasised with the worst value seen (constant liar, CL-max), so
//   parallel suggestions spread out instead of collapsing onto one point.
// - log EI is maximised over `candidates` scrambled Halton points and perturbations of the best
//   trials, each rounded exactly to a valid point (lattice, one category) before it is scored;
//   the best few are refined by a shrinking coordinate search. A point tried already is
//   skipped; if every candidate was, RandomSearch.
// The n-th suggestion's randomness comes from (seed, n) alone.
// Memory: BayesianSuggestionBytes bounds what one suggestion allocates whatever the history;
// candidates are scored a batch at a time, never all encoded at once.
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
  // The last fit: a hash of its inputs (every byte of the fit's x and y) and the hyperparameters
  // they gave. Fit is deterministic, so reusing it for the same inputs changes nothing but the
  // time; a hash rather than the inputs keeps a study's kept state to a few numbers per column.
  struct Fitted {
    size_t inputs = 0;
    GpHyperparameters h;
  };
  std::optional<Fitted> last_fit_;
};

// How many of `observed` trials (in trial order) the hyperparameters are fitted to: the largest
// step of the grid n_startup, then + max(1, floor(refit_growth * m)), that is at most `observed`.
int FitPrefix(int observed, const BayesianOptions& options);

// Columns of the GP's inputs: one per numeric parameter, one per value of a categorical or
// discrete one (one-hot).
int64_t EncodedWidth(const SearchSpace& space);

// An upper bound on the bytes one suggestion allocates, whatever the history (its matrices
// grow with the encoded width, max_fit_points and max_model_points, never with the number of
// trials; what grows with the trials is a few numbers per trial). Spec validation refuses a
// study above kSuggestionMemoryBudgetBytes; tests/optimizer_memory/ checks the bound.
int64_t BayesianSuggestionBytes(const SearchSpace& space, const BayesianOptions& options);
// What grows with the history, per trial: an objective, indices and (ParEGO) a scalarised
// record without its point.
inline constexpr int64_t kBayesianBytesPerTrial = 256;

// Encoded columns times candidates (with the perturbed ones): the work of one suggestion's
// candidate search, each cell Halton-filled, decoded and scored against every model trial.
int64_t BayesianCandidateCells(const SearchSpace& space, const BayesianOptions& options);
// Spec validation's limit on BayesianCandidateCells: the default 512 candidates leave room for
// about 6,800 encoded columns.
inline constexpr int64_t kMaxBayesianCandidateCells = int64_t{4} << 20;

}  // namespace dhpt::optimizer
