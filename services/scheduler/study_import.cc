// Backups: ImportStudy restores a `dhpt export` (StudyExport) as a study of this scheduler, and
// TrialCurves reads the intermediate values an export carries.
//
// An export is user input: every field is checked before anything changes, ids are this
// scheduler's (an export's are ignored), a completed trial's objective is recomputed from its
// metrics, and a trial that was pending or running is pending again. The study then stands as
// a restarted scheduler would rebuild it from its own database (Recover): the same history
// for its optimiser, the same curves for its early-stopping rule.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "services/common/logging.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/study/spec_difference.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {
namespace {

using google::protobuf::util::TimeUtil;

// A study's own reason for its state (a terminal one: "all 20 trials finished").
constexpr size_t kMaxStateReasonBytes = 4096;

// Whether an ended study's reason, as the scheduler words it, names the trials imported: the
// counts in "all 6 trials finished", "search space exhausted after 6 trials" and "2 trials
// failed, more than max_failed_trials (1)" are checked; a user's stop names none.
bool ReasonHoldsForImportedTrials(const v1::Study& exported, int finished, int failed) {
  const std::string& reason = exported.state_reason();
  if (exported.state() == v1::Study::STOPPED) return true;
  return absl::StrContains(reason, absl::StrCat("all ", finished, " trials finished")) ||
         absl::StrContains(reason, absl::StrCat("after ", finished, " trials")) ||
         absl::StartsWith(reason, absl::StrCat(failed, " trials failed, more than"));
}

// An imported ended study's reason, true for its imported trials: the exporter's when its
// counts hold (a backup restores it as it was), a completed study's as the scheduler words it
// when the budget is spent ("all 3 trials finished"), else the count and the exporter's words
// marked as theirs. `finished` counts completed, failed and pruned trials; `cancelled` ones
// used budget too.
std::string ImportedEndReason(const v1::Study& exported, int max_trials, int finished,
                              int failed, int cancelled) {
  if (ReasonHoldsForImportedTrials(exported, finished, failed)) return exported.state_reason();
  if (exported.state() == v1::Study::COMPLETED && finished + cancelled >= max_trials) {
    return absl::StrCat("all ", finished, " trials finished");
  }
  std::string reason = absl::StrCat("imported as ", v1::Study::State_Name(exported.state()),
                                    " with ", finished, " trials finished");
  if (!exported.state_reason().empty()) {
    absl::StrAppend(&reason, "; before the export: ", exported.state_reason());
  }
  return reason;
}

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// Text the scheduler wrote for workers and clients: bounded, no control bytes (a forged one
// could fake log lines or grow memory).
absl::Status CheckText(const std::string& text, size_t limit, const std::string& field) {
  if (text.size() > limit) return Invalid(field, absl::StrCat("longer than ", limit, " bytes"));
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return Invalid(field, "control characters");
  }
  return absl::OkStatus();
}

// `now`: this scheduler's clock. A time past it by more than kMaxImportClockSkew is not one
// an export can hold (a forged or corrupted file): a trial started in 2090 would read as
// running for minus decades.
absl::Status CheckTime(const google::protobuf::Timestamp& time, const std::string& field,
                       absl::Time now) {
  if (time.seconds() < TimeUtil::kTimestampMinSeconds ||
      time.seconds() > TimeUtil::kTimestampMaxSeconds || time.nanos() < 0 ||
      time.nanos() > 999'999'999) {
    return Invalid(field, "not a valid time");
  }
  if (FromTimestamp(time) > now + kMaxImportClockSkew) {
    return Invalid(field, absl::StrCat(TimeUtil::ToString(time), " is in the future: this "
                                       "scheduler's clock reads ",
                                       absl::FormatTime(now, absl::UTCTimeZone()),
                                       " (a clock may be ahead by at most ",
                                       absl::FormatDuration(kMaxImportClockSkew), ")"));
  }
  return absl::OkStatus();
}

// Whether `a` is earlier than `b` (both valid times: CheckTime).
bool Before(const google::protobuf::Timestamp& a, const google::protobuf::Timestamp& b) {
  return a.seconds() < b.seconds() || (a.seconds() == b.seconds() && a.nanos() < b.nanos());
}

// One trial of the export as it will stand here, with its point; its id is given later.
struct ImportedTrial {
  v1::Trial trial;
  optimizer::Point point;
};

