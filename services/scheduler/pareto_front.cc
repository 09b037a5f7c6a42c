#include "services/scheduler/pareto_front.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "services/optimizer/pareto.h"

namespace dhpt::scheduler {
ParetoFront::ParetoFront(const v1::StudySpec& spec) {
  if (spec.objectives_size() < 2) return;
  for (const v1::Objective& objective : spec.objectives()) {
    const bool maximize = objective.goal() == v1::Objective::MAXIMIZE;
    maximize_.push_back(maximize);
    fixed_reference_.push_back(objective.has_reference()
                                   ? std::optional<double>(maximize ? -objective.reference()
                                                                    : objective.reference())
                                   : std::nullopt);
    worst_.push_back(-std::numeric_limits<double>::infinity());
  }
}

std::vector<double> ParetoFront::Minimised(const v1::Trial& trial) const {
  std::vector<double> values(maximize_.size());
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = maximize_[i] ? -trial.objective_values(static_cast<int>(i))
                             : trial.objective_values(static_cast<int>(i));
  }
  return values;
}

void ParetoFront::Add(const v1::Trial& trial) {
  if (maximize_.empty() || trial.infeasible() ||
      trial.objective_values_size() != static_cast<int>(maximize_.size())) {
    return;
  }
  std::vector<double> point = Minimised(trial);
  for (size_t i = 0; i < point.size(); ++i) {
    if (!fixed_reference_[i] && point[i] > worst_[i]) {
      worst_[i] = point[i];
      hypervolume_.reset();
    }
  }
  for (const std::vector<double>& member : points_) {
    if (optimizer::Dominates(member, point)) return;
  }
  size_t kept = 0;
  for (size_t i = 0; i < points_.size(); ++i) {
    if (optimizer::Dominates(point, points_[i])) continue;
    if (kept != i) {  // A vector moved onto itself would be left empty.
      points_[kept] = std::move(points_[i]);
      ids_[kept] = ids_[i];
    }
    ++kept;
  }
  points_.resize(kept);
  ids_.resize(kept);
  points_.push_back(std::move(point));
  ids_.push_back(trial.id());
  hypervolume_.reset();
}

std::vector<double> ParetoFront::reference_point() const {
  std::vector<double> reference(maximize_.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    const double minimised = fixed_reference_[i] ? *fixed_reference_[i] : worst_[i];
    // No feasible trial yet, and no reference given: there is no point to show.
    if (!std::isfinite(minimised)) return {};
    reference[i] = maximize_[i] ? -minimised : minimised;
  }
  return reference;
}

namespace {

// The share of the box [ideal, reference] that the points dominate, from `samples` uniform
// draws of a generator seeded by the front itself, times the box's volume.
double EstimatedHypervolume(const std::vector<std::vector<double>>& points,
                            const std::vector<double>& reference, int samples) {
  const size_t m = reference.size();
  std::vector<double> ideal = reference;
  for (const std::vector<double>& p : points) {
    for (size_t i = 0; i < m; ++i) ideal[i] = std::min(ideal[i], p[i]);
  }
  double box = 1;
  for (size_t i = 0; i < m; ++i) box *= reference[i] - ideal[i];
  if (!(box > 0)) return 0;
  std::mt19937_64 random(points.size() * 1'000'003 + m);
  std::vector<std::uniform_real_distribution<double>> axes;
  for (size_t i = 0; i < m; ++i) axes.emplace_back(ideal[i], reference[i]);
  std::vector<double> z(m);
  int dominated = 0;
  for (int s = 0; s < samples; ++s) {
    for (size_t i = 0; i < m; ++i) z[i] = axes[i](random);
    for (const std::vector<double>& p : points) {
      bool below = true;
      for (size_t i = 0; i < m && below; ++i) below = p[i] <= z[i];
      if (below) {
        ++dominated;
        break;
      }
    }
  }
  return box * dominated / samples;
}

}  // namespace

double ParetoFront::hypervolume() const {
  if (hypervolume_) return *hypervolume_;
  if (points_.empty()) return 0;
  std::vector<double> reference(maximize_.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    reference[i] = fixed_reference_[i] ? *fixed_reference_[i] : worst_[i];
  }
  // Only points strictly inside the reference add volume (and bound the estimate's box).
  // Sorted, so that the floating-point sums do not depend on the order trials completed in: a
  // restarted scheduler, which replays them by number, reports the very same value.
  std::vector<std::vector<double>> inside;
  for (const std::vector<double>& p : points_) {
    bool strictly = true;
    for (size_t i = 0; i < p.size(); ++i) strictly = strictly && p[i] < reference[i];
    if (strictly) inside.push_back(p);
  }
  std::sort(inside.begin(), inside.end());
  const double n = static_cast<double>(inside.size());
  const double m = static_cast<double>(reference.size());
  estimated_ = m >= 4 && std::pow(n, m - 2) * std::log2(n + 2) > kExactHypervolumeBudget;
  if (inside.empty()) {
    hypervolume_ = 0;
  } else if (estimated_) {
    const int samples = static_cast<int>(std::clamp(kEstimateBudget / (n * m),
                                                    double{kMinEstimateSamples},
                                                    double{kMaxEstimateSamples}));
    hypervolume_ = EstimatedHypervolume(inside, reference, samples);
  } else {
    hypervolume_ = optimizer::Hypervolume(inside, reference);
  }
  // Objectives of astronomic spread can overflow the product; JSON has no infinity.
  if (!std::isfinite(*hypervolume_)) hypervolume_ = std::numeric_limits<double>::max();
  return *hypervolume_;
}

bool ParetoFront::hypervolume_estimated() const {
  hypervolume();
  return estimated_;
}

}  // namespace dhpt::scheduler
