#include "services/analysis/importance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "services/analysis/random_forest.h"
#include "services/common/random.h"
#include "services/common/status_macros.h"

namespace dhpt::analysis {
namespace {

bool IsChoice(const optimizer::ParameterSpec& param) {
  return param.kind == optimizer::ParameterKind::kCategorical ||
         param.kind == optimizer::ParameterKind::kDiscrete;
}

int ChoiceCount(const optimizer::ParameterSpec& param) {
  return static_cast<int>(param.kind == optimizer::ParameterKind::kCategorical
                              ? param.categories.size()
                              : param.discrete_values.size());
}

// The rows the evaluators read: unit coordinates of the chosen parameters and the loss
// (lower is better).
struct Rows {
  std::vector<std::vector<double>> x;  // x[row][param]
  std::vector<double> loss;
  int considered = 0;
};

absl::StatusOr<Rows> CollectRows(const StudyData& study, const ImportanceOptions& options,
                                 const std::vector<int>& chosen, int limit) {
  ASSIGN_OR_RETURN(const ObjectiveInfo objective, Objective(study, options.objective));
  const bool pruned_too = options.include_pruned && study.objectives.size() == 1;
  std::vector<const TrialData*> usable;
  int lacking = 0;  // Trials with a value that lack a chosen (conditional) parameter.
  for (const TrialData& trial : study.trials) {
    const bool counted = trial.state == TrialState::kCompleted ||
                         (pruned_too && trial.state == TrialState::kPruned);
    if (!counted || static_cast<int>(trial.values.size()) <= options.objective) continue;
    if (!std::isfinite(trial.values[options.objective])) continue;
    bool complete = true;
    for (int p : chosen) complete = complete && !std::isnan(trial.params[p]);
    if (complete) {
      usable.push_back(&trial);
    } else {
      ++lacking;
    }
  }
  Rows rows;
  rows.considered = static_cast<int>(usable.size());
  if (usable.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "study \"", study.name, "\" has ", usable.size(), " ",
        pruned_too ? "completed or pruned" : "completed",
        " trial(s) with a value of ", objective.metric,
        lacking == 0 ? "" : absl::StrCat(" and every parameter chosen (", lacking,
                                         " more lack a conditional one: choose the parameters "
                                         "of one branch with --params)"),
        "; importance needs at least 2 (run more trials first)"));
  }
  KeepSeededSubsample(usable, limit, options.seed,
                      [](const TrialData* a, const TrialData* b) { return a->number < b->number; });
  for (const TrialData* trial : usable) {
    std::vector<double>& row = rows.x.emplace_back();
    for (int p : chosen) row.push_back(UnitCoordinate(study.params[p], trial->params[p]));
    const double value = trial->values[options.objective];
    rows.loss.push_back(objective.maximize ? -value : value);
  }
  return rows;
}

// --- PED-ANOVA ---

// A Parzen estimate on the grid of a numeric parameter's unit coordinates: Gaussian kernels of
// Scott's bandwidth around the samples (binned first, so the cost is O(n + grid^2)), plus a
// uniform prior of the weight of one sample, as Optuna's _ScottParzenEstimator does.
// The gap between neighbouring values of a parameter on a lattice (ints, steps) in unit
// coordinates; 0 for a continuous range.
double LatticeSpacing(const optimizer::ParameterSpec& param) {
  double step = param.step;
  if (param.kind == optimizer::ParameterKind::kInt) step = std::max(1.0, step);
  if (step <= 0 || param.max <= param.min) return 0;
  const double values = std::floor((param.max - param.min) / step + 1e-9) + 1;
  return values > 1 ? 1.0 / (values - 1) : 0;
}

