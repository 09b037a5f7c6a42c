#include "services/study/trial_outcome.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"

namespace dhpt::study {

namespace {

std::optional<double> FiniteMetric(const v1::TrialResult& result, const std::string& metric) {
  auto it = result.metrics().find(metric);
  if (it == result.metrics().end() || !std::isfinite(it->second)) return std::nullopt;
  return it->second;
}

}  // namespace

std::optional<std::string> MissingMetric(const v1::StudySpec& spec,
                                         const v1::TrialResult& result) {
  std::vector<const std::string*> objectives = {&spec.objective().metric()};
  for (const v1::Objective& objective : spec.objectives()) objectives.push_back(&objective.metric());
  for (const std::string* metric : objectives) {
    if (!FiniteMetric(result, *metric)) {
      return absl::StrCat("no finite value was reported for the objective metric \"",
                          *metric, "\"");
    }
  }
  for (const v1::Constraint& constraint : spec.constraints()) {
    if (!FiniteMetric(result, constraint.metric())) {
      return absl::StrCat("no finite value was reported for the constraint metric \"",
                          constraint.metric(), "\" (not every worker measures it: choose "
                          "workers that do with worker_selector)");
    }
  }
  return std::nullopt;
}

double ConstraintViolation(const v1::StudySpec& spec,
                           const google::protobuf::Map<std::string, double>& metrics) {
  double violation = 0;
  for (const v1::Constraint& constraint : spec.constraints()) {
    auto it = metrics.find(constraint.metric());
    if (it == metrics.end()) continue;
    if (constraint.has_max()) violation += std::max(0.0, it->second - constraint.max());
    if (constraint.has_min()) violation += std::max(0.0, constraint.min() - it->second);
  }
  return violation;
}

void RecordResult(const v1::StudySpec& spec, const v1::TrialResult& result, v1::Trial& trial) {
  *trial.mutable_metrics() = result.metrics();
  trial.set_device(result.device());
  const std::optional<std::string> missing =
      result.state() == v1::Trial::COMPLETED ? MissingMetric(spec, result) : std::nullopt;
  if (result.state() != v1::Trial::COMPLETED || missing) {
    trial.set_state(v1::Trial::FAILED);
    if (missing) {
      trial.set_error(*missing);
    } else if (result.state() != v1::Trial::FAILED) {
      // Only a broken or hostile worker ends a trial with another state: the trial fails, and
      // says why instead of with no reason at all.
      const std::string& name = v1::Trial::State_Name(result.state());
      trial.set_error(absl::StrCat("the worker ended the trial with state ",
                                   name.empty() ? absl::StrCat(result.state()) : name,
                                   ", which no result has",
                                   result.error().empty() ? "" : ": ", result.error()));
    } else {
      trial.set_error(result.error());
    }
    return;
  }
  trial.set_state(v1::Trial::COMPLETED);
  trial.set_objective_value(*FiniteMetric(result, spec.objective().metric()));
  for (const v1::Objective& objective : spec.objectives()) {
    trial.add_objective_values(*FiniteMetric(result, objective.metric()));
  }
  const double violation = ConstraintViolation(spec, result.metrics());
  trial.set_infeasible(violation > 0);
  trial.set_constraint_violation(violation);
  trial.clear_error();
}

void RecordCompleted(const v1::Trial& trial, optimizer::TrialRecord& record) {
  record.status = optimizer::TrialStatus::kCompleted;
  if (trial.objective_values_size() >= 2) {
    record.values.assign(trial.objective_values().begin(), trial.objective_values().end());
  } else {
    record.value = trial.objective_value();
  }
  record.violation = trial.constraint_violation();
}

void RecordEnded(const v1::StudySpec& spec, const v1::Trial& trial, optimizer::TrialRecord& record) {
  if (trial.origin() == v1::Trial::ADDED && trial.state() != v1::Trial::COMPLETED) {
    record.status = optimizer::TrialStatus::kFailed;  // Ran elsewhere and failed.
    return;
  }
  switch (trial.state()) {
    case v1::Trial::COMPLETED:
      RecordCompleted(trial, record);
      break;
    case v1::Trial::FAILED:
    case v1::Trial::CANCELLED:
      record.status = optimizer::TrialStatus::kFailed;
      break;
    case v1::Trial::PRUNED: {
      record.status = optimizer::TrialStatus::kPruned;
      const auto& metrics = trial.metrics();
      if (auto it = metrics.find(spec.objective().metric()); it != metrics.end()) {
        record.value = it->second;
      }
      if (auto it = metrics.find(std::string(kMetricPrunedStep)); it != metrics.end()) {
        record.last_step = static_cast<int64_t>(it->second);
      }
      break;
    }
    default:
      break;
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

bool IsBetterTrial(const v1::StudySpec& spec, const v1::Trial& candidate,
                   const v1::Trial& incumbent) {
  if (candidate.constraint_violation() != incumbent.constraint_violation()) {
    return candidate.constraint_violation() < incumbent.constraint_violation();
  }
  return spec.objective().goal() == v1::Objective::MAXIMIZE
             ? candidate.objective_value() > incumbent.objective_value()
             : candidate.objective_value() < incumbent.objective_value();
}

}  // namespace dhpt::study
