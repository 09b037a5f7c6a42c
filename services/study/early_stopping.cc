#include "services/study/early_stopping.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace dhpt::study {
namespace {

bool Better(double a, double b, bool maximize) { return maximize ? a > b : a < b; }

// What a curve showed at `step`: the value reported there or, where it reported no value
// at that step, the last one before it (workers send at most one report per 100 ms, so two
// trials' steps need not line up).
std::optional<double> ValueAsOf(const TrialCurve& curve, int64_t step) {
  auto it = std::upper_bound(
      curve.values.begin(), curve.values.end(), step,
      [](int64_t s, const IntermediateValue& value) { return s < value.step; });
  if (it == curve.values.begin()) return std::nullopt;
  return std::prev(it)->value;
}

// The first value reported at or past `step`: what the curve shows at a rung.
std::optional<double> ValueReaching(const TrialCurve& curve, int64_t step) {
  auto it = std::lower_bound(
      curve.values.begin(), curve.values.end(), step,
      [](const IntermediateValue& value, int64_t s) { return value.step < s; });
  if (it == curve.values.end()) return std::nullopt;
  return it->value;
}

// The best value a curve had reached by `step` (NaN reports skipped); nullopt before its first.
std::optional<double> BestAsOf(const TrialCurve& curve, int64_t step, bool maximize) {
  std::optional<double> best;
  for (const IntermediateValue& value : curve.values) {
    if (value.step > step) break;
    if (!std::isnan(value.value) && (!best || Better(value.value, *best, maximize))) {
      best = value.value;
    }
  }
  return best;
}

// The q-th percentile (0 to 100) with linear interpolation between ranks, as numpy computes it.
double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = std::clamp(q, 0.0, 100.0) / 100 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = static_cast<size_t>(std::ceil(position));
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

// How many reports back the catch-up guard measures a trial's climb: two (20 rounds or trees of
// DHPT's trainers) follow the recent trend without one noisy report deciding; one at a trial's
// second report. Chosen offline (bench/pruning_replay.py, docs/early-stopping.md).
constexpr size_t kCatchUpReports = 2;

// Whether `trial`, projected on from its latest report at its recent rate of improvement
// (over kCatchUpReports reports) to step `end`, would reach `target`. Optimistic on purpose:
// curves flatten, so the projection overstates where a trial ends, and one it leaves short is
// unlikely to catch up. A small learning rate starts last and ends first (XGBoost on
// diabetes); its steep early climb is what tells it from a trial that has settled low.
bool CouldStillCatchUp(const TrialCurve& trial, double target, int64_t end, bool maximize) {
  const size_t n = trial.values.size();
  if (n < 2) return false;
  const IntermediateValue& latest = trial.values.back();
  const IntermediateValue& back = trial.values[n - 1 - std::min(n - 1, kCatchUpReports)];
  if (std::isnan(latest.value) || std::isnan(back.value) || end <= latest.step) return false;
  const double gain = maximize ? latest.value - back.value : back.value - latest.value;
  if (!(gain > 0)) return false;
  const double per_step = gain / static_cast<double>(latest.step - back.step);
  const double left = static_cast<double>(end - latest.step);
  const double projected = maximize ? latest.value + per_step * left : latest.value - per_step * left;
  return !Better(target, projected, maximize);
}

bool StopByPercentile(const PercentileRule& rule, bool maximize, const TrialCurve& trial,
                      absl::Span<const TrialCurve* const> others) {
  const IntermediateValue& latest = trial.values.back();
  const int completed = static_cast<int>(
      std::count_if(others.begin(), others.end(), [](const TrialCurve* c) { return c->completed; }));
  if (completed < rule.n_startup_trials || latest.step < rule.n_warmup_steps) return false;
  // Judged once per interval, at the first report in it (reports need not fall on its start).
  const int64_t interval = std::max<int64_t>(1, rule.interval_steps);
  if (trial.values.size() >= 2) {
    const int64_t previous = trial.values[trial.values.size() - 2].step;
    if (previous >= rule.n_warmup_steps &&
        (previous - rule.n_warmup_steps) / interval == (latest.step - rule.n_warmup_steps) / interval) {
      return false;
    }
  }
  std::optional<double> best;
  for (const IntermediateValue& value : trial.values) {
    if (!std::isnan(value.value) && (!best || Better(value.value, *best, maximize))) {
      best = value.value;
    }
  }
  if (!best) return true;  // Nothing but NaN: it is not learning anything.
  std::vector<double> at_step;
  for (const TrialCurve* other : others) {
    if (!other->completed) continue;
    if (std::optional<double> value = ValueAsOf(*other, latest.step); value && !std::isnan(*value)) {
      at_step.push_back(*value);
    }
  }
  if (at_step.empty()) return false;
  const double threshold = Percentile(std::move(at_step), maximize ? 100 - rule.percentile
                                                                    : rule.percentile);
  if (!Better(threshold, *best, maximize)) return false;
  // The late-crossing guard: where the rule would have stopped the study's best completed trial
  // at this step, this step is too early to judge on this data (curves still cross here: a
  // small learning rate starts last and ends first), so the trial goes on.
  const TrialCurve* best_completed = nullptr;
  std::optional<double> best_final;
  for (const TrialCurve* other : others) {
    if (!other->completed || other->values.empty() || std::isnan(other->values.back().value)) {
      continue;
    }
    if (!best_final || Better(other->values.back().value, *best_final, maximize)) {
      best_final = other->values.back().value;
      best_completed = other;
    }
  }
  if (best_completed != nullptr) {
    if (std::optional<double> its_best = BestAsOf(*best_completed, latest.step, maximize);
        its_best && Better(threshold, *its_best, maximize)) {
      return false;
    }
    // The catch-up guard: a trial still climbing fast enough to reach the best completed
    // trial's final value by the end of the longest completed curve goes on.
    int64_t end = 0;
    for (const TrialCurve* other : others) {
      if (other->completed && !other->values.empty()) {
        end = std::max(end, other->values.back().step);
      }
    }
    if (CouldStillCatchUp(trial, *best_final, end, maximize)) return false;
  }
  return true;
}

// Rung k's step, or nullopt past what int64 holds.
std::optional<int64_t> RungStep(const AshaRule& rule, int k) {
  double step = static_cast<double>(std::max<int64_t>(1, rule.min_resource)) *
                std::pow(std::max(2, rule.reduction_factor), rule.min_early_stopping_rate + k);
  if (step > static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) return std::nullopt;
  return static_cast<int64_t>(step);
}

// `end`: rungs at or past it are not judged (Hyperband's max_resource).
bool StopByAsha(const AshaRule& rule, bool maximize, const TrialCurve& trial,
                absl::Span<const TrialCurve* const> others,
                int64_t end = std::numeric_limits<int64_t>::max()) {
  const int64_t latest = trial.values.back().step;
  const int64_t previous = trial.values.size() >= 2 ? trial.values[trial.values.size() - 2].step
                                                    : std::numeric_limits<int64_t>::min();
  const int factor = std::max(2, rule.reduction_factor);
  // Every rung this report reached first (sparse reports may pass several at once).
  for (int k = 0;; ++k) {
    const std::optional<int64_t> rung = RungStep(rule, k);
    if (!rung || *rung > latest || *rung >= end) return false;
    if (*rung <= previous) continue;
    const double value = *ValueReaching(trial, *rung);
    if (std::isnan(value)) return true;
    std::vector<double> competing = {value};
    for (const TrialCurve* other : others) {
      if (std::optional<double> reached = ValueReaching(*other, *rung);
          reached && !std::isnan(*reached)) {
        competing.push_back(*reached);
      }
    }
    // The best 1/factor go on; while fewer than `factor` have reached the rung, only the best.
    const size_t keep = std::max<size_t>(1, competing.size() / static_cast<size_t>(factor));
    std::sort(competing.begin(), competing.end(),
              [maximize](double a, double b) { return Better(a, b, maximize); });
    if (Better(competing[keep - 1], value, maximize)) return true;
  }
}

// splitmix64's finaliser: a fixed, well-mixed hash, the same on every machine and release.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The bracket of trial `number` among `brackets` (HyperbandBrackets of the rule).
int BracketOf(absl::Span<const HyperbandBracket> brackets, uint64_t seed, int64_t number) {
  int64_t total = 0;
  for (const HyperbandBracket& bracket : brackets) total += bracket.budget;
  int64_t n = static_cast<int64_t>(Mix(static_cast<uint64_t>(number) ^ Mix(seed)) %
                                   static_cast<uint64_t>(total));
  for (const HyperbandBracket& bracket : brackets) {
    n -= bracket.budget;
    if (n < 0) return bracket.min_early_stopping_rate;
  }
  return 0;  // Unreachable: n < total.
}

bool StopByHyperband(const HyperbandRule& rule, bool maximize, const TrialCurve& trial,
                     absl::Span<const TrialCurve* const> others) {
  const std::vector<HyperbandBracket> brackets = HyperbandBrackets(rule);
  const int bracket = BracketOf(brackets, rule.seed, trial.number);
  std::vector<const TrialCurve*> same;
  for (const TrialCurve* other : others) {
    if (BracketOf(brackets, rule.seed, other->number) == bracket) same.push_back(other);
  }
  const AshaRule asha{.min_resource = rule.min_resource,
                      .reduction_factor = rule.reduction_factor,
                      .min_early_stopping_rate = bracket};
  return StopByAsha(asha, maximize, trial, same, rule.max_resource);
}

}  // namespace

