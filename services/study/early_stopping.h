#pragma once

// Early-stopping rules (docs/early-stopping.md). A rule looks at what a running trial has
// reported so far and at the other trials of its study, and says whether to stop it now. Decisions are pure
// functions of those curves, which the store keeps, so a restarted scheduler decides alike.
//
// Values are the study's objective measured on the validation split after `step` units of
// training (boosting rounds, trees, epochs); `maximize` says which way is better.

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "absl/types/span.h"

namespace dhpt::study {

struct IntermediateValue {
  int64_t step = 0;
  double value = 0;
};

// What one trial has reported, in increasing steps.
struct TrialCurve {
  std::vector<IntermediateValue> values;
  // Completed: its curve is whole. Running trials count only where a rule says so (ASHA rungs).
  bool completed = false;
};

// Optuna's PercentilePruner semantics (MedianPruner is percentile 50): once n_startup_trials
// have completed and the trial is past n_warmup_steps, at the first report of each
// interval_steps interval, stop the trial if the best value it reached so far is worse than
// the percentile of the completed trials' values at the same step. Where a completed trial
// reported no value at that step, its last one before it counts (Optuna would leave it out:
// steps line up in one process, not across workers that send a report per 100 ms at most).
struct PercentileRule {
  double percentile = 50;  // 0 (keep only the best) to 100 (stop only the worst).
  int n_startup_trials = 5;
  int64_t n_warmup_steps = 0;
  int64_t interval_steps = 1;
};

// Asynchronous successive halving: rung k is reached at step
// min_resource * reduction_factor^(min_early_stopping_rate + k). When a trial first reports
// at or past a rung, it goes on only if its value there is in the best 1/reduction_factor of
// the values every trial (running or finished) reported there; no trial waits for others.
// While fewer than reduction_factor trials have reached a rung, only the best goes on.
struct AshaRule {
  int64_t min_resource = 1;
  int reduction_factor = 4;
  int min_early_stopping_rate = 0;
};

using EarlyStoppingRule = std::variant<std::monostate, PercentileRule, AshaRule>;

// The largest progress step (2^53: exact as a double, which is how a trial's pruned_step is kept).
inline constexpr int64_t kMaxProgressStep = int64_t{1} << 53;

// Whether a progress report is one to keep and judge, after a last one at `last_step` (nullopt:
// none yet): a measured value (not NaN) at a step in [0, kMaxProgressStep] past the last one.
// The scheduler and sequential runs both filter with it, and the scheduler stores only what it
// judges, so that a restart, judging the stored curves, decides alike.
bool IsJudgedReport(std::optional<int64_t> last_step, int64_t step, double value);

// Whether `trial` should stop now, at its latest report. `others`: every other trial of the
// study.
bool ShouldStop(const EarlyStoppingRule& rule, bool maximize, const TrialCurve& trial,
                absl::Span<const TrialCurve* const> others);

}  // namespace dhpt::study
