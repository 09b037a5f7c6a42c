#include "services/scheduler/pareto_front.h"

#include <algorithm>
#include <limits>

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
    reference[i] = maximize_[i] ? -minimised : minimised;
  }
  return reference;
}

double ParetoFront::hypervolume() const {
  if (hypervolume_) return *hypervolume_;
  if (points_.empty()) return 0;
  std::vector<double> reference(maximize_.size());
  for (size_t i = 0; i < reference.size(); ++i) {
    reference[i] = fixed_reference_[i] ? *fixed_reference_[i] : worst_[i];
  }
  hypervolume_ = optimizer::Hypervolume(points_, reference);
  return *hypervolume_;
}

}  // namespace dhpt::scheduler
