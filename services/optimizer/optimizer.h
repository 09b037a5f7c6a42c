#pragma once

// The optimiser interface. An optimiser is a pure function of (search space, settings, trial
// history including running trials) -> the next point, so the scheduler can rebuild one from
// the stored history after a restart and get the same suggestions.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "services/optimizer/search_space.h"

namespace dhpt::optimizer {

// kPruned: stopped early by the study's early-stopping rule. How each optimiser learns from
// pruned trials is said at its class.
enum class TrialStatus { kRunning, kCompleted, kPruned, kFailed };

struct TrialRecord {
  Point point;
  TrialStatus status = TrialStatus::kRunning;
  // The objective of a completed trial, as reported (see OptimizerConfig::minimize); of a
  // pruned one, the last value it reported before it was stopped, at `last_step`.
  std::optional<double> value;
  int64_t last_step = 0;
  // Multi-objective studies (OptimizerConfig::objectives_minimize has 2 or more entries): the
  // completed trial's value of each objective, in that order; `value` is then unset.
  std::vector<double> values;
  // Studies with constraints: how far the completed trial is outside them (the sum of each
  // violated bound's excess, Optuna's constraint values > 0 summed); 0 means feasible.
  double violation = 0;
};

// Every trial the study has suggested, in suggestion order, and the keys (SearchSpace::Key) of
// their points so that optimisers can refuse duplicates in O(1).
struct History {
  const std::vector<TrialRecord>& trials;
  const absl::flat_hash_set<std::string>& keys;
  // Where set, TPE and Bayesian optimisation learn from every completed trial and from the
  // other trials t only where (*learn_from)[t] (early stopping's Hyperband: the next trial's
  // bracket, whose pruned trials stopped at the same rungs, so their last values compare; a
  // completed trial's value is the full objective in any bracket). The trials left out still
  // count as taken points. Unset: every trial.
  const std::vector<bool>* learn_from = nullptr;
  bool LearnsFrom(size_t t) const {
    return learn_from == nullptr || (*learn_from)[t] || trials[t].status == TrialStatus::kCompleted;
  }
};

// With several objectives (IsMultiObjective): kTpe is MOTPE (motpe.h), kBayesian is ParEGO
// (parego.h), kNsga2 is NSGA-II (nsga2.h, also accepted with one objective), kRandom and kGrid
// are unchanged, and kHillClimbing is refused by MakeOptimizer. Every algorithm but kRandom and
// kGrid reads TrialRecord::violation (docs/multi-objective-optimizers.md).
enum class Algorithm { kRandom, kGrid, kTpe, kHillClimbing, kBayesian, kNsga2 };

struct TpeOptions {
  int n_startup_trials = 10;
  int n_ei_candidates = 24;
  bool multivariate = false;
  bool constant_liar = true;
  double prior_weight = 1.0;
  // See ParzenOptions::bandwidth_weighted: Optuna 3.1's behaviour, and the better of the two in
  // bench/optimizer_quality_bench on every function measured.
  bool bandwidth_weighted = true;
  // Conditional spaces: a child parameter's densities are fitted to the trials where its
  // parent took the value just chosen for this suggestion (not all trials where the child was
  // active), so a child shared by several parent values learns each branch apart.
  bool condition_on_parent = false;
};

struct HillClimbingOptions {
  // Gaussian step as a fraction of each range in the transformed space.
  double initial_step = 0.2;
  double shrink_factor = 0.5;
  // Non-improving results in a row before the step shrinks.
  int patience = 4;
  // A step below this means the climb has stagnated: restart from a random point.
  double min_step = 0.02;
  // Chance that a categorical or discrete parameter takes another value in a neighbour.
  double flip_probability = 0.2;
};

// ParEGO's default for max_fit_points (multi-objective BAYESIAN studies get it from spec
// validation): in bench/multi_objective_quality_bench a GP on 40 points of the scalarised
// history matched 128 points' hypervolume (ZDT1 and ZDT2 within 1%, DTLZ2 2% lower at 200
// trials) at a sixth of the cost: 4.6 ms per suggestion at 1,000 trials instead of 28 ms.
inline constexpr int kParEgoMaxFitPoints = 40;

// The most bytes one suggestion may allocate, whatever the history: spec validation refuses a
// BAYESIAN space and settings whose bound (BayesianSuggestionBytes) is above it, and the other
// algorithms stay far below it (tests/optimizer_memory/, docs/optimizers.md#memory). The
// scheduler runs --suggestion_threads suggestions at once, so it needs that many budgets.
inline constexpr int64_t kSuggestionMemoryBudgetBytes = int64_t{256} << 20;

// BAYESIAN's default for max_model_points: the GP's kernel matrix takes n^2 doubles and its
// Cholesky n^3 / 3 steps, so a GP on 20,000 added trials took 6.4 GB and 146 s for one
// suggestion; on 1,000 it takes 8 MB per matrix and well under a second.
inline constexpr int kDefaultMaxModelPoints = 1000;

struct BayesianOptions {
  int n_startup_trials = 10;
  int candidates = 512;
  int max_fit_points = 128;
  // The GP is conditioned on at most max(max_model_points, max_fit_points) trials, running
  // ones included: past that, the best half and the most recent half of the completed ones.
  int max_model_points = kDefaultMaxModelPoints;
  int fit_iterations = 40;
  // The kernel's hyperparameters are fitted to the first m observed trials (in trial order),
  // where m steps up by max(1, refit_growth * m) from n_startup_trials: 10, 11, ..., 20, 22,
  // ..., 100, 110, ... So a running study refits about every tenth trial at 100 and every
  // fiftieth at 500, and the fit (the bulk of a suggestion's cost) is kept in between. The
  // hyperparameters are still a function of the history alone (a restart refits the same
  // prefix). 0 refits on every suggestion.
  double refit_growth = 0.1;
  // Fit the GP to Yeo-Johnson-transformed objectives (YeoJohnsonStandardize) instead of
  // merely standardised ones: in bench/optimizer_quality_bench it cut the median regret at 100
  // trials on Rosenbrock-4 from 42 to 3.3 and on Ackley-5 from 6.6 to 3.2.
  bool warp_objective = true;
};

// Optuna 3.1's NSGAIISampler defaults.
struct Nsga2Options {
  int population_size = 50;
  // Unset: 1 / number of parameters.
  std::optional<double> mutation_prob;
  double crossover_prob = 0.9;
  double swapping_prob = 0.5;
};

struct OptimizerConfig {
  Algorithm algorithm = Algorithm::kRandom;
  uint64_t seed = 0;
  int grid_points = 5;
  // Single-objective studies: the direction of TrialRecord::value.
  bool minimize = true;
  // Multi-objective studies: the direction of each of TrialRecord::values (2 or more entries);
  // empty for single-objective studies.
  std::vector<bool> objectives_minimize;
  Nsga2Options nsga2;
  TpeOptions tpe;
  HillClimbingOptions hill_climbing;
  BayesianOptions bayesian;
};

inline bool IsMultiObjective(const OptimizerConfig& config) {
  return config.objectives_minimize.size() >= 2;
}

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // The next point, never one already in `history` unless the space is exhausted; nullopt
  // when there is no point left to try.
  virtual absl::StatusOr<std::optional<Point>> Suggest(const History& history) = 0;
  // How many points the optimiser can ever suggest, when that is bounded (a grid).
  virtual std::optional<int64_t> Capacity() const { return std::nullopt; }
  // True when Suggest takes microseconds whatever the history, so a scheduler may call it
  // inline; model-based optimisers are run off the scheduler's event path.
  virtual bool cheap() const { return false; }
};

// True when the space is countable and every point of it is in the history.
inline bool SpaceExhausted(const SearchSpace& space, const History& history) {
  const std::optional<int64_t> size = space.FiniteSize();
  return size && static_cast<int64_t>(history.keys.size()) >= *size;
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const SearchSpace& space,
                                                         const OptimizerConfig& config);

// The grid GRID search walks: the values of every parameter (all of a countable parameter
// with at most grid_points values, else grid_points values evenly spaced in the transformed
// space) and the size of their product (nullopt past 2^62). In a conditional space the size
// is the sum over branches (BranchGrid) less the forbidden points, which are counted one by
// one: nullopt past SearchSpace::kMaxCountedPoints when there are forbidden clauses.
std::vector<std::vector<ParameterValue>> GridAxes(const SearchSpace& space, int grid_points);
std::optional<int64_t> GridSize(const SearchSpace& space, int grid_points);

}  // namespace dhpt::optimizer