std::vector<HyperbandBracket> HyperbandBrackets(const HyperbandRule& rule) {
  const int64_t eta = std::max(2, rule.reduction_factor);
  const int64_t min_resource = std::max<int64_t>(1, rule.min_resource);
  // n = floor(log_eta(max / min)) + 1, in integers: the largest n with min * eta^(n-1) <= max.
  int n = 1;
  for (int64_t r = min_resource; r <= rule.max_resource / eta; r *= eta) ++n;
  std::vector<HyperbandBracket> brackets(static_cast<size_t>(n));
  for (int b = 0; b < n; ++b) {
    HyperbandBracket& bracket = brackets[static_cast<size_t>(b)];
    const int s = n - 1 - b;
    int64_t eta_s = 1;
    for (int i = 0; i < s; ++i) eta_s *= eta;
    bracket.min_early_stopping_rate = b;
    bracket.budget = (int64_t{n} * eta_s + s) / (s + 1);  // ceil(n * eta^s / (s + 1))
    int64_t resource = min_resource;
    for (int i = 0; i < b; ++i) resource *= eta;
    for (int64_t trials = bracket.budget; resource <= rule.max_resource;
         resource *= eta, trials /= eta) {
      bracket.resources.push_back(resource);
      bracket.trials.push_back(trials);
    }
  }
  return brackets;
}

