// UpdateStudy: a study's budget and limits changed after it was created, and a finished study
// reopened for more trials (Optuna's optimize() again on a loaded study, Katib's editable
// maxTrialCount). Optimisers are pure functions of the study's history, which the entry keeps
// (and Recover rebuilds after a restart), so a reopened study's algorithm simply goes on from
// every trial it has: nothing is re-created.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/common/logging.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"

namespace dhpt::scheduler {
namespace {

absl::Status CheckMask(const v1::UpdateStudyRequest& request) {
  const std::string allowed = absl::StrJoin(kUpdatableFields, ", ");
  if (request.update_mask().paths().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("update_mask: name the fields to change (", allowed, ")"));
  }
  for (const std::string& path : request.update_mask().paths()) {
    if (std::find(kUpdatableFields.begin(), kUpdatableFields.end(), path) ==
        kUpdatableFields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update_mask: \"", path, "\" cannot be changed, only ", allowed,
          "; for another space, algorithm or objective submit a new study with --warm-start"));
    }
  }
  return absl::OkStatus();
}

// The study's spec with the masked fields taken from the request (named but unset: cleared).
v1::StudySpec Updated(v1::StudySpec spec, const v1::UpdateStudyRequest& request) {
  const v1::StudySpec& from = request.spec();
  for (const std::string& path : request.update_mask().paths()) {
    if (path == "max_trials") spec.set_max_trials(from.max_trials());
    if (path == "parallel_trials") spec.set_parallel_trials(from.parallel_trials());
    if (path == "max_failed_trials") {
      if (from.has_max_failed_trials()) {
        spec.set_max_failed_trials(from.max_failed_trials());
      } else {
        spec.clear_max_failed_trials();
      }
    }
    if (path == "trial_timeout") {
      if (from.has_trial_timeout()) {
        *spec.mutable_trial_timeout() = from.trial_timeout();
      } else {
        spec.clear_trial_timeout();
      }
    }
  }
  return spec;
}

}  // namespace

absl::StatusOr<v1::Study> SchedulerCore::UpdateStudy(const v1::UpdateStudyRequest& request) {
  RETURN_IF_ERROR(CheckMask(request));
  v1::StudySpec before;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* study, FindStudyReadingBack(request.name(), lock));
    before = study->spec;
  }
  // Checked as CreateStudy checks a spec, off the lock (a BAYESIAN spec's cost takes a while).
  ASSIGN_OR_RETURN(v1::StudySpec spec, study::NormalizeStudySpec(Updated(before, request),
                                                                 options_.spec_limits));
  WriteSequence stored;
  v1::Study reply;
  {
    CoreLock lock(this);
    if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
    ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyLocked(request.name()));
    StudyEntry& study = *const_cast<StudyEntry*>(found);
    if (!google::protobuf::util::MessageDifferencer::Equals(study.spec, before)) {
      return absl::AbortedError(absl::StrCat("study \"", request.name(),
                                             "\" changed meanwhile; update it again"));
    }
    ASSIGN_OR_RETURN(const bool reopen, CheckUpdateLocked(study, spec));
    spec_bytes_total_ += static_cast<int64_t>(spec.ByteSizeLong()) -
                         static_cast<int64_t>(study.spec.ByteSizeLong());
    const std::string change =
        absl::StrCat("max_trials ", study.spec.max_trials(), " -> ", spec.max_trials(),
                     ", parallel_trials ", study.spec.parallel_trials(), " -> ",
                     spec.parallel_trials());
    study.spec = std::move(spec);
    if (reopen) {
      // Its cancelled trials stay as they are (they count towards max_trials, as before).
      const int started = study.completed + study.failed + study.pruned + study.cancelled;
      study.state = started > 0 ? v1::Study::RUNNING : v1::Study::PENDING;
      study.state_reason = absl::StrCat("reopened by a user after ", started, " trials");
      study.end_time.Clear();
      dispatchable_.push_back(&study);
    }
    stored = SaveStudyLocked(study);
    DHPT_LOG_INFO("study %s %s: %s", study.spec.name(), reopen ? "reopened" : "updated", change);
    PublishStudyLocked(study);
    CheckStudyEndLocked(study);  // A budget lowered to what has run ends it now.
    DispatchLocked();
    reply = BuildStudyLocked(study);
    stored = std::max(stored, store_->last_sequence());
  }
  // Acknowledged only once it would survive a crash.
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the change is accepted but ", status.message(),
                                               "; get the study to check"));
  }
  return reply;
}

absl::StatusOr<bool> SchedulerCore::CheckUpdateLocked(const StudyEntry& study,
                                                      const v1::StudySpec& spec) const {
  const std::string& name = study.spec.name();
  const int made = study.budget_used();
  if (spec.max_trials() < made) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_trials: study \"", name, "\" has made ", made, " trials already; set at least ",
        made));
  }
  if (spec.has_max_failed_trials() && study.failed > spec.max_failed_trials()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_failed_trials: ", study.failed, " trials of study \"", name,
        "\" have failed already; set at least ", study.failed, ", or no limit"));
  }
  if (study.terminal()) {
    // Reopening: only when the study would run again, and not end at once for the same reason.
    if (!study.optimizer_error.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "study \"", name, "\" cannot be reopened: ", study.optimizer_error,
          "; submit a new study (dhpt submit --warm-start=", name, " keeps what it learnt)"));
    }
    if (study.exhausted) {
      return absl::FailedPreconditionError(absl::StrCat(
          "study \"", name, "\" cannot be extended: its search space is exhausted (every point ",
          "of it has run); widen the space or raise grid_points in a new study (dhpt submit ",
          "--warm-start=", name, ")"));
    }
  }
  if (spec.algorithm().name() == v1::Algorithm::GRID &&
      spec.max_trials() != study.spec.max_trials()) {
    const std::optional<int64_t> size =
        optimizer::GridSize(study.space, spec.algorithm().grid_points());
    if (size && spec.max_trials() > std::max<int64_t>(*size, study.spec.max_trials())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "max_trials: the grid of study \"", name, "\" has ", *size, " points (", made,
          " made), so it cannot run more than ", *size,
          " trials; for more points raise algorithm.grid_points in a new study (dhpt submit "
          "--warm-start=", name, ")"));
    }
  }
  if (!study.terminal()) return false;
  if (study.state == v1::Study::FAILED) {
    // Only a failure the change answers: more failures allowed. Any other cause (every trial
    // failing, say) would fail the new trials the same way; fix it in a new study.
    const bool failed_for_limit = study.spec.has_max_failed_trials() &&
                                  study.failed > study.spec.max_failed_trials();
    if (!failed_for_limit) {
      return absl::FailedPreconditionError(absl::StrCat(
          "study \"", name, "\" FAILED (", study.state_reason,
          "); only a study that failed for max_failed_trials is reopened, by raising it. Fix "
          "the cause and submit a new study (dhpt submit --warm-start=", name,
          " keeps what it learnt)"));
    }
  }
  if (spec.max_trials() <= made) {
    return absl::FailedPreconditionError(absl::StrCat(
        "study \"", name, "\" has ended (", v1::Study::State_Name(study.state), ") with ", made,
        " trials; raise max_trials above ", made, " to run more (e.g. dhpt extend ", name,
        " --max_trials=", made + 10, ")"));
  }
  return true;
}

}  // namespace dhpt::scheduler