std::vector<double> NumericDensity(const std::vector<double>& samples, double min_bandwidth) {
  constexpr int kGrid = kPedAnovaGridPoints;
  std::vector<double> counts(kGrid, 0.0);
  double mean = 0;
  for (double u : samples) {
    counts[std::min(kGrid - 1, static_cast<int>(u * kGrid))] += 1;
    mean += u;
  }
  const double n = static_cast<double>(samples.size());
  mean /= n;
  double variance = 0;
  for (double u : samples) variance += (u - mean) * (u - mean);
  const double sigma = std::sqrt(variance / std::max(1.0, n - 1));
  // Never narrower than one grid cell (a bandwidth of 0 would make a point mass), nor than the
  // gap between a lattice's values: else a few best trials on a coarse lattice (6 dropout
  // steps) make peaks that look like importance.
  const double bandwidth =
      std::max({1.059 * sigma * std::pow(n, -0.2), 1.0 / kGrid, min_bandwidth});
  std::vector<double> density(kGrid, 1.0 / kGrid);  // The prior's share.
  for (int g = 0; g < kGrid; ++g) {
    const double at = (g + 0.5) / kGrid;
    double sum = 0;
    for (int b = 0; b < kGrid; ++b) {
      if (counts[b] == 0) continue;
      const double z = (at - (b + 0.5) / kGrid) / bandwidth;
      sum += counts[b] * std::exp(-0.5 * z * z);
    }
    density[g] += sum;
  }
  const double total = std::accumulate(density.begin(), density.end(), 0.0);
  for (double& d : density) d /= total;
  return density;
}

// Smoothed counts of each choice, with a prior of the weight of one sample spread evenly.
std::vector<double> ChoiceDensity(const std::vector<double>& samples, int choices) {
  std::vector<double> density(choices, 1.0 / choices);
  for (double u : samples) density[std::min(choices - 1, static_cast<int>(u * choices))] += 1;
  const double total = static_cast<double>(samples.size()) + 1.0;
  for (double& d : density) d /= total;
  return density;
}

// The Pearson divergence of the best trials' density from all trials': sum over the grid of
// p_all * (p_top / p_all - 1)^2.
double PearsonDivergence(const std::vector<double>& top, const std::vector<double>& all) {
  double divergence = 0;
  for (size_t g = 0; g < all.size(); ++g) {
    const double ratio = top[g] / all[g] - 1.0;
    divergence += all[g] * ratio * ratio;
  }
  return divergence;
}

std::vector<double> PedAnova(const StudyData& study, const std::vector<int>& chosen,
                             const Rows& rows, double quantile) {
  const size_t n = rows.loss.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows.loss[a] < rows.loss[b]; });
  // At least two best trials, as Optuna's min_n_top_trials.
  const size_t top = std::clamp<size_t>(static_cast<size_t>(std::ceil(quantile * n)), 2, n);
  std::vector<double> importances;
  for (size_t c = 0; c < chosen.size(); ++c) {
    std::vector<double> all(n), best(top);
    for (size_t i = 0; i < n; ++i) all[i] = rows.x[i][c];
    for (size_t i = 0; i < top; ++i) best[i] = rows.x[order[i]][c];
    const optimizer::ParameterSpec& param = study.params[chosen[c]];
    importances.push_back(
        IsChoice(param)
            ? PearsonDivergence(ChoiceDensity(best, ChoiceCount(param)),
                                ChoiceDensity(all, ChoiceCount(param)))
            : PearsonDivergence(NumericDensity(best, LatticeSpacing(param)),
                                NumericDensity(all, LatticeSpacing(param))));
  }
  return importances;
}

// --- fANOVA ---

std::vector<double> Fanova(const StudyData& study, const std::vector<int>& chosen,
                           const Rows& rows, const ImportanceOptions& options) {
  std::vector<int> choices;
  for (int p : chosen) choices.push_back(IsChoice(study.params[p]) ? ChoiceCount(study.params[p]) : 0);
  ForestOptions forest_options;
  forest_options.trees = options.fanova_trees;
  forest_options.max_depth = options.fanova_max_depth;
  forest_options.seed = options.seed;
  const RandomForest forest = RandomForest::Fit(rows.x, rows.loss, choices, forest_options);
  return forest.MainEffectShares();
}

}  // namespace

std::string EvaluatorName(Evaluator evaluator) {
  return evaluator == Evaluator::kFanova ? "fanova" : "ped-anova";
}

