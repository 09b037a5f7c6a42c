#include "services/optimizer/parego.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "services/optimizer/trial_losses.h"

namespace dhpt::optimizer {
namespace {
constexpr uint64_t kParEgoStream = 0x50415245;  // "PARE"
}  // namespace

ParEgo::ParEgo(SearchSpace space, uint64_t seed, std::vector<bool> minimize,
               BayesianOptions options)
    : space_(space),
      seed_(seed),
      minimize_(std::move(minimize)),
      options_(options),
      scalar_(space, seed, /*minimize=*/true, options) {}

std::vector<double> ParEgo::Weights(size_t trials) const {
  // Uniform on the simplex: normalised exponential draws (a flat Dirichlet).
  std::mt19937_64 generator = SeededGenerator(seed_, kParEgoStream, trials);
  std::vector<double> weights(minimize_.size());
  double total = 0;
  for (double& w : weights) {
    w = -std::log(1.0 - UniformUnit(generator));
    total += w;
  }
  for (double& w : weights) w /= total;
  return weights;
}

std::vector<TrialRecord> ParEgo::Scalarised(const History& history) const {
  const size_t m = minimize_.size();
  std::vector<std::optional<std::vector<double>>> losses;
  std::vector<double> low(m, std::numeric_limits<double>::infinity()), high(m, -low[0]);
  bool any_feasible = false;
  for (const TrialRecord& t : history.trials) {
    losses.push_back(CompletedLosses(t, minimize_));
    if (losses.back() && !(t.violation > 0)) any_feasible = true;
  }
  for (size_t n = 0; n < losses.size(); ++n) {
    if (!losses[n] || (any_feasible && history.trials[n].violation > 0)) continue;
    for (size_t k = 0; k < m; ++k) {
      low[k] = std::min(low[k], (*losses[n])[k]);
      high[k] = std::max(high[k], (*losses[n])[k]);
    }
  }
  const std::vector<double> weights = Weights(history.trials.size());
  std::vector<TrialRecord> scalarised;
  scalarised.reserve(history.trials.size());
  for (size_t n = 0; n < history.trials.size(); ++n) {
    const TrialRecord& t = history.trials[n];
    // Points are copied last, for the trials the model reads: a copy of every point of a large
    // history could outgrow the suggestion's memory budget.
    TrialRecord s{.status = t.status, .violation = t.violation};
    if (losses[n]) {
      double largest = -std::numeric_limits<double>::infinity(), sum = 0;
      for (size_t k = 0; k < m; ++k) {
        const double spread = high[k] - low[k];
        // An infeasible trial may lie outside the feasible range; it is penalised anyway.
        const double f = spread > 0 ? ((*losses[n])[k] - low[k]) / spread : 0.0;
        largest = std::max(largest, weights[k] * f);
        sum += weights[k] * f;
      }
      s.value = largest + kRho * sum;
    } else if (t.status != TrialStatus::kRunning) {
      s.status = TrialStatus::kFailed;
    }
    scalarised.push_back(std::move(s));
  }
  // Bounded cost: past max_fit_points scalarised trials the model keeps the best half (feasible
  // first, then by violation) and the most recent half; the others count as failed.
  std::vector<size_t> modelled;
  for (size_t n = 0; n < scalarised.size(); ++n) {
    if (scalarised[n].value) modelled.push_back(n);
  }
  const size_t limit = static_cast<size_t>(std::max(2, options_.max_fit_points));
  if (modelled.size() > limit) {
    std::vector<size_t> by_rank = modelled;
    auto key = [&](size_t n) {
      const TrialRecord& t = scalarised[n];
      return t.violation > 0 ? std::pair{1.0, t.violation} : std::pair{0.0, *t.value};
    };
    std::stable_sort(by_rank.begin(), by_rank.end(),
                     [&](size_t a, size_t b) { return key(a) < key(b); });
    std::vector<bool> keep(scalarised.size(), false);
    for (size_t k = 0; k < limit / 2; ++k) keep[by_rank[k]] = true;
    for (size_t k = modelled.size(), kept = 0; k-- > 0 && kept < limit - limit / 2;) {
      if (!keep[modelled[k]]) {
        keep[modelled[k]] = true;
        ++kept;
      }
    }
    for (size_t n : modelled) {
      if (!keep[n]) scalarised[n] = {.status = TrialStatus::kFailed};
    }
  }
  // Running trials past the most the model conditions on (BayesianOptimization keeps the most
  // recent) count as failed too. Only the points of the rest are copied.
  const size_t model_limit =
      static_cast<size_t>(std::max(options_.max_model_points, options_.max_fit_points));
  for (size_t n = scalarised.size(), running = 0; n-- > 0;) {
    TrialRecord& s = scalarised[n];
    if (s.status == TrialStatus::kRunning && ++running > model_limit) s.status = TrialStatus::kFailed;
    if (s.status != TrialStatus::kFailed) s.point = history.trials[n].point;
  }
  return scalarised;
}

absl::StatusOr<std::optional<Point>> ParEgo::Suggest(const History& history) {
  const std::vector<TrialRecord> scalarised = Scalarised(history);
  return scalar_.Suggest({scalarised, history.keys});
}

}  // namespace dhpt::optimizer