absl::StatusOr<ImportedTrial> CheckTrial(const v1::StudySpec& spec,
                                         const optimizer::SearchSpace& space,
                                         const v1::Trial& in, const std::string& at,
                                         absl::Time now) {
  ImportedTrial out;
  v1::Trial& t = out.trial;
  if (!in.study().empty() && in.study() != spec.name()) {
    return Invalid(at + ".study", absl::StrCat("\"", in.study(), "\" is not the exported study"));
  }
  google::protobuf::Map<std::string, google::protobuf::Value> values;
  for (const auto& [name, value] : in.params()) values[name] = ParameterValueAsJson(value);
  ASSIGN_OR_RETURN(out.point, study::PointFromValues(space, values, at + ".params"));
  if (static_cast<int>(in.params().size()) != static_cast<int>(space.parameters().size())) {
    return Invalid(at + ".params", "names a parameter the study does not have");
  }
  t.set_study(spec.name());
  t.set_number(in.number());
  *t.mutable_params() = study::ToParamMap(space, out.point);
  t.set_origin(in.origin());
  if (!v1::Trial::Origin_IsValid(in.origin())) return Invalid(at + ".origin", "unknown origin");

  // Attempts: who was given each; only this scheduler's epochs count for results, and the
  // trial's id is new, so no worker can report on an imported attempt.
  if (in.attempts_size() > kMaxImportedAttemptsPerTrial) {
    return Invalid(at + ".attempts", absl::StrCat("more than ", kMaxImportedAttemptsPerTrial));
  }
  if (in.attempt() < 0 || in.attempt() > in.attempts_size()) {
    return Invalid(at + ".attempt", "must be between 0 and the number of attempts listed");
  }
  if (in.attempt() == 0 && in.attempts_size() > 0) {
    return Invalid(at + ".attempt", "0, but attempts are listed: it is the attempt (1 or more) "
                                    "the trial is recorded as");
  }
  // Not bounded by `attempt`: an ended trial's is the attempt whose result counted, which may
  // be an earlier one than the attempts lost.
  if (in.lost_attempts() < 0 || in.lost_attempts() > in.attempts_size()) {
    return Invalid(at + ".lost_attempts", "must be between 0 and the number of attempts listed");
  }
  using TimeField = std::pair<const google::protobuf::Timestamp*, const char*>;
  for (const auto& [time, name] :
       {TimeField{&in.create_time(), ".create_time"}, TimeField{&in.start_time(), ".start_time"},
        TimeField{&in.end_time(), ".end_time"}}) {
    RETURN_IF_ERROR(CheckTime(*time, at + name, now));
  }
  int marked_lost = 0;
  const google::protobuf::Timestamp* previous_start = nullptr;
  for (int i = 0; i < in.attempts_size(); ++i) {
    const v1::Trial::Attempt& attempt = in.attempts(i);
    const std::string field = absl::StrCat(at, ".attempts[", i, "]");
    RETURN_IF_ERROR(CheckText(attempt.worker_id(), kMaxWorkerIdBytes, field + ".worker_id"));
    RETURN_IF_ERROR(CheckText(attempt.client_id(), kMaxClientIdBytes, field + ".client_id"));
    RETURN_IF_ERROR(CheckText(attempt.request_id(), kMaxClientIdBytes, field + ".request_id"));
    RETURN_IF_ERROR(CheckTime(attempt.start_time(), field + ".start_time", now));
    if (attempt.has_start_time()) {
      // Attempts are listed in the order they were given, so a forged order would make a
      // late result's duration (and the speed learnt from it) negative or absurd.
      if (previous_start != nullptr && Before(attempt.start_time(), *previous_start)) {
        return Invalid(field + ".start_time", "before an earlier attempt's start");
      }
      if (in.has_end_time() && Before(in.end_time(), attempt.start_time())) {
        return Invalid(field + ".start_time", "after the trial's end");
      }
      if (in.has_create_time() && Before(attempt.start_time(), in.create_time())) {
        return Invalid(field + ".start_time", "before the trial was created");
      }
      previous_start = &attempt.start_time();
    }
    marked_lost += attempt.lost() ? 1 : 0;
  }
  // Exports from before attempts were marked give the count alone.
  if (marked_lost > 0 && marked_lost != in.lost_attempts()) {
    return Invalid(at + ".lost_attempts",
                   absl::StrCat("must be the number of attempts marked lost (", marked_lost,
                                "), not ", in.lost_attempts()));
  }
  // A trial fails as its losses reach max_attempts, unless held for its worker's return (then
  // pending, or cancelled by a stop during the hold: hostile review, such exports were
  // refused); a forged count would have it run again past its limit.
  const bool may_reach_limit = in.state() == v1::Trial::FAILED ||
                               in.state() == v1::Trial::PENDING ||
                               in.state() == v1::Trial::CANCELLED;
  if (in.lost_attempts() > spec.max_attempts() ||
      (in.lost_attempts() == spec.max_attempts() && !may_reach_limit)) {
    return Invalid(at + ".lost_attempts",
                   absl::StrCat(in.lost_attempts(), " lost attempts under max_attempts ",
                                spec.max_attempts(), ": a trial fails as its losses reach it"));
  }
  // The attempt whose result counted was not lost (its mark is cleared as the result counts).
  if (in.state() == v1::Trial::COMPLETED && in.attempt() >= 1 &&
      in.attempts(in.attempt() - 1).lost()) {
    return Invalid(absl::StrCat(at, ".attempts[", in.attempt() - 1, "].lost"),
                   "marks the attempt whose result counted");
  }
  t.set_attempt(in.attempt());
  t.set_lost_attempts(in.lost_attempts());
  *t.mutable_attempts() = in.attempts();
  RETURN_IF_ERROR(CheckText(in.worker_id(), kMaxWorkerIdBytes, at + ".worker_id"));
  RETURN_IF_ERROR(CheckText(in.client_id(), kMaxClientIdBytes, at + ".client_id"));
  RETURN_IF_ERROR(CheckText(in.node_name(), kMaxWorkerTextBytes, at + ".node_name"));
  RETURN_IF_ERROR(CheckText(in.device(), kMaxWorkerTextBytes, at + ".device"));
  // An error the scheduler wrote may quote the worker's (cut to kMaxWorkerErrorBytes).
  RETURN_IF_ERROR(CheckText(in.error(), 2 * kMaxWorkerErrorBytes, at + ".error"));
  t.set_worker_id(in.worker_id());
  t.set_client_id(in.client_id());
  t.set_node_name(in.node_name());
  t.set_device(in.device());
  t.set_error(in.error());
  if (in.has_create_time() && in.has_end_time() && Before(in.end_time(), in.create_time())) {
    return Invalid(at + ".end_time", absl::StrCat("trial ", in.number(), " ends (",
                                                  TimeUtil::ToString(in.end_time()),
                                                  ") before it was created (",
                                                  TimeUtil::ToString(in.create_time()), ")"));
  }
  // A forged or hand-edited export: its duration would be negative in every report.
  if (in.has_start_time() && in.has_end_time() && Before(in.end_time(), in.start_time())) {
    return Invalid(at + ".end_time",
                   absl::StrCat("trial ", in.number(), " ends (", TimeUtil::ToString(in.end_time()),
                                ") before it starts (", TimeUtil::ToString(in.start_time()), ")"));
  }
  if (in.has_create_time()) *t.mutable_create_time() = in.create_time();
  if (in.has_start_time()) *t.mutable_start_time() = in.start_time();
  if (in.has_end_time()) *t.mutable_end_time() = in.end_time();

  if (in.metrics_size() > kMaxResultMetrics + 1) {  // The pruned step may come on top.
    return Invalid(at + ".metrics", absl::StrCat("more than ", kMaxResultMetrics, " metrics"));
  }
  // Only finite values are kept: earlier schedulers stored a worker's NaN or infinity, which
  // measures nothing, and their exports must still import (a COMPLETED trial's objective is
  // checked below, and is refused if it is not finite).
  google::protobuf::Map<std::string, double> metrics;
  for (const auto& [metric, value] : in.metrics()) {
    if (metric.empty() || metric.size() > kMaxMetricNameBytes) {
      return Invalid(at + ".metrics",
                     absl::StrCat("\"", WorkerText(metric, kMaxMetricNameBytes),
                                  "\": a metric's name is 1-", kMaxMetricNameBytes, " bytes"));
    }
    if (std::isfinite(value)) metrics[metric] = value;
  }
  switch (in.state()) {
    case v1::Trial::COMPLETED: {
      // The objective is recomputed from the metrics, never taken from the export.
      v1::TrialResult result;
      result.set_state(v1::Trial::COMPLETED);
      *result.mutable_metrics() = metrics;
      if (std::optional<std::string> missing = study::MissingMetric(spec, result)) {
        return Invalid(at + ".metrics", *missing);
      }
      result.set_device(in.device());
      study::RecordResult(spec, result, t);
      break;
    }
    case v1::Trial::FAILED:
    case v1::Trial::CANCELLED:
    case v1::Trial::PRUNED:
      t.set_state(in.state());
      *t.mutable_metrics() = std::move(metrics);
      break;
    case v1::Trial::PENDING:
    case v1::Trial::RUNNING:
      // Its worker or client belonged to the exporting scheduler: it waits for one here, with
      // nothing of a result (an edited export's metrics or end would show on a trial that
      // never ended).
      t.set_state(v1::Trial::PENDING);
      t.clear_end_time();
      break;
    default:
      return Invalid(at + ".state", "COMPLETED, FAILED, CANCELLED, PRUNED, PENDING or RUNNING");
  }
  if (in.origin() == v1::Trial::ADDED &&
      (in.state() != v1::Trial::COMPLETED && in.state() != v1::Trial::FAILED)) {
    return Invalid(at + ".state", "an ADDED trial is COMPLETED or FAILED");
  }
  return out;
}