absl::StatusOr<Evaluator> ParseEvaluator(const std::string& name) {
  if (name == "ped-anova" || name == "pedanova" || name.empty()) return Evaluator::kPedAnova;
  if (name == "fanova") return Evaluator::kFanova;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown evaluator \"", name, "\": use ped-anova (the default) or fanova"));
}

absl::StatusOr<ImportanceResult> ComputeImportances(const StudyData& study,
                                                    const ImportanceOptions& options) {
  ASSIGN_OR_RETURN(const ObjectiveInfo objective, Objective(study, options.objective));
  const double quantile = options.target_quantile.value_or(kDefaultTargetQuantile);
  if (!(quantile > 0 && quantile < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target quantile ", quantile, " must be between 0 and 1 (exclusive), "
                     "the share of trials counted as the best; the default is ",
                     kDefaultTargetQuantile));
  }
  std::vector<int> chosen;
  if (options.params.empty()) {
    for (size_t p = 0; p < study.params.size(); ++p) chosen.push_back(static_cast<int>(p));
  } else {
    for (const std::string& name : options.params) {
      ASSIGN_OR_RETURN(const int p, ParamIndex(study, name));
      if (std::find(chosen.begin(), chosen.end(), p) == chosen.end()) chosen.push_back(p);
    }
  }
  const int limit = options.max_trials > 0 ? options.max_trials
                    : options.evaluator == Evaluator::kFanova ? kMaxFanovaTrials
                                                              : kMaxPedAnovaTrials;
  ASSIGN_OR_RETURN(Rows rows, CollectRows(study, options, chosen, limit));
  if (*std::min_element(rows.loss.begin(), rows.loss.end()) ==
      *std::max_element(rows.loss.begin(), rows.loss.end())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "every one of the ", rows.loss.size(), " trials read has the same ", objective.metric,
        ", so no parameter made a difference to it"));
  }
  // Parameters that never varied have nothing to explain; the evaluators see only the rest.
  std::vector<int> varied;
  std::vector<bool> constant(chosen.size(), true);
  for (size_t c = 0; c < chosen.size(); ++c) {
    for (size_t row = 1; row < rows.x.size() && constant[c]; ++row) {
      constant[c] = rows.x[row][c] == rows.x[0][c];
    }
    if (!constant[c]) varied.push_back(static_cast<int>(c));
  }
  if (varied.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no parameter of study \"", study.name, "\" took more than one value in the ",
        rows.loss.size(), " trials read, so none can explain the differences in ",
        objective.metric));
  }
  Rows narrowed;
  std::vector<int> narrowed_params;
  for (int c : varied) narrowed_params.push_back(chosen[c]);
  narrowed.loss = rows.loss;
  for (const std::vector<double>& row : rows.x) {
    std::vector<double>& kept = narrowed.x.emplace_back();
    for (int c : varied) kept.push_back(row[c]);
  }
  const std::vector<double> raw =
      options.evaluator == Evaluator::kFanova
          ? Fanova(study, narrowed_params, narrowed, options)
          : PedAnova(study, narrowed_params, narrowed, quantile);
  const double total = std::accumulate(raw.begin(), raw.end(), 0.0);

  ImportanceResult result;
  result.evaluator = options.evaluator;
  result.objective = objective.metric;
  result.trials_considered = rows.considered;
  result.trials_used = static_cast<int>(rows.loss.size());
  for (size_t v = 0; v < varied.size(); ++v) {
    // All zero (no tree split, flat densities): every varied parameter shares equally.
    const double share = total > 0 ? raw[v] / total : 1.0 / varied.size();
    result.importances.push_back({study.params[chosen[varied[v]]].name, share, false});
  }
  for (size_t c = 0; c < chosen.size(); ++c) {
    if (constant[c]) result.importances.push_back({study.params[chosen[c]].name, 0.0, true});
  }
  std::stable_sort(result.importances.begin(), result.importances.end(),
                   [](const ParamImportance& a, const ParamImportance& b) {
                     return a.importance > b.importance;
                   });
  return result;
}

}  // namespace dhpt::analysis
