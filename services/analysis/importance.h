#pragma once

// Which hyperparameters mattered: each parameter's share of how the objective varies over a
// study's trials, by one of two evaluators.
//
// - PED-ANOVA (Watanabe et al., 2023; Optuna's PedAnovaImportanceEvaluator, not yet in Optuna
//   3.1): a parameter matters as much as the density of its values among the best
//   `target_quantile` of the trials departs from their density among all trials (the Pearson
//   divergence of the two, each a Parzen estimate on a grid of kPedAnovaGridPoints in the
//   sampled space). O(trials + grid^2) per parameter: the default.
// - fANOVA (Hutter et al., 2014; Optuna's FanovaImportanceEvaluator): a random forest of
//   regression trees fitted to the trials, and each parameter's share of the variance of each
//   tree's prediction over the whole space that its main effect explains (the variance of the
//   tree's marginal along the parameter), averaged over the trees.
//
// Both work in the space the study samples in (log for log ranges, choices equally weighted),
// are deterministic given `seed`, and are normalised so that the importances sum to 1.
// Parameters that never varied are reported with importance 0 and `constant`.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/analysis/study_data.h"
#include "services/common/random.h"

namespace dhpt::analysis {

enum class Evaluator { kPedAnova, kFanova };

// Trials an evaluator reads at most: past these a seeded uniform subsample is used, so that a
// study of 100,000 trials answers in bounded time and memory (about 10 ms and 0.2 s at the
// limits on one core; docs/benchmarks.md).
inline constexpr int kMaxPedAnovaTrials = 20'000;
inline constexpr int kMaxFanovaTrials = 2'000;

// Keeps at most `limit` of `items` (in trial order, as `in_order` sorts them): a seeded uniform
// subsample. One rule for the scheduler, which subsamples before it copies trials under its
// lock, and the evaluators, so both keep the same trials for the same seed.
template <typename T, typename InOrder>
void KeepSeededSubsample(std::vector<T>& items, size_t limit, uint64_t seed, InOrder in_order) {
  if (items.size() <= limit) return;
  std::mt19937_64 generator = SeededGenerator(seed, 0x1a7, 0);
  DeterministicShuffle(items.begin(), items.end(), generator);
  items.resize(limit);
  std::sort(items.begin(), items.end(), in_order);
}
// PED-ANOVA: the share of best trials compared with all (Optuna's default) and the grid the
// densities are compared on.
inline constexpr double kDefaultTargetQuantile = 0.1;
inline constexpr int kPedAnovaGridPoints = 50;
// fANOVA's forest, as Optuna's defaults.
inline constexpr int kDefaultFanovaTrees = 64;
inline constexpr int kDefaultFanovaMaxDepth = 64;

struct ImportanceOptions {
  Evaluator evaluator = Evaluator::kPedAnova;
  int objective = 0;  // Index into StudyData::objectives.
  // PED-ANOVA: the share of trials counted as the best, in (0, 1).
  std::optional<double> target_quantile;
  // Pruned trials count too, with the value they had when they were stopped (one objective).
  bool include_pruned = false;
  // Only these parameters (empty: all), each a parameter of the study.
  std::vector<std::string> params;
  uint64_t seed = 0;
  int max_trials = 0;  // 0: the evaluator's limit above.
  int fanova_trees = kDefaultFanovaTrees;
  int fanova_max_depth = kDefaultFanovaMaxDepth;
};

struct ParamImportance {
  std::string name;
  double importance = 0;  // In [0, 1]; all of them sum to 1.
  bool constant = false;  // The parameter had one value in every trial read.
};

struct ImportanceResult {
  std::vector<ParamImportance> importances;  // Most important first.
  Evaluator evaluator = Evaluator::kPedAnova;
  std::string objective;  // The objective's metric.
  int trials_considered = 0;  // Completed (and pruned, if asked) trials with a value.
  int trials_used = 0;        // Of those, read after subsampling.
};

// FAILED_PRECONDITION when fewer than 2 trials have a value, when every one has the same value,
// or when no parameter varied; INVALID_ARGUMENT for an unknown parameter, objective or a
// target_quantile outside (0, 1).
absl::StatusOr<ImportanceResult> ComputeImportances(const StudyData& study,
                                                    const ImportanceOptions& options);

// "ped-anova" or "fanova" and back (INVALID_ARGUMENT listing both).
std::string EvaluatorName(Evaluator evaluator);
absl::StatusOr<Evaluator> ParseEvaluator(const std::string& name);

}  // namespace dhpt::analysis