// The export's curves by trial number and attempt, checked against the trials.
using CurveKey = std::pair<int64_t, int>;
absl::StatusOr<std::map<CurveKey, const v1::TrialCurve*>> CheckCurves(
    const v1::StudyExport& exported, const std::vector<ImportedTrial>& trials) {
  std::map<CurveKey, const v1::TrialCurve*> curves;
  for (int i = 0; i < exported.curves_size(); ++i) {
    const v1::TrialCurve& curve = exported.curves(i);
    const std::string at = absl::StrCat("curves[", i, "]");
    if (curve.number() < 0 || curve.number() >= static_cast<int64_t>(trials.size())) {
      return Invalid(at + ".number", "names no trial of the export");
    }
    const v1::Trial& trial = trials[curve.number()].trial;
    if (curve.attempt() < 1 || curve.attempt() > trial.attempts_size()) {
      return Invalid(at + ".attempt", "names no attempt of its trial");
    }
    if (!curves.emplace(CurveKey{curve.number(), curve.attempt()}, &curve).second) {
      return Invalid(at, "a second curve for the same trial and attempt");
    }
    if (curve.steps_size() != curve.values_size()) {
      return Invalid(at, "steps and values differ in number");
    }
    if (curve.steps_size() > kMaxIntermediateValuesPerAttempt) {
      return Invalid(at, absl::StrCat("more than ", kMaxIntermediateValuesPerAttempt,
                                      " values for one attempt"));
    }
    for (int j = 0; j < curve.steps_size(); ++j) {
      if (curve.steps(j) < 0 || (j > 0 && curve.steps(j) <= curve.steps(j - 1))) {
        return Invalid(at + ".steps", "must be non-negative and increasing");
      }
      if (std::isnan(curve.values(j))) return Invalid(at + ".values", "NaN is not a value");
    }
  }
  return curves;
}

}  // namespace

