// Warm starts: points a user asks to evaluate first (EnqueueTrial, as Optuna's enqueue_trial)
// and results from elsewhere for the algorithm to learn from (AddTrials, as add_trial). Both
// become trials of the study's history, so every optimiser, a restarted scheduler included,
// sees them as it sees its own.

#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/study/spec_translation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {
namespace {

absl::Status Ended(v1::Study::State state, absl::string_view name, absl::string_view verb) {
  return absl::FailedPreconditionError(absl::StrCat(
      "study \"", name, "\" has ended (", v1::Study::State_Name(state), "); ", verb,
      " only a study that has not"));
}

// A result to add, checked before anything is added.
absl::StatusOr<v1::TrialResult> AddedResult(const v1::StudySpec& spec, const v1::AddedTrial& added,
                                            const std::string& field) {
  v1::TrialResult result;
  const v1::Trial::State state =
      added.state() == v1::Trial::STATE_UNSPECIFIED ? v1::Trial::COMPLETED : added.state();
  if (state != v1::Trial::COMPLETED && state != v1::Trial::FAILED) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".state: COMPLETED or FAILED"));
  }
  if (added.metrics_size() > kMaxResultMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".metrics: more than ", kMaxResultMetrics, " metrics"));
  }
  for (const auto& [metric, value] : added.metrics()) {
    if (metric.empty() || metric.size() > kMaxMetricNameBytes || !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".metrics: names of 1-", kMaxMetricNameBytes, " bytes with finite values"));
    }
  }
  result.set_state(state);
  result.set_error("added as FAILED (AddTrials)");
  *result.mutable_metrics() = added.metrics();
  if (state == v1::Trial::COMPLETED) {
    if (std::optional<std::string> missing = study::MissingMetric(spec, result)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".metrics: ", *missing));
    }
  }
  return result;
}

// Every trial checked before any is added: all or nothing.
absl::StatusOr<std::vector<std::pair<optimizer::Point, v1::TrialResult>>> CheckAdded(
    const v1::StudySpec& spec, const optimizer::SearchSpace& space,
    const google::protobuf::RepeatedPtrField<v1::AddedTrial>& trials, absl::string_view field) {
  std::vector<std::pair<optimizer::Point, v1::TrialResult>> checked;
  checked.reserve(trials.size());
  for (int i = 0; i < trials.size(); ++i) {
    const std::string at = absl::StrCat(field, "[", i, "]");
    ASSIGN_OR_RETURN(optimizer::Point point,
                     study::PointFromValues(space, trials[i].params(), at + ".params"));
    ASSIGN_OR_RETURN(v1::TrialResult result, AddedResult(spec, trials[i], at));
    checked.emplace_back(std::move(point), std::move(result));
  }
  return checked;
}

}  // namespace

void SchedulerCore::AddCheckedLocked(StudyEntry& study, CheckedTrials checked,
                                     v1::AddTrialsResponse& response) {
  for (auto& [point, result] : checked) {
    // A point the study has (a warm start run twice, a repeat in the request) adds nothing.
    if (study.keys.contains(study.space.Key(point))) {
      response.set_skipped(response.skipped() + 1);
      continue;
    }
    TrialEntry& entry = CreateTrialLocked(study, std::move(point), v1::Trial::ADDED);
    study::RecordResult(study.spec, result, entry.trial());
    *entry.trial().mutable_end_time() = entry.trial().create_time();
    RecordTrialEndLocked(entry);
    PublishTrialLocked(entry);
    SaveTrialLocked(entry);
    response.set_added(response.added() + 1);
  }
}

