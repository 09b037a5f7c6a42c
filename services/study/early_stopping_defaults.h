#pragma once

// What early stopping's resources default to when a study leaves them unset: derived from how
// long its trainer trains (docs/early-stopping.md#defaults-derived-from-the-trainers-budget), so
// that `asha: {}` and `hyperband: {}` judge trials after a grace period rather than at step 1.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// The first rung is this share of the longest run (1/27: three factors of 3 below it, so
// Hyperband's default reduction factor gives it 3 or 4 brackets), rounded up to a whole report
// interval. Step 1 judges a boosted model after one round, where nothing says which will win.
inline constexpr int64_t kDerivedMinResourceDivisor = 27;
inline constexpr int kDefaultHyperbandReductionFactor = 3;
// median/percentile's n_startup_trials where nothing larger is derived: under TPE and BAYESIAN
// it is their random start-up trials (10 by default) when that is more.
inline constexpr int kDefaultPercentileStartupTrials = 5;

// How long a trial of the study trains, in the steps its trainer reports progress at: the
// largest value of its budget parameter (XGBoost: num_boost_round or n_estimators rounds;
// Random Forest: n_estimators or num_parallel_tree trees; AutoEncoder: epochs), searched (the
// top of its range) or fixed, else the trainer's default. nullopt for kinds whose steps DHPT
// does not know (user code).
struct TrainerBudget {
  int64_t max_resource = 0;
  int64_t report_every = 1;  // Steps between two progress reports.
  std::string source;        // Where it came from, for messages: "model.fixed.epochs", ...
};
std::optional<TrainerBudget> TrainerBudgetOf(const v1::StudySpec& spec);

// max_resource / kDerivedMinResourceDivisor rounded up to a multiple of report_every, at least
// report_every and at most max_resource.
int64_t DerivedMinResource(int64_t max_resource, int64_t report_every);

// Fills the unset resources of an `asha` or `hyperband` rule from TrainerBudgetOf (ASHA's
// min_resource stays 1 where the budget is unknown; Hyperband then needs max_resource set), and
// an unset n_startup_trials of `median` or `percentile` from the optimiser's random start-up
// trials where those are more than kDefaultPercentileStartupTrials. Call it after the
// algorithm's settings have their defaults.
absl::Status FillDerivedResources(v1::StudySpec& spec);

}  // namespace dhpt::study
