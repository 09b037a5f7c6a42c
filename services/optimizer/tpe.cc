#include "services/optimizer/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "services/optimizer/motpe.h"
#include "services/optimizer/parzen_estimator.h"

namespace dhpt::optimizer {
namespace {

constexpr uint64_t kTpeStream = 0x54504531;  // "TPE1"
constexpr double kInfiniteLoss = std::numeric_limits<double>::infinity();
// An inactive parameter's internal value: compares equal to itself (unlike NaN), so the sorted
// columns can tell a history that extends the last one, and sorts after every value.
constexpr double kInactive = std::numeric_limits<double>::infinity();

// The values of dimensions `dims` of the trials `group`, row after row.
std::vector<double> Project(const std::vector<double>& internal, int stride,
                            const std::vector<int>& group, const std::vector<int>& dims) {
  std::vector<double> values;
  values.reserve(group.size() * dims.size());
  for (int trial : group) {
    const double* row = &internal[static_cast<size_t>(trial) * stride];
    for (int d : dims) values.push_back(row[d]);
  }
  return values;
}

// The components of `group` (its positions, in trial order) sorted by the value of dimension
// `dim`, from that dimension's sorted trials; `position[t]` is trial t's place in the group
// or -1.
std::vector<int> SortedComponents(const std::vector<int>& sorted_trials,
                                  const std::vector<int>& position) {
  std::vector<int> components;
  for (int trial : sorted_trials) {
    if (position[trial] >= 0) components.push_back(position[trial]);
  }
  return components;
}

}  // namespace

TpeSearch::TpeSearch(SearchSpace space, uint64_t seed, bool minimize, TpeOptions options,
                     std::vector<bool> objectives_minimize)
    : space_(space), seed_(seed), minimize_(minimize), options_(options),
      objectives_minimize_(std::move(objectives_minimize)), random_(space, seed) {}

void TpeSearch::UpdateSortedColumns(const std::vector<double>& internal) {
  const size_t dims = static_cast<size_t>(space_.dims());
  const size_t seen = columns_.internal.size();
  const bool extends = seen <= internal.size() && !columns_.order.empty() &&
                       std::equal(columns_.internal.begin(), columns_.internal.end(), internal.begin());
  const int first_new = extends ? static_cast<int>(seen / dims) : 0;
  if (!extends) columns_.order.assign(dims, {});
  const int trials = static_cast<int>(internal.size() / dims);
  for (size_t d = 0; d < dims; ++d) {
    auto before = [&](int a, int b) {
      const double va = internal[a * dims + d], vb = internal[b * dims + d];
      return va < vb || (va == vb && a < b);
    };
    std::vector<int>& order = columns_.order[d];
    const size_t old_size = order.size();
    for (int t = first_new; t < trials; ++t) order.push_back(t);
    std::sort(order.begin() + old_size, order.end(), before);
    std::inplace_merge(order.begin(), order.begin() + old_size, order.end(), before);
  }
  columns_.internal = internal;
}

std::optional<TpeSearch::Rank> TpeSearch::RankOf(const TrialRecord& trial) const {
  auto loss = [this](double value) {
    if (std::isnan(value)) return kInfiniteLoss;
    return minimize_ ? value : -value;
  };
  switch (trial.status) {
    case TrialStatus::kCompleted:
      if (!trial.value) return std::nullopt;
      if (trial.violation > 0) return Rank{2, trial.violation};
      return Rank{-kInfiniteLoss, loss(*trial.value)};
    case TrialStatus::kPruned:
      // Further is better; at the same step, the better last value.
      if (!trial.value) return Rank{1, 0};
      return Rank{-static_cast<double>(trial.last_step), loss(*trial.value)};
    case TrialStatus::kFailed:
      return Rank{kInfiniteLoss, kInfiniteLoss};
    case TrialStatus::kRunning:
      if (!options_.constant_liar) return std::nullopt;
      return Rank{kInfiniteLoss, kInfiniteLoss};
  }
  return std::nullopt;
}

std::optional<TpeSearch::Split> TpeSearch::SplitTrials(const History& history) const {
  if (objectives_minimize_.size() >= 2) {
    std::optional<MotpeSplit> split = SplitMultiObjective(
        history, objectives_minimize_, options_.n_startup_trials, options_.constant_liar);
    if (!split) return std::nullopt;
    return Split{std::move(split->below), std::move(split->above),
                 std::move(split->below_weights)};
  }
  std::vector<int> observed;      // The trials with a rank, in trial order,
  std::vector<Rank> ranks;        // and their ranks.
  int finished = 0;               // Completed or pruned: the trials with a finite rank.
  for (size_t t = 0; t < history.trials.size(); ++t) {
    if (!history.LearnsFrom(t)) continue;
    const std::optional<Rank> rank = RankOf(history.trials[t]);
    if (!rank) continue;
    if (rank->tier < kInfiniteLoss) ++finished;
    observed.push_back(static_cast<int>(t));
    ranks.push_back(*rank);
  }
  if (finished < options_.n_startup_trials) return std::nullopt;

  std::vector<int> ranked(observed.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) { return ranks[a] < ranks[b]; });
  const int n_below = std::min(
      {static_cast<int>(std::ceil(0.1 * static_cast<double>(finished))), 25, finished});
  Split split;
  for (int r = 0; r < static_cast<int>(ranked.size()); ++r) {
    (r < n_below ? split.below : split.above).push_back(observed[ranked[r]]);
  }
  std::sort(split.below.begin(), split.below.end());
  std::sort(split.above.begin(), split.above.end());
  return split;
}

