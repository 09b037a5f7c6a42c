#include "services/optimizer/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "services/optimizer/parzen_estimator.h"

namespace dhpt::optimizer {
namespace {

constexpr uint64_t kTpeStream = 0x54504531;  // "TPE1"
constexpr double kInfiniteLoss = std::numeric_limits<double>::infinity();

struct Observation {
  std::vector<double> internal;  // Every dimension.
  double loss;
  size_t number;
};

// Observations of the dimensions `dims` and their weights.
std::pair<std::vector<std::vector<double>>, std::vector<double>> Project(
    const std::vector<const Observation*>& group, const std::vector<int>& dims) {
  std::vector<std::vector<double>> values;
  for (const Observation* o : group) {
    std::vector<double> v;
    for (int d : dims) v.push_back(o->internal[d]);
    values.push_back(std::move(v));
  }
  return {values, TpeObservationWeights(static_cast<int>(group.size()))};
}

}  // namespace

TpeSearch::TpeSearch(SearchSpace space, uint64_t seed, bool minimize, TpeOptions options)
    : space_(space), seed_(seed), minimize_(minimize), options_(options), random_(space, seed) {}

absl::StatusOr<std::optional<Point>> TpeSearch::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;

  std::vector<Observation> observations;
  int completed = 0;
  for (size_t n = 0; n < history.trials.size(); ++n) {
    const TrialRecord& trial = history.trials[n];
    double loss;
    if (trial.status == TrialStatus::kCompleted && trial.value) {
      loss = minimize_ ? *trial.value : -*trial.value;
      ++completed;
    } else if (trial.status == TrialStatus::kFailed ||
               (trial.status == TrialStatus::kRunning && options_.constant_liar)) {
      loss = kInfiniteLoss;
    } else {
      continue;
    }
    Observation o{{}, loss, n};
    for (int i = 0; i < space_.dims(); ++i) o.internal.push_back(space_.ToInternal(i, trial.point[i]));
    observations.push_back(std::move(o));
  }
  if (completed < options_.n_startup_trials) return random_.Suggest(history);

  // Split into the best few ("below") and the rest, each kept in trial order.
  std::vector<const Observation*> ranked;
  for (const Observation& o : observations) ranked.push_back(&o);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Observation* a, const Observation* b) { return a->loss < b->loss; });
  const int n_below = std::min(
      {static_cast<int>(std::ceil(0.1 * static_cast<double>(ranked.size()))), 25, completed});
  std::vector<const Observation*> below(ranked.begin(), ranked.begin() + n_below);
  std::vector<const Observation*> above(ranked.begin() + n_below, ranked.end());
  auto by_number = [](const Observation* a, const Observation* b) { return a->number < b->number; };
  std::sort(below.begin(), below.end(), by_number);
  std::sort(above.begin(), above.end(), by_number);

  std::mt19937_64 generator = SeededGenerator(seed_, kTpeStream, history.trials.size());
  const ParzenOptions parzen{.prior_weight = options_.prior_weight,
                             .multivariate = options_.multivariate,
                             .bandwidth_weighted = options_.bandwidth_weighted};
  // Groups of dimensions modelled jointly: all at once, or each alone.
  std::vector<std::vector<int>> groups;
  if (options_.multivariate) {
    groups.emplace_back(space_.dims());
    std::iota(groups[0].begin(), groups[0].end(), 0);
  } else {
    for (int i = 0; i < space_.dims(); ++i) groups.push_back({i});
  }
  // Candidates per group, best first by log l - log g.
  std::vector<std::vector<std::vector<double>>> ranked_candidates;
  for (const std::vector<int>& dims : groups) {
    auto [below_values, below_weights] = Project(below, dims);
    auto [above_values, above_weights] = Project(above, dims);
    const ParzenEstimator l(space_, dims, below_values, below_weights, parzen);
    const ParzenEstimator g(space_, dims, above_values, above_weights, parzen);
    std::vector<std::pair<double, std::vector<double>>> scored;
    for (int c = 0; c < options_.n_ei_candidates; ++c) {
      std::vector<double> x = l.Sample(generator);
      const double score = l.LogPdf(x) - g.LogPdf(x);
      scored.emplace_back(score, std::move(x));
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::vector<double>> ordered;
    for (auto& [score, x] : scored) ordered.push_back(std::move(x));
    ranked_candidates.push_back(std::move(ordered));
  }

  // The best candidate of every group; on a duplicate, step down the ranking of one group at a
  // time (round-robin) until the point is new.
  std::vector<size_t> pick(groups.size(), 0);
  for (int attempt = 0; attempt < options_.n_ei_candidates * static_cast<int>(groups.size());
       ++attempt) {
    Point point(static_cast<size_t>(space_.dims()));
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::vector<double>& x = ranked_candidates[g][pick[g]];
      for (size_t j = 0; j < groups[g].size(); ++j) {
        point[groups[g][j]] = space_.FromInternal(groups[g][j], x[j]);
      }
    }
    if (!history.keys.contains(space_.Key(point))) return point;
    size_t& next = pick[attempt % groups.size()];
    next = std::min(next + 1, ranked_candidates[attempt % groups.size()].size() - 1);
  }
  return random_.Suggest(history);
}

}  // namespace dhpt::optimizer