absl::StatusOr<v1::Study> SchedulerCore::ImportStudy(const v1::StudyExport& exported) {
  if (!exported.has_study() || !exported.study().has_spec()) {
    return Invalid("study.spec", "is required (the file dhpt export wrote)");
  }
  absl::StatusOr<v1::StudySpec> normalized =
      study::NormalizeStudySpec(exported.study().spec(), options_.spec_limits);
  if (!normalized.ok()) {
    return absl::Status(normalized.status().code(),
                        absl::StrCat("study.spec: ", normalized.status().message()));
  }
  const v1::StudySpec& spec = *normalized;
  const v1::Study& in = exported.study();
  const bool ended = in.state() == v1::Study::COMPLETED || in.state() == v1::Study::STOPPED ||
                     in.state() == v1::Study::FAILED;
  if (!v1::Study::State_IsValid(in.state())) return Invalid("study.state", "unknown state");
  RETURN_IF_ERROR(CheckText(in.state_reason(), kMaxStateReasonBytes, "study.state_reason"));
  const absl::Time now = options_.clock();
  RETURN_IF_ERROR(CheckTime(in.create_time(), "study.create_time", now));
  RETURN_IF_ERROR(CheckTime(in.end_time(), "study.end_time", now));
  if (in.has_end_time() && Before(in.end_time(), in.create_time())) {
    return Invalid("study.end_time",
                   absl::StrCat("the study ends (", TimeUtil::ToString(in.end_time()),
                                ") before it was created (", TimeUtil::ToString(in.create_time()),
                                ")"));
  }

  // Trials in number order, each number once: 0, 1, 2, ... as the study created them.
  const optimizer::SearchSpace space = study::ToSearchSpace(spec);
  std::vector<ImportedTrial> trials(exported.trials_size());
  std::vector<bool> seen(exported.trials_size(), false);
  int added = 0;
  for (int i = 0; i < exported.trials_size(); ++i) {
    const std::string at = absl::StrCat("trials[", i, "]");
    const int64_t number = exported.trials(i).number();
    if (number < 0 || number >= exported.trials_size() || seen[number]) {
      return Invalid(at + ".number", absl::StrCat(
          "trial numbers must be 0 to ", exported.trials_size() - 1, ", each once; the export "
          "is incomplete or edited"));
    }
    seen[number] = true;
    if (ended && (exported.trials(i).state() == v1::Trial::PENDING ||
                  exported.trials(i).state() == v1::Trial::RUNNING)) {
      return Invalid(at + ".state", absl::StrCat(
          v1::Trial::State_Name(exported.trials(i).state()), " in a study that has ended (",
          v1::Study::State_Name(in.state()), "): every trial of an ended study has ended"));
    }
    ASSIGN_OR_RETURN(trials[number], CheckTrial(spec, space, exported.trials(i), at, now));
    if (exported.trials(i).origin() == v1::Trial::ADDED) ++added;
  }
  if (exported.trials_size() - added > spec.max_trials()) {
    return Invalid("trials", absl::StrCat("more trials than the spec's max_trials (",
                                          spec.max_trials(), ")"));
  }
  // Any of them may be the best trial a GetStudy answers with; its id is new (64 bytes).
  size_t largest_trial = 0;
  for (const ImportedTrial& trial : trials) {
    largest_trial = std::max(largest_trial, trial.trial.ByteSizeLong() + 64);
  }
  RETURN_IF_ERROR(CheckStudyAnswerBytes(spec, largest_trial));
  if (added > kMaxAddedTrialsPerStudy) {
    return Invalid("trials", absl::StrCat("more than ", kMaxAddedTrialsPerStudy, " ADDED trials"));
  }
  ASSIGN_OR_RETURN(auto curves, CheckCurves(exported, trials));

  WriteSequence stored = 0;
  v1::Study reply;
  {
    CoreLock lock(this);
    if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
    if (auto it = studies_.find(spec.name()); it != studies_.end()) {
      ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyLocked(spec.name()));  // Read back.
      const StudyEntry& existing = *found;
      if (const study::SpecDifference difference = study::DifferenceOf(existing.spec, spec);
          !difference.text.empty()) {
        return absl::AlreadyExistsError(absl::StrCat(
            "study \"", spec.name(), "\" exists with a different spec (", difference.text,
            "); nothing was imported. Delete it first (dhpt delete), or import into another "
            "scheduler"));
      }
      // The same import again (a reply that was lost): the same points in the same order.
      bool same = existing.created() == static_cast<int>(trials.size());
      for (size_t n = 0; same && n < trials.size(); ++n) {
        same = existing.space.Key(existing.history[n].point) == space.Key(trials[n].point);
      }
      if (!same) {
        return absl::FailedPreconditionError(absl::StrCat(
            "study \"", spec.name(), "\" exists with ", existing.created(),
            " trials that are not the export's ", trials.size(), "; nothing was imported. "
            "Delete it first (dhpt delete), or import into another scheduler"));
      }
      reply = BuildStudyLocked(existing);
      stored = store_->last_sequence();
    } else {
      RETURN_IF_ERROR(CheckMemoryLocked());
      RETURN_IF_ERROR(CheckRoomForStudyLocked(spec));
      ASSIGN_OR_RETURN(std::unique_ptr<StudyEntry> owned, NewStudyEntryLocked(spec));
      StudyEntry& study = *owned;
      study.spec = spec;
      study.state = ended ? in.state()
                          : (in.state() == v1::Study::RUNNING ? v1::Study::RUNNING
                                                              : v1::Study::PENDING);
      study.create_time = in.has_create_time() ? in.create_time() : ToTimestamp(options_.clock());
      if (ended) study.end_time = in.end_time();
      study.order = next_study_order_++;
      study.head = next_position_++;

      std::vector<v1::Trial> rows;
      std::vector<StoredIntermediateValue> values;
      rows.reserve(trials.size());
      for (ImportedTrial& imported : trials) {
        const uint64_t id = next_trial_id_++;  // Never an id the export names.
        TrialEntry& entry = trials_[id];
        entry.trial() = std::move(imported.trial);
        entry.trial().set_id(id);
        entry.curve.number = entry.number();
        entry.study = &study;
        entry.position = study.head = next_position_++;
        study.keys.insert(study.space.Key(imported.point));
        study.trial_ids.push_back(id);
        study.history.push_back({std::move(imported.point), optimizer::TrialStatus::kRunning, {}});
        const v1::Trial& t = entry.trial();
        for (int attempt = 1; attempt <= t.attempts_size(); ++attempt) {
          auto curve = curves.find({t.number(), attempt});
          if (curve == curves.end()) continue;
          const v1::TrialCurve& c = *curve->second;
          for (int j = 0; j < c.steps_size(); ++j) {
            values.push_back({id, attempt, c.steps(j), c.values(j)});
          }
          // Early stopping judges by each trial's latest attempt, as Recover rebuilds it.
          if (attempt == t.attempt() &&
              !std::holds_alternative<std::monostate>(study.early_stopping)) {
            for (int j = 0; j < c.steps_size(); ++j) {
              entry.curve.values.push_back({c.steps(j), c.values(j)});
            }
            if (c.steps_size() > 0) entry.live->last_step = c.steps(c.steps_size() - 1);
            entry.live->stored_values = c.steps_size();
          }
        }
        rows.push_back(t);
        if (TrialTerminal(t.state())) {
          RecordTrialEndLocked(entry);
          CompactLocked(entry);
        } else if (t.lost_attempts() >= study.spec.max_attempts()) {
          // Held when it was exported: held again for a lease, as a restart holds it, so it is
          // never handed out past its limit.
          HoldLocked(entry, options_.clock() + Lease(),
                     "its worker was lost before the study was exported");
        } else {
          entry.live->queued_or_reported = options_.clock();
          study.pending.push_back(id);
        }
      }
      // A study not ended has no reason of its own: the exporter's was what it waited for. An
      // ended one's reason is said again for the trials imported, which an edited export may
      // have cut ("all 6 trials finished" over 3 trials would be false).
      if (ended) {
        study.state_reason = ImportedEndReason(
            in, spec.max_trials(), study.completed + study.failed + study.pruned, study.failed,
            study.cancelled);
      }
      spec_bytes_total_ += static_cast<int64_t>(study.spec.ByteSizeLong());
      study_order_.push_back(&study);
      study_order_changed_ = true;
      if (!study.terminal()) dispatchable_.push_back(&study);
      studies_[spec.name()] = std::move(owned);
      // One write: a crash before its commit leaves nothing of the study, after it all of it.
      study.last_write = store_->PutImportedStudy(BuildStudyLocked(study), rows, values);
      DHPT_LOG_INFO("study %s imported: %d trials, %d intermediate values", spec.name(),
                    static_cast<int>(rows.size()), static_cast<int>(values.size()));
      CheckStudyEndLocked(study);
      if (study.terminal() && !study.cached) CacheEndedLocked(study);  // Imported ended.
      DispatchLocked();
      reply = BuildStudyLocked(study);
      stored = store_->last_sequence();
    }
  }
  // Acknowledged only once it would survive a crash.
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the study is imported but ", status.message(),
                                               "; import it again to check"));
  }
  return reply;
}

