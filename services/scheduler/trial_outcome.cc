#include "services/scheduler/trial_outcome.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"

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

void RecordPruned(const v1::StudySpec& spec, int64_t step, double value, v1::Trial& trial) {
  trial.set_state(v1::Trial::PRUNED);
  trial.set_error(absl::StrCat("pruned at step ", step, " by the study's early_stopping"));
  (*trial.mutable_metrics())[spec.objective().metric()] = value;
  (*trial.mutable_metrics())[std::string(kMetricPrunedStep)] = static_cast<double>(step);
}

bool RecordCostOfPrunedAttempt(const v1::TrialResult& result, v1::Trial& trial) {
  // Usually CANCELLED; COMPLETED or FAILED when the trainer had just ended anyway.
  if (trial.state() != v1::Trial::PRUNED ||
      trial.metrics().contains(std::string(kMetricCpuSeconds)) ||
      !result.metrics().contains(std::string(kMetricCpuSeconds))) {
    return false;
  }
  // Only the measurements: a model metric past the step the trial was judged at is not its.
  for (absl::string_view name : kMeasurementMetrics) {
    if (auto it = result.metrics().find(std::string(name)); it != result.metrics().end()) {
      trial.mutable_metrics()->insert({it->first, it->second});
    }
  }
  if (trial.device().empty()) trial.set_device(result.device());
  return true;
}

bool IsBetterObjective(const v1::StudySpec& spec, double candidate, double incumbent) {
  return spec.objective().goal() == v1::Objective::MAXIMIZE ? candidate > incumbent
                                                            : candidate < incumbent;
}

}  // namespace dhpt::scheduler
