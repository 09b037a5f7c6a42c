#include "services/study/early_stopping_defaults.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"
#include "services/study/spec_errors.h"

namespace dhpt::study {
namespace {

struct BudgetParameters {
  std::vector<absl::string_view> names;  // The budget's names, in the trainer's order.
  int64_t default_value;
  int64_t report_every;
};

std::optional<BudgetParameters> BudgetParametersOf(v1::Model::Kind kind) {
  switch (kind) {
    case v1::Model::XGBOOST:
      return BudgetParameters{{"num_boost_round", "n_estimators"}, kDefaultBoostRounds,
                              kTreeProgressEvery};
    case v1::Model::RANDOM_FOREST:
      return BudgetParameters{{"n_estimators", "num_parallel_tree"}, kDefaultForestTrees,
                              kTreeProgressEvery};
    case v1::Model::AUTOENCODER:
      return BudgetParameters{{"epochs"}, kDefaultAutoencoderEpochs, 1};
    default:
      return std::nullopt;
  }
}

// The largest value a parameter can take, where it is numeric.
std::optional<int64_t> LargestValue(const v1::Parameter& parameter) {
  switch (parameter.domain_case()) {
    case v1::Parameter::kIntRange:
      return parameter.int_range().max();
    case v1::Parameter::kDoubleRange:
      return static_cast<int64_t>(std::floor(parameter.double_range().max()));
    case v1::Parameter::kDiscrete: {
      if (parameter.discrete().values().empty()) return std::nullopt;
      const double largest = *std::max_element(parameter.discrete().values().begin(),
                                               parameter.discrete().values().end());
      return static_cast<int64_t>(std::floor(largest));
    }
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<TrainerBudget> TrainerBudgetOf(const v1::StudySpec& spec) {
  const std::optional<BudgetParameters> budget = BudgetParametersOf(spec.model().kind());
  if (!budget) return std::nullopt;
  for (absl::string_view name : budget->names) {
    for (const v1::Parameter& parameter : spec.parameters()) {
      if (parameter.name() != name) continue;
      if (std::optional<int64_t> largest = LargestValue(parameter); largest && *largest >= 1) {
        return TrainerBudget{*largest, budget->report_every, absl::StrCat("parameters.", name)};
      }
    }
    if (auto it = spec.model().fixed().find(std::string(name));
        it != spec.model().fixed().end() && it->second.has_number_value() &&
        it->second.number_value() >= 1) {
      return TrainerBudget{static_cast<int64_t>(it->second.number_value()),
                           budget->report_every, absl::StrCat("model.fixed.", name)};
    }
  }
  return TrainerBudget{budget->default_value, budget->report_every, "the trainer's default"};
}

int64_t DerivedMinResource(int64_t max_resource, int64_t report_every) {
  const int64_t every = std::max<int64_t>(1, report_every);
  const int64_t share = (max_resource + kDerivedMinResourceDivisor - 1) / kDerivedMinResourceDivisor;
  const int64_t rounded = (share + every - 1) / every * every;
  return std::clamp<int64_t>(rounded, every, std::max(every, max_resource));
}

absl::Status FillDerivedResources(v1::StudySpec& spec) {
  v1::EarlyStopping& stopping = *spec.mutable_early_stopping();
  // median/percentile: the optimiser's random start-up trials all complete before anything is
  // judged, so the rule (and its late-crossing guard, which looks at the best completed trial)
  // compares with a sample of the space rather than with the optimiser's first picks; measured
  // on the pruning matrix (docs/early-stopping.md). Other algorithms keep the rule's default.
  v1::PercentileStopping* percentile = stopping.has_median()       ? stopping.mutable_median()
                                       : stopping.has_percentile() ? stopping.mutable_percentile()
                                                                   : nullptr;
  if (percentile != nullptr && !percentile->has_n_startup_trials()) {
    const v1::Algorithm& algorithm = spec.algorithm();
    int startup = 0;
    if (algorithm.name() == v1::Algorithm::TPE) startup = algorithm.tpe().n_startup_trials();
    if (algorithm.name() == v1::Algorithm::BAYESIAN) {
      startup = algorithm.bayesian().n_startup_trials();
    }
    if (startup > kDefaultPercentileStartupTrials) percentile->set_n_startup_trials(startup);
  }
  const std::optional<TrainerBudget> budget = TrainerBudgetOf(spec);
  if (stopping.has_asha() && !stopping.asha().has_min_resource()) {
    stopping.mutable_asha()->set_min_resource(
        budget ? DerivedMinResource(budget->max_resource, budget->report_every) : 1);
  }
  if (stopping.has_hyperband()) {
    v1::HyperbandStopping& hyperband = *stopping.mutable_hyperband();
    if (!hyperband.has_max_resource()) {
      if (!budget) {
        return Invalid("early_stopping.hyperband.max_resource",
                       absl::StrCat("must be set for ", v1::Model::Kind_Name(spec.model().kind()),
                                    " trials: DHPT cannot tell how many steps they report; set "
                                    "it to the last step a full trial reports"));
      }
      hyperband.set_max_resource(budget->max_resource);
    }
    if (!hyperband.has_min_resource()) {
      hyperband.set_min_resource(
          DerivedMinResource(hyperband.max_resource(), budget ? budget->report_every : 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace dhpt::study
