#include "services/analysis/study_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "services/study/spec_translation.h"

namespace dhpt::analysis {
namespace {

using google::protobuf::util::TimeUtil;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TrialState StateOf(v1::Trial::State state) {
  switch (state) {
    case v1::Trial::COMPLETED: return TrialState::kCompleted;
    case v1::Trial::PRUNED: return TrialState::kPruned;
    case v1::Trial::FAILED: return TrialState::kFailed;
    case v1::Trial::RUNNING: return TrialState::kRunning;
    case v1::Trial::CANCELLED: return TrialState::kCancelled;
    default: return TrialState::kPending;
  }
}

double RawValue(const optimizer::ParameterSpec& param, const v1::ParameterValue& value) {
  switch (param.kind) {
    case optimizer::ParameterKind::kCategorical: {
      if (value.kind_case() != v1::ParameterValue::kStringValue) return kNaN;
      auto it = std::find(param.categories.begin(), param.categories.end(), value.string_value());
      return it == param.categories.end() ? kNaN : static_cast<double>(it - param.categories.begin());
    }
    default:
      if (value.kind_case() == v1::ParameterValue::kDoubleValue) return value.double_value();
      if (value.kind_case() == v1::ParameterValue::kIntValue) {
        return static_cast<double>(value.int_value());
      }
      return kNaN;
  }
}

std::vector<ObjectiveInfo> Objectives(const v1::StudySpec& spec) {
  std::vector<ObjectiveInfo> objectives;
  if (spec.objectives_size() > 0) {
    for (const v1::Objective& objective : spec.objectives()) {
      objectives.push_back(
          {objective.metric(), objective.goal() == v1::Objective::MAXIMIZE,
           objective.has_reference() ? std::optional<double>(objective.reference())
                                     : std::nullopt});
    }
  } else {
    objectives.push_back(
        {spec.objective().metric(), spec.objective().goal() == v1::Objective::MAXIMIZE});
  }
  return objectives;
}

double RawPointValue(const optimizer::ParameterSpec& param, const optimizer::ParameterValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    auto it = std::find(param.categories.begin(), param.categories.end(), *text);
    return it == param.categories.end() ? kNaN
                                        : static_cast<double>(it - param.categories.begin());
  }
  if (param.kind == optimizer::ParameterKind::kCategorical) return kNaN;
  if (const auto* number = std::get_if<double>(&value)) return *number;
  if (const auto* number = std::get_if<int64_t>(&value)) return static_cast<double>(*number);
  return kNaN;  // Inactive (a conditional parameter whose condition did not hold): absent.
}

}  // namespace

StudyData StudyDataFromRecords(const v1::StudySpec& spec,
                               const std::vector<optimizer::TrialRecord>& records,
                               const std::vector<int64_t>& numbers) {
  StudyData study;
  study.name = spec.name();
  study.params = study::ToSearchSpace(spec).parameters();
  study.objectives = Objectives(spec);
  study.trials.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const optimizer::TrialRecord& record = records[i];
    TrialData& data = study.trials.emplace_back();
    data.number = i < numbers.size() ? numbers[i] : static_cast<int64_t>(i);
    switch (record.status) {
      case optimizer::TrialStatus::kCompleted: data.state = TrialState::kCompleted; break;
      case optimizer::TrialStatus::kPruned: data.state = TrialState::kPruned; break;
      case optimizer::TrialStatus::kFailed: data.state = TrialState::kFailed; break;
      case optimizer::TrialStatus::kRunning: data.state = TrialState::kRunning; break;
    }
    for (size_t p = 0; p < study.params.size(); ++p) {
      data.params.push_back(p < record.point.size() ? RawPointValue(study.params[p], record.point[p])
                                                    : kNaN);
    }
    if (!record.values.empty()) {
      data.values = record.values;
    } else if (record.value) {
      data.values.push_back(*record.value);
    }
    data.infeasible = record.violation > 0;
    data.start_seconds = data.end_seconds = kNaN;
  }
  return study;
}