int HyperbandBracketOf(const HyperbandRule& rule, int64_t number) {
  return BracketOf(HyperbandBrackets(rule), rule.seed, number);
}

std::optional<std::vector<bool>> LearningFilter(const EarlyStoppingRule& rule,
                                                int64_t next_number) {
  const auto* hyperband = std::get_if<HyperbandRule>(&rule);
  if (hyperband == nullptr) return std::nullopt;
  const std::vector<HyperbandBracket> brackets = HyperbandBrackets(*hyperband);
  const int bracket = BracketOf(brackets, hyperband->seed, next_number);
  std::vector<bool> learn(static_cast<size_t>(std::max<int64_t>(0, next_number)));
  for (size_t t = 0; t < learn.size(); ++t) {
    learn[t] = BracketOf(brackets, hyperband->seed, static_cast<int64_t>(t)) == bracket;
  }
  return learn;
}

bool WithinReachOfBest(bool maximize, const TrialCurve& pruned, const TrialCurve& best) {
  if (pruned.values.empty()) return false;
  const IntermediateValue& last = pruned.values.back();
  const std::optional<double> best_then = ValueAsOf(best, last.step);
  return best_then && !Better(*best_then, last.value, maximize);
}

TrialCurve JudgedPoints(const EarlyStoppingRule& rule, const TrialCurve& curve) {
  TrialCurve kept{.values = {}, .completed = curve.completed, .number = curve.number};
  if (curve.values.empty()) return kept;
  const int64_t last = curve.values.back().step;
  // The rungs as StopByAsha walks them: ASHA's, or those of the trial's Hyperband bracket below
  // max_resource.
  std::optional<AshaRule> asha;
  int64_t end = std::numeric_limits<int64_t>::max();
  if (const auto* a = std::get_if<AshaRule>(&rule)) asha = *a;
  if (const auto* hyperband = std::get_if<HyperbandRule>(&rule)) {
    asha = AshaRule{.min_resource = hyperband->min_resource,
                    .reduction_factor = hyperband->reduction_factor,
                    .min_early_stopping_rate = HyperbandBracketOf(*hyperband, curve.number)};
    end = hyperband->max_resource;
  }
  for (int k = 0; asha; ++k) {
    const std::optional<int64_t> rung = RungStep(*asha, k);
    if (!rung || *rung > last || *rung >= end) break;
    // ValueReaching's point: the same for this rung in the kept points, as none lies between.
    auto it = std::lower_bound(
        curve.values.begin(), curve.values.end(), *rung,
        [](const IntermediateValue& value, int64_t s) { return value.step < s; });
    if (kept.values.empty() || kept.values.back().step < it->step) kept.values.push_back(*it);
  }
  if (kept.values.empty() || kept.values.back().step < last) kept.values.push_back(curve.values.back());
  return kept;
}

bool IsJudgedReport(std::optional<int64_t> last_step, int64_t step, double value) {
  return !std::isnan(value) && step >= 0 && step <= kMaxProgressStep &&
         (!last_step || step > *last_step);
}

bool ShouldStop(const EarlyStoppingRule& rule, bool maximize, const TrialCurve& trial,
                absl::Span<const TrialCurve* const> others) {
  if (trial.values.empty()) return false;
  if (const auto* percentile = std::get_if<PercentileRule>(&rule)) {
    return StopByPercentile(*percentile, maximize, trial, others);
  }
  if (const auto* asha = std::get_if<AshaRule>(&rule)) {
    return StopByAsha(*asha, maximize, trial, others);
  }
  if (const auto* hyperband = std::get_if<HyperbandRule>(&rule)) {
    return StopByHyperband(*hyperband, maximize, trial, others);
  }
  return false;
}

}  // namespace dhpt::study