absl::StatusOr<SchedulerCore::CheckedTrials> SchedulerCore::WarmStartLocked(
    const v1::StudySpec& spec, const optimizer::SearchSpace& space) {
  if (!studies_.contains(spec.warm_start_study())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "warm_start_study: no study named \"", spec.warm_start_study(), "\" to learn from"));
  }
  // An ended study evicted from memory is read back.
  ASSIGN_OR_RETURN(const StudyEntry* earlier, FindStudyLocked(spec.warm_start_study()));
  google::protobuf::RepeatedPtrField<v1::AddedTrial> completed;
  for (uint64_t id : earlier->trial_ids) {
    const v1::Trial trial = FullTrialLocked(trials_.at(id));
    if (trial.state() != v1::Trial::COMPLETED) continue;
    v1::AddedTrial& added = *completed.Add();
    for (const auto& [name, value] : trial.params()) {
      (*added.mutable_params())[name] = ParameterValueAsJson(value);
    }
    *added.mutable_metrics() = trial.metrics();
  }
  if (completed.size() > kMaxAddedTrialsPerStudy) {  // The most recent ones.
    completed.DeleteSubrange(0, completed.size() - kMaxAddedTrialsPerStudy);
  }
  absl::StatusOr<CheckedTrials> checked =
      CheckAdded(spec, space, completed, "warm_start_study's trials");
  if (!checked.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        checked.status().message(), ": a warm start needs a study with the same parameters "
        "and objective metrics"));
  }
  return checked;
}

absl::StatusOr<v1::Trial> SchedulerCore::EnqueueTrial(const v1::EnqueueTrialRequest& request) {
  WriteSequence stored = 0;
  v1::Trial reply;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyReadingBack(request.study(), lock));
    StudyEntry& study = *const_cast<StudyEntry*>(found);
    if (study.terminal()) return Ended(study.state, request.study(), "enqueue to");
    RETURN_IF_ERROR(CheckMemoryLocked());
    if (study.budget_used() >= study.spec.max_trials()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "study \"", request.study(), "\" has created all of its max_trials (",
          study.spec.max_trials(), ") trials; nothing more is evaluated"));
    }
    ASSIGN_OR_RETURN(optimizer::Point point,
                     study::PointFromValues(study.space, request.params(), "params"));
    if (study.keys.contains(study.space.Key(point))) {
      return absl::AlreadyExistsError(absl::StrCat(
          "study \"", request.study(), "\" already has a trial at this point"));
    }
    TrialEntry& entry = CreateTrialLocked(study, std::move(point), v1::Trial::ENQUEUED);
    // Behind the trials already waiting, before any the algorithm suggests next.
    study.pending.push_back(entry.id());
    stored = store_->last_sequence();
    PublishTrialLocked(entry);
    reply = entry.trial();
    DispatchLocked();
  }
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the trial is accepted but ", status.message()));
  }
  return reply;
}

absl::StatusOr<v1::AddTrialsResponse> SchedulerCore::AddTrials(
    const v1::AddTrialsRequest& request) {
  if (request.trials_size() > kMaxAddedTrialsPerCall) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trials: ", request.trials_size(), " in one call, more than ", kMaxAddedTrialsPerCall,
        "; send them in several calls"));
  }
  WriteSequence stored = 0;
  v1::AddTrialsResponse response;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyReadingBack(request.study(), lock));
    StudyEntry& study = *const_cast<StudyEntry*>(found);
    if (study.terminal()) return Ended(study.state, request.study(), "add to");
    RETURN_IF_ERROR(CheckMemoryLocked());
    if (study.added + request.trials_size() > kMaxAddedTrialsPerStudy) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "study \"", request.study(), "\" has ", study.added, " added trials; ",
          request.trials_size(), " more would pass the limit of ", kMaxAddedTrialsPerStudy,
          " per study"));
    }
    ASSIGN_OR_RETURN(CheckedTrials checked,
                     CheckAdded(study.spec, study.space, request.trials(), "trials"));
    AddCheckedLocked(study, std::move(checked), response);
    if (response.added() > 0) {
      SaveStudyLocked(study);
      PublishStudyLocked(study);
    }
    stored = store_->last_sequence();
  }
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the trials are accepted but ", status.message(),
                                               "; add them again to check"));
  }
  return response;
}

}  // namespace dhpt::scheduler