StudyData StudyDataFromProto(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials,
                             const std::vector<v1::TrialCurve>& curves) {
  StudyData study;
  study.name = spec.name();
  study.params = study::ToSearchSpace(spec).parameters();
  study.objectives = Objectives(spec);
  // Times count from the first trial's creation: the study's own is not in its spec.
  std::optional<google::protobuf::Timestamp> origin;
  for (const v1::Trial& trial : trials) {
    if (trial.has_create_time() && (!origin || trial.create_time() < *origin)) {
      origin = trial.create_time();
    }
  }
  auto seconds = [&](bool has, const google::protobuf::Timestamp& at) {
    if (!has || !origin) return kNaN;
    return TimeUtil::DurationToMicroseconds(at - *origin) / 1e6;
  };
  // The last attempt's curve of each trial.
  std::map<int64_t, const v1::TrialCurve*> last_curve;
  for (const v1::TrialCurve& curve : curves) {
    const v1::TrialCurve*& slot = last_curve[curve.number()];
    if (slot == nullptr || slot->attempt() <= curve.attempt()) slot = &curve;
  }
  study.trials.reserve(trials.size());
  for (const v1::Trial& trial : trials) {
    TrialData& data = study.trials.emplace_back();
    data.number = trial.number();
    data.state = StateOf(trial.state());
    for (const optimizer::ParameterSpec& param : study.params) {
      auto it = trial.params().find(param.name);
      data.params.push_back(it == trial.params().end() ? kNaN : RawValue(param, it->second));
    }
    if (data.state == TrialState::kCompleted) {
      if (spec.objectives_size() > 0) {
        data.values.assign(trial.objective_values().begin(), trial.objective_values().end());
      } else if (trial.has_objective_value()) {
        data.values.push_back(trial.objective_value());
      }
    } else if (data.state == TrialState::kPruned && spec.objectives_size() == 0) {
      // A pruned trial's objective metric holds the value at the step it was stopped at.
      auto it = trial.metrics().find(spec.objective().metric());
      if (it != trial.metrics().end()) data.values.push_back(it->second);
    }
    data.infeasible = trial.infeasible();
    data.start_seconds = seconds(trial.has_start_time(), trial.start_time());
    data.end_seconds = seconds(trial.has_end_time(), trial.end_time());
    // Ask-and-tell trials ran on a client rather than a worker: the timeline shows it instead.
    data.worker = trial.worker_id().empty() ? trial.client_id() : trial.worker_id();
    data.error = trial.error();
    if (auto it = last_curve.find(trial.number()); it != last_curve.end()) {
      data.steps.assign(it->second->steps().begin(), it->second->steps().end());
      data.step_values.assign(it->second->values().begin(), it->second->values().end());
    }
  }
  std::stable_sort(study.trials.begin(), study.trials.end(),
                   [](const TrialData& a, const TrialData& b) { return a.number < b.number; });
  return study;
}

double UnitCoordinate(const optimizer::ParameterSpec& param, double raw) {
  if (std::isnan(raw)) return kNaN;
  switch (param.kind) {
    case optimizer::ParameterKind::kCategorical:
      return (raw + 0.5) / std::max<size_t>(param.categories.size(), 1);
    case optimizer::ParameterKind::kDiscrete: {
      // Discrete values are choices: their position among the sorted values.
      std::vector<double> sorted = param.discrete_values;
      std::sort(sorted.begin(), sorted.end());
      const auto it = std::lower_bound(sorted.begin(), sorted.end(), raw - 1e-12 * std::abs(raw));
      return (static_cast<double>(it - sorted.begin()) + 0.5) / std::max<size_t>(sorted.size(), 1);
    }
    default: {
      double low = param.min, high = param.max, x = raw;
      if (param.log && low > 0 && x > 0) {
        low = std::log(low);
        high = std::log(high);
        x = std::log(x);
      }
      return FractionOfRange(x, low, high);
    }
  }
}

double FractionOfRange(double x, double low, double high) {
  if (!(high > low)) return 0.5;
  return std::clamp((x / 2 - low / 2) / (high / 2 - low / 2), 0.0, 1.0);
}

absl::StatusOr<int> ParamIndex(const StudyData& study, const std::string& name) {
  for (size_t i = 0; i < study.params.size(); ++i) {
    if (study.params[i].name == name) return static_cast<int>(i);
  }
  std::vector<std::string> names;
  for (const optimizer::ParameterSpec& param : study.params) names.push_back(param.name);
  return absl::InvalidArgumentError(absl::StrCat("study \"", study.name,
                                                 "\" has no parameter \"", name,
                                                 "\"; its parameters are ",
                                                 absl::StrJoin(names, ", ")));
}

absl::StatusOr<ObjectiveInfo> Objective(const StudyData& study, int index) {
  if (index < 0 || index >= static_cast<int>(study.objectives.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("objective index ", index, " is out of range: study \"", study.name,
                     "\" has ", study.objectives.size(), " objective(s), numbered from 0"));
  }
  return study.objectives[index];
}

}  // namespace dhpt::analysis
