#pragma once

// The objective vector of a trial as the multi-objective optimisers read it.

#include <cmath>
#include <optional>
#include <vector>

#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

// The losses (every objective minimised) of a completed trial: TrialRecord::value when
// `minimize` has one entry, TrialRecord::values when it has more. nullopt when the trial is
// not completed or an objective is missing or NaN: such a trial is treated like a failed one.
inline std::optional<std::vector<double>> CompletedLosses(const TrialRecord& trial,
                                                          const std::vector<bool>& minimize) {
  if (trial.status != TrialStatus::kCompleted) return std::nullopt;
  std::vector<double> losses;
  if (minimize.size() == 1) {
    if (!trial.value) return std::nullopt;
    losses.push_back(*trial.value);
  } else {
    if (trial.values.size() != minimize.size()) return std::nullopt;
    losses = trial.values;
  }
  for (size_t k = 0; k < losses.size(); ++k) {
    if (std::isnan(losses[k])) return std::nullopt;
    if (!minimize[k]) losses[k] = -losses[k];
  }
  return losses;
}

}  // namespace dhpt::optimizer