absl::StatusOr<std::vector<v1::TrialCurve>> SchedulerCore::TrialCurves(
    const std::vector<v1::Trial>& trials, ReplyBudget::Lease& lease) {
  std::vector<uint64_t> ids;
  std::map<uint64_t, int64_t> numbers;
  for (const v1::Trial& trial : trials) {
    ids.push_back(trial.id());
    numbers[trial.id()] = trial.number();
  }
  // Values are queued before they are committed: read them once they are.
  if (absl::Status synced = store_->Sync(store_->last_sequence()); !synced.ok()) {
    return absl::UnavailableError(
        absl::StrCat("intermediate values cannot be read now: ", synced.message()));
  }
  ASSIGN_OR_RETURN(std::vector<StoredIntermediateValue> values,
                   store_->ReadIntermediateValues(ids));
  std::vector<v1::TrialCurve> curves;
  for (const StoredIntermediateValue& value : values) {
    if (curves.empty() || curves.back().number() != numbers[value.trial_id] ||
        curves.back().attempt() != value.attempt) {
      curves.emplace_back().set_number(numbers[value.trial_id]);
      curves.back().set_attempt(value.attempt);
    }
    curves.back().add_steps(value.step);
    curves.back().add_values(value.value);
  }
  size_t bytes = 0;
  for (const v1::TrialCurve& curve : curves) bytes += curve.ByteSizeLong();
  RETURN_IF_ERROR(reply_budget_.Grow(lease, bytes));
  return curves;
}

}  // namespace dhpt::scheduler
