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
  // The trial's number in its study (0, 1, ...): Hyperband's bracket is a function of it.
  int64_t number = 0;
};

// Optuna's PercentilePruner semantics (MedianPruner is percentile 50): once n_startup_trials
// have completed and the trial is past n_warmup_steps, at the first report of each
// interval_steps interval, stop the trial if the best value it reached so far is worse than
// the percentile of the completed trials' values at the same step. Where a completed trial
// reported no value at that step, its last one before it counts (Optuna would leave it out:
// steps line up in one process, not across workers that send a report per 100 ms at most).
// Unlike Optuna, a step at which the rule would stop the study's best completed trial (the one
// with the best last value) is not judged: there the curves still cross, so the step is too
// early to judge on this data (docs/early-stopping.md, the late-crossing guard). Nor is a trial
// stopped whose recent rate of improvement, kept up to the end of the longest completed curve,
// would reach the best completed trial's final value (the catch-up guard: a slow starter still
// climbing steeply).
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

// Hyperband (Li et al., 2018) run asynchronously, as Optuna's HyperbandPruner: brackets
// b = 0 .. n-1 with n = floor(log_eta(max_resource / min_resource)) + 1, bracket b being ASHA
// with min_early_stopping_rate b, judged among the trials of its own bracket only. Bracket b
// (the paper's s = n - 1 - b) gets ceil(n * eta^s / (s + 1)) shares of the trials, the paper's
// n for that bracket; a trial's bracket is HyperbandBracketOf its number and `seed`, so it is
// known before the trial runs (its optimiser learns from that bracket's trials) and decided
// alike after a restart. Rungs at or past max_resource are not judged: a trial there is done.
struct HyperbandRule {
  int64_t min_resource = 1;
  int64_t max_resource = 81;
  int reduction_factor = 3;
  uint64_t seed = 0;  // The study's algorithm seed.
};

// One bracket of successive halving, as the paper's Table 1 lists it: rung i trains
// `trials[i]` configurations (n_i = floor(n * eta^-i)) for `resources[i]` steps each
// (r_i = min_resource * eta^(b + i), up to max_resource).
struct HyperbandBracket {
  int min_early_stopping_rate = 0;  // b
  int64_t budget = 0;               // n: this bracket's share of the trials
  std::vector<int64_t> resources;
  std::vector<int64_t> trials;
};
std::vector<HyperbandBracket> HyperbandBrackets(const HyperbandRule& rule);
// The bracket of trial `number`: a hash of (number, seed) modulo the sum of the budgets, walked
// through the brackets in order, as Optuna's HyperbandPruner does with its study-name hash.
int HyperbandBracketOf(const HyperbandRule& rule, int64_t number);

using EarlyStoppingRule = std::variant<std::monostate, PercentileRule, AshaRule, HyperbandRule>;

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

// Which of trials 0 .. next_number - 1 an optimiser learns from for the suggestion of trial
// `next_number` (optimizer::History::learn_from): under Hyperband those of its bracket, whose
// pruned trials stopped at the bracket's rungs, so their last values compare (Optuna's TPE
// learns from the bracket's trials only; History also takes every completed trial, whose value
// is the full objective in any bracket). nullopt: every trial.
std::optional<std::vector<bool>> LearningFilter(const EarlyStoppingRule& rule,
                                                int64_t next_number);

// A pruned trial `within reach` of the best: at the step it was stopped, its value was at least
// as good as the best completed trial's at that step (its last value before it). Such a trial
// might have become the best had it run on; many of them say the rule is too aggressive.
bool WithinReachOfBest(bool maximize, const TrialCurve& pruned, const TrialCurve& best);

// What the rules read of a trial that will report no more and did not complete (pruned,
// failed, cancelled), as one of ShouldStop's `others` or WithinReachOfBest's `pruned`: its last
// value (within reach; the percentile rules read only completed trials) and, under ASHA and
// Hyperband, the first value at or past each rung its bracket judges (the only place ASHA reads
// another trial). ShouldStop and WithinReachOfBest answer alike with these points in place of
// the whole curve, so the scheduler keeps only these (a few numbers per trial: the rungs grow
// geometrically) and the store keeps the whole curve for users.
TrialCurve JudgedPoints(const EarlyStoppingRule& rule, const TrialCurve& curve);

}  // namespace dhpt::study