absl::StatusOr<std::optional<Point>> TpeSearch::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;
  const std::optional<Split> split = SplitTrials(history);
  if (!split) return random_.Suggest(history);
  const std::vector<int>& below = split->below;
  const std::vector<int>& above = split->above;
  const int n_below = static_cast<int>(below.size());

  const int dims = space_.dims();
  std::vector<double> internal;  // Every trial, row after row; kInactive where inactive.
  internal.reserve(history.trials.size() * static_cast<size_t>(dims));
  for (const TrialRecord& trial : history.trials) {
    for (int i = 0; i < dims; ++i) {
      internal.push_back(std::holds_alternative<Inactive>(trial.point[i])
                             ? kInactive
                             : space_.ToInternal(i, trial.point[i]));
    }
  }
  auto value_at = [&](int trial, int dim) { return internal[static_cast<size_t>(trial) * dims + dim]; };
  if (!options_.multivariate) UpdateSortedColumns(internal);
  const std::vector<double> below_trial_weights =
      split->below_weights.empty() ? TpeObservationWeights(n_below) : split->below_weights;
  // Shared by every group of dimensions active in every trial.
  const MixtureWeights below_weights(below_trial_weights, options_.prior_weight);
  const MixtureWeights above_weights(TpeObservationWeights(static_cast<int>(above.size())),
                                     options_.prior_weight);

  std::mt19937_64 generator = SeededGenerator(seed_, kTpeStream, history.trials.size());
  const ParzenOptions parzen{.prior_weight = options_.prior_weight,
                             .multivariate = options_.multivariate,
                             .bandwidth_weighted = options_.bandwidth_weighted};
  // Groups of dimensions modelled jointly: all at once, or each alone. In a conditional space
  // the multivariate groups are the parameters always active together: the unconditional ones,
  // and the children of one parent under the same parent values (a branch), as Optuna's
  // group=True decomposes the space into the sets of parameters that appear together. Groups
  // follow space_.order(), parents before children, for condition_on_parent.
  std::vector<std::vector<int>> groups;
  if (options_.multivariate) {
    const std::vector<ParameterSpec>& parameters = space_.parameters();
    for (int i : space_.order()) {
      auto same_branch = [&](const std::vector<int>& group) {
        const ParameterSpec& first = parameters[group[0]];
        return first.parent == parameters[i].parent &&
               first.active_values == parameters[i].active_values;
      };
      auto it = std::find_if(groups.begin(), groups.end(), same_branch);
      if (it == groups.end()) {
        groups.push_back({i});
      } else {
        it->push_back(i);
      }
    }
    for (std::vector<int>& group : groups) std::sort(group.begin(), group.end());
  } else {
    for (int i : space_.order()) groups.push_back({i});
  }
  // The best candidate's internal value of every dimension ranked so far.
  std::vector<double> chosen(static_cast<size_t>(dims), kInactive);
  // Candidates per group, best first by log l - log g.
  std::vector<std::vector<std::vector<double>>> ranked_candidates;
  for (const std::vector<int>& group : groups) {
    const bool alone = group.size() == 1;
    const bool sorted = !options_.multivariate;
    // Conditional parameters learn from the trials where they were active (Optuna's TPE fits
    // each parameter's densities to those trials); with condition_on_parent, only from those
    // whose parent took the value just chosen for it. A group shares its parent.
    const int d = group[0];
    const int parent = space_.parameters()[d].parent;
    std::optional<double> parent_value;
    if (parent >= 0 && options_.condition_on_parent && chosen[parent] != kInactive) {
      parent_value = chosen[parent];
    }
    auto keep = [&](int trial) {
      if (parent < 0) return true;
      if (value_at(trial, d) == kInactive) return false;
      return !parent_value || value_at(trial, parent) == *parent_value;
    };
    std::vector<int> group_below, group_above;
    std::vector<double> group_below_weights;
    for (size_t k = 0; k < below.size(); ++k) {
      if (!keep(below[k])) continue;
      group_below.push_back(below[k]);
      group_below_weights.push_back(below_trial_weights[k]);
    }
    for (int t : above) {
      if (keep(t)) group_above.push_back(t);
    }
    const bool filtered = group_below.size() != below.size() || group_above.size() != above.size();
    std::optional<MixtureWeights> own_below, own_above;
    if (filtered) {
      // Optuna weighs the observations of a parameter among themselves: TpeObservationWeights
      // of their number (MOTPE: the below trials' own weights).
      own_below.emplace(split->below_weights.empty()
                            ? TpeObservationWeights(static_cast<int>(group_below.size()))
                            : group_below_weights,
                        options_.prior_weight);
      own_above.emplace(TpeObservationWeights(static_cast<int>(group_above.size())),
                        options_.prior_weight);
    }
    std::vector<int> below_position(history.trials.size(), -1),
        above_position(history.trials.size(), -1);
    std::optional<std::vector<int>> below_order, above_order;
    if (sorted) {
      for (size_t k = 0; k < group_below.size(); ++k) below_position[group_below[k]] = static_cast<int>(k);
      for (size_t k = 0; k < group_above.size(); ++k) above_position[group_above[k]] = static_cast<int>(k);
      below_order = SortedComponents(columns_.order[d], below_position);
      above_order = SortedComponents(columns_.order[d], above_position);
    }
    ParzenOptions group_parzen = parzen;
    group_parzen.multivariate = options_.multivariate && !(alone && parent >= 0);
    const ParzenEstimator l(space_, group, Project(internal, dims, group_below, group),
                            own_below ? *own_below : below_weights, group_parzen,
                            below_order ? &*below_order : nullptr);
    const ParzenEstimator g(space_, group, Project(internal, dims, group_above, group),
                            own_above ? *own_above : above_weights, group_parzen,
                            above_order ? &*above_order : nullptr);
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
    for (size_t j = 0; j < group.size(); ++j) chosen[group[j]] = ordered.front()[j];
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
    space_.Canonicalize(point, nullptr);
    if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
    size_t& next = pick[attempt % groups.size()];
    next = std::min(next + 1, ranked_candidates[attempt % groups.size()].size() - 1);
  }
  return random_.Suggest(history);
}

}  // namespace dhpt::optimizer
