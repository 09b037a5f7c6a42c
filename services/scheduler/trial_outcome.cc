#include "services/scheduler/trial_outcome.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace dhpt::scheduler {

void RecordResult(const v1::StudySpec& spec, const v1::TrialResult& result, v1::Trial& trial) {
  *trial.mutable_metrics() = result.metrics();
  trial.set_device(result.device());
  const std::string& metric = spec.objective().metric();
  auto objective = result.metrics().find(metric);
  if (result.state() == v1::Trial::COMPLETED && objective != result.metrics().end() &&
      std::isfinite(objective->second)) {
    trial.set_state(v1::Trial::COMPLETED);
    trial.set_objective_value(objective->second);
    trial.clear_error();
  } else {
    trial.set_state(v1::Trial::FAILED);
    trial.set_error(result.state() == v1::Trial::COMPLETED
                        ? absl::StrCat("the worker reported no finite value for the objective "
                                       "metric \"", metric, "\"")
                        : result.error());
  }
}

bool IsBetterObjective(const v1::StudySpec& spec, double candidate, double incumbent) {
  return spec.objective().goal() == v1::Objective::MAXIMIZE ? candidate > incumbent
                                                            : candidate < incumbent;
}

}  // namespace dhpt::scheduler
