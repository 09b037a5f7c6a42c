// Ask and tell: clients that are not workers evaluate the trials of EXTERNAL studies. A client
// holds a lease on each trial it was given (renewed by ReportProgress), as Vizier's clients do;
// an attempt given to a client is recorded like a worker's, so results count once and only from
// the client that holds or held the trial.

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/common/logging.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {
namespace {

// A client_id or request_id: up to kMaxClientIdBytes of letters, digits, . _ - @ :.
bool IsIdWord(absl::string_view id) {
  return id.size() <= kMaxClientIdBytes && std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@' ||
                  c == ':';
         });
}

absl::Status ValidateClientId(absl::string_view client_id) {
  if (client_id.empty()) {
    return absl::InvalidArgumentError(
        "client_id: is required: a name for this evaluator, the same after it restarts");
  }
  if (!IsIdWord(client_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "client_id: 1-", kMaxClientIdBytes, " letters, digits, '.', '_', '-', '@' or ':'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequestId(absl::string_view request_id) {
  if (!IsIdWord(request_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request_id: up to ", kMaxClientIdBytes,
        " letters, digits, '.', '_', '-', '@' or ':' (one per ask, repeated by its retries)"));
  }
  return absl::OkStatus();
}

// Whether any attempt of the trial was given to the client.
bool GivenToClient(const v1::Trial& trial, absl::string_view client_id) {
  return std::any_of(trial.attempts().begin(), trial.attempts().end(),
                     [&](const v1::Trial::Attempt& a) { return a.client_id() == client_id; });
}

// Why a client may neither report on nor complete a trial that no attempt was given to it:
// the same answer from ReportProgress and CompleteTrial.
absl::Status NeverGivenError(absl::string_view study, int64_t number, absl::string_view client_id) {
  return absl::PermissionDeniedError(absl::StrCat("trial ", number, " of study \"", study,
                                                  "\" was never given to client \"", client_id,
                                                  "\"; ask for trials with SuggestTrials"));
}

// Whether `request` repeats the call that settled `settled`: the same client with the same
// infeasible reason (`error` as it was stored), or with metrics it holds at the same values.
bool IsRetryOf(const v1::Trial& settled, const v1::CompleteTrialRequest& request,
               const std::string& error) {
  if (settled.client_id() != request.client_id()) return false;
  if (request.pruned()) return settled.state() == v1::Trial::PRUNED;
  if (!request.infeasible_reason().empty()) {
    return settled.state() == v1::Trial::FAILED && settled.error() == error;
  }
  if (settled.state() != v1::Trial::COMPLETED) return false;
  for (const auto& [metric, value] : request.metrics()) {
    auto it = settled.metrics().find(metric);
    if (it == settled.metrics().end() || it->second != value) return false;
  }
  return true;
}

// Why a result for a trial that has ended is not recorded: what the trial holds.
absl::Status AlreadySettledError(const v1::StudySpec& spec, const v1::Trial& settled) {
  std::string holds = settled.error();
  if (settled.has_objective_value()) {
    holds = absl::StrCat(spec.objective().metric(), "=", settled.objective_value(),
                         " from client \"", settled.client_id(), "\"");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "trial ", settled.number(), " is already ", v1::Trial::State_Name(settled.state()),
      holds.empty() ? "" : absl::StrCat(" (", holds, ")"), "; this result is not recorded"));
}

// Whether the trial's current attempt is the client's and, with a `request_id`, was given to
// an ask with that id (a retry of it gets it back; another ask of the same client does not).
bool CurrentAttemptIsClients(const v1::Trial& trial, absl::string_view client_id,
                             absl::string_view request_id = {}) {
  if (trial.attempt() < 1 || trial.attempt() > trial.attempts_size()) return false;
  const v1::Trial::Attempt& current = trial.attempts(trial.attempt() - 1);
  return current.client_id() == client_id &&
         (request_id.empty() || current.request_id() == request_id);
}

}  // namespace

absl::StatusOr<SchedulerCore::StudyEntry*> SchedulerCore::FindExternalStudyLocked(
    absl::string_view name) {
  ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyLocked(name));
  StudyEntry* study = const_cast<StudyEntry*>(found);
  if (study->spec.model().kind() != v1::Model::EXTERNAL) {
    return absl::FailedPreconditionError(absl::StrCat(
        "study \"", name, "\" is evaluated by workers (model kind ",
        v1::Model::Kind_Name(study->spec.model().kind()),
        "); ask and tell is for studies whose model kind is EXTERNAL"));
  }
  return study;
}

absl::StatusOr<SchedulerCore::TrialEntry*> SchedulerCore::FindTrialLocked(StudyEntry& study,
                                                                        int64_t number) {
  if (number < 0 || number >= study.created()) {
    return absl::NotFoundError(absl::StrCat("study \"", study.spec.name(), "\" has no trial ",
                                            number, " (it has ", study.created(), ")"));
  }
  return &trials_.at(study.trial_ids[number]);
}

void SchedulerCore::LeaseLocked(TrialEntry& trial, const std::string& client_id) {
  trial.live->client = client_id;
  trial.live->lease_end = options_.clock() + options_.client_lease;
  // A client begins what it is given: losing the lease costs the attempt.
  trial.live->started = true;
  trial.live->deadline = absl::InfiniteFuture();
  if (std::optional<absl::Duration> timeout = TrialTimeout(trial.study->spec)) {
    trial.live->deadline = options_.clock() + *timeout;
  }
  trial.study->leased.insert(trial.id());
  leased_.insert(trial.id());
}

bool SchedulerCore::ReclaimForClientLocked(TrialEntry& trial, const std::string& client_id,
                                           absl::string_view request_id) {
  if (trial.state() != v1::Trial::PENDING) return false;
  StudyEntry& study = *trial.study;
  v1::Trial& t = trial.trial();
  if (!CurrentAttemptIsClients(t, client_id, request_id) ||
      study.terminal() ||
      (study.spec.parallel_trials() > 0 && study.running >= study.spec.parallel_trials())) {
    return false;
  }
  study.pending.erase(std::remove(study.pending.begin(), study.pending.end(), t.id()),
                      study.pending.end());
  t.set_state(v1::Trial::RUNNING);
  t.set_client_id(client_id);
  t.clear_error();
  UnchargeAttempt(t, t.attempt());  // Its client came back for it: not lost after all.
  ++study.running;
  LeaseLocked(trial, client_id);
  SaveTrialLocked(trial);
  PublishTrialLocked(trial);
  return true;
}

absl::StatusOr<v1::SuggestTrialsResponse> SchedulerCore::SuggestTrials(
    absl::string_view name, int count, absl::string_view client_id,
    absl::string_view request_id) {
  absl::Notification done;
  absl::StatusOr<v1::SuggestTrialsResponse> answer;
  SuggestTrials(name, count, client_id, request_id,
                [&](absl::StatusOr<v1::SuggestTrialsResponse> result) {
                  answer = std::move(result);
                  done.Notify();
                });
  done.WaitForNotification();
  return answer;
}

void SchedulerCore::SuggestTrials(absl::string_view name, int count, absl::string_view client_id,
                                  absl::string_view request_id, SuggestDone done) {
  absl::Status valid = ValidateClientId(client_id);
  if (valid.ok()) valid = ValidateRequestId(request_id);
  if (valid.ok() && (count < 0 || count > kMaxSuggestCount)) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("count: must be between 1 and ", kMaxSuggestCount));
  }
  if (!valid.ok()) {
    done(valid);
    return;
  }
  auto waiter = std::make_unique<SuggestWaiter>();
  waiter->client_id = std::string(client_id);
  waiter->request_id = std::string(request_id);
  waiter->count = std::max(count, 1);
  waiter->done = std::move(done);
  CoreLock lock(this);
  absl::StatusOr<StudyEntry*> study = FindExternalStudyLocked(name);
  if (!study.ok()) {
    waiter->done(study.status());
    return;
  }
  auto& waiters = (*study)->suggest_waiters;
  if (!waiter->request_id.empty()) {
    // A retry of an ask that still waits for a suggestion (its caller stopped waiting): the
    // retry takes its place, so the one ask is given its trials once. What the first was
    // given so far is leased under the request id, so the loops below give it to the retry.
    auto earlier = std::find_if(waiters.begin(), waiters.end(), [&](const auto& w) {
      return w->client_id == waiter->client_id && w->request_id == waiter->request_id;
    });
    if (earlier != waiters.end()) {
      (*earlier)->done(absl::AbortedError(absl::StrCat(
          "a retry of this ask (request_id \"", waiter->request_id, "\") took its place")));
      waiters.erase(earlier);
    }
  }
  if (waiters.size() >= kMaxSuggestWaiters) {
    waiter->done(absl::ResourceExhaustedError(absl::StrCat(
        kMaxSuggestWaiters, " SuggestTrials calls already wait for this study's next "
        "suggestion; ask again shortly")));
    return;
  }
  // Its own first, in number order: held now, then held before a restart (pending under its
  // attempt). With a request id, only this ask's own (a retry after its answer was lost).
  std::vector<std::pair<int64_t, uint64_t>> held;
  for (uint64_t id : (*study)->leased) {
    const TrialEntry& trial = trials_.at(id);
    if (trial.live->client == waiter->client_id &&
        CurrentAttemptIsClients(trial.trial(), waiter->client_id, waiter->request_id)) {
      held.emplace_back(trial.number(), id);
    }
  }
  std::sort(held.begin(), held.end());
  for (const auto& [number, id] : held) {
    if (static_cast<int>(waiter->given.size()) >= waiter->count) break;
    trials_.at(id).live->lease_end = options_.clock() + options_.client_lease;
    waiter->given.push_back(id);
  }
  // While the store refuses writes no lease starts (its result could not be acknowledged):
  // only the trials the client holds already come back.
  if (absl::Status health = store_->health(); !health.ok()) {
    if (waiter->given.empty()) {
      waiter->done(absl::UnavailableError(absl::StrCat(
          "the database refuses writes, so no trial is leased: ", health.message())));
    } else {
      FinishSuggestWaiterLocked(**study, *waiter);
    }
    return;
  }
  // Near the memory cap no new trial starts: the same, saying why. Trials accepted before it
  // (pending: handed back, enqueued, their lease run out) are still given out, as dispatch
  // gives them to workers: only new work waits for memory (TakeTrialLocked).
  if (absl::Status memory = CheckMemoryLocked(); !memory.ok() && (*study)->pending.empty()) {
    if (waiter->given.empty()) {
      waiter->done(memory);
    } else {
      FinishSuggestWaiterLocked(**study, *waiter);
    }
    return;
  }
  std::deque<uint64_t>& pending = (*study)->pending;
  for (size_t i = 0; i < pending.size() && static_cast<int>(waiter->given.size()) < waiter->count;) {
    TrialEntry& trial = trials_.at(pending[i]);
    if (ReclaimForClientLocked(trial, waiter->client_id, waiter->request_id)) {
      waiter->started_leases = true;
      waiter->given.push_back(trial.id());  // Erased from pending: index i is the next.
    } else {
      ++i;
    }
  }
  waiters.push_back(std::move(waiter));
  ServeSuggestWaitersLocked(**study);
}

void SchedulerCore::ServeSuggestWaitersLocked(StudyEntry& study) {
  // Taking a trial may end the study (an exhausted grid), and ending it serves the waiters:
  // that inner call leaves them to this loop, which sees the study ended and answers them.
  if (study.serving_waiters) return;
  study.serving_waiters = true;
  auto& waiters = study.suggest_waiters;
  while (!waiters.empty()) {
    SuggestWaiter& waiter = *waiters.front();
    const bool writable = store_->health().ok();
    while (static_cast<int>(waiter.given.size()) < waiter.count && !shutting_down_ &&
           !study.terminal() && writable && !study.AtParallelCap()) {
      std::optional<uint64_t> id = TakeTrialLocked(study);
      if (!id) break;
      TrialEntry& trial = trials_.at(*id);
      BeginAttemptLocked(trial, "", waiter.client_id, "client");
      trial.trial().mutable_attempts()->rbegin()->set_request_id(waiter.request_id);
      LeaseLocked(trial, waiter.client_id);
      waiter.started_leases = true;
      SaveTrialLocked(trial);
      PublishTrialLocked(trial);
      // A trial whose lease ran out while this call waited comes back once, not twice.
      if (std::find(waiter.given.begin(), waiter.given.end(), *id) == waiter.given.end()) {
        waiter.given.push_back(*id);
      }
    }
    // A model-based suggestion is on its way: the waiters are served again when it arrives.
    if (static_cast<int>(waiter.given.size()) < waiter.count && study.suggesting &&
        !shutting_down_ && !study.terminal()) {
      break;
    }
    FinishSuggestWaiterLocked(study, waiter);
    waiters.pop_front();
  }
  study.serving_waiters = false;
}

void SchedulerCore::FinishSuggestWaiterLocked(const StudyEntry& study, SuggestWaiter& waiter) {
  v1::SuggestTrialsResponse response;
  response.set_lease_ms(absl::ToInt64Milliseconds(options_.client_lease));
  response.set_study_state(study.state);
  for (uint64_t id : waiter.given) {
    // The study may have ended meanwhile, cancelling some of them, and a lease may have run
    // out while the call waited for the rest: only what the client holds now, its lease
    // counted from the answer.
    auto it = trials_.find(id);
    if (it == trials_.end() || it->second.state() != v1::Trial::RUNNING ||
        it->second.live->client != waiter.client_id) {
      continue;
    }
    it->second.live->lease_end = options_.clock() + options_.client_lease;
    *response.add_trials() = it->second.trial();
  }
  const WriteSequence leases = store_->last_sequence();
  if (!waiter.started_leases || response.trials().empty() || leases <= stored_through_) {
    waiter.done(std::move(response));
    return;
  }
  answers_after_store_.push_back({leases, std::move(waiter.done), std::move(response)});
}

absl::StatusOr<v1::ReportProgressResponse> SchedulerCore::ReportClientProgress(
    const v1::ReportProgressRequest& request) {
  RETURN_IF_ERROR(ValidateClientId(request.client_id()));
  if (request.has_step() != request.has_value()) {
    return absl::InvalidArgumentError("step and value: give both (an intermediate value) or "
                                      "neither (only renew the lease)");
  }
  if (request.has_value() && !std::isfinite(request.value())) {
    return absl::InvalidArgumentError("value: must be a finite number");
  }
  if (request.has_step() && request.step() < 0) {
    return absl::InvalidArgumentError("step: must be >= 0");
  }
  if (request.hand_back() && request.has_step()) {
    return absl::InvalidArgumentError("hand_back: a trial handed back reports no value");
  }
  CoreLock lock(this);
  ASSIGN_OR_RETURN(StudyEntry * study, FindExternalStudyLocked(request.study()));
  ASSIGN_OR_RETURN(TrialEntry * trial, FindTrialLocked(*study, request.trial()));
  v1::Trial parsed;
  const v1::Trial& t = MessageLocked(*trial, parsed);
  v1::ReportProgressResponse response;
  if (!GivenToClient(t, request.client_id())) {
    return NeverGivenError(request.study(), request.trial(), request.client_id());
  }
  ReclaimForClientLocked(*trial, request.client_id());
  if (t.state() != v1::Trial::RUNNING || trial->live->client != request.client_id()) {
    if (TrialTerminal(t.state())) {
      // Pruned, ended with its study, or settled by an earlier attempt: stop evaluating it.
      response.set_should_stop(true);
      response.set_reason(t.error());
      if (response.reason().empty()) {
        response.set_reason(absl::StrCat("trial ", t.number(), " is already ",
                                         v1::Trial::State_Name(t.state())));
      }
      return response;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "trial ", t.number(), " of study \"", request.study(), "\" is not leased to client \"",
        request.client_id(), "\" (it is ", v1::Trial::State_Name(t.state()),
        "); ask for trials with SuggestTrials"));
  }
  if (request.hand_back()) {
    // Nothing was learnt from it, so it goes back to the queue as a lost worker's would, but
    // uncharged: the next ask (this client's or another's) gets it.
    ReleaseLocked(*trial);
    RequeueLocked(*trial, absl::StrCat("client \"", request.client_id(), "\" handed it back"),
                  /*lost=*/false);
    ServeSuggestWaitersLocked(*study);
    return response;
  }
  trial->live->lease_end = options_.clock() + options_.client_lease;
  if (request.has_step()) RecordProgressLocked(*trial, request.step(), request.value());
  // Pruned by this report: `t` went with the live message (CompactLocked).
  if (trial->state() == v1::Trial::PRUNED) {
    response.set_should_stop(true);
    response.set_reason(FullTrialLocked(*trial).error());
  }
  return response;
}

absl::StatusOr<v1::Trial> SchedulerCore::CompleteTrial(const v1::CompleteTrialRequest& request) {
  RETURN_IF_ERROR(ValidateClientId(request.client_id()));
  const bool infeasible = !request.infeasible_reason().empty();
  if (request.pruned() && (infeasible || !request.metrics().empty())) {
    return absl::InvalidArgumentError(
        "pruned: a trial the client stopped early has no metrics and no infeasible_reason");
  }
  if (!request.pruned() && infeasible == !request.metrics().empty()) {
    return absl::InvalidArgumentError(
        "metrics: give the trial's metrics, or an infeasible_reason when it could not be "
        "evaluated (not both)");
  }
  if (request.metrics_size() > kMaxResultMetrics) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: more than ", kMaxResultMetrics, " metrics"));
  }
  for (const auto& [metric, value] : request.metrics()) {
    if (!IsUserCodeName(metric)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics: \"", WorkerText(metric, kMaxMetricNameBytes),
          "\" is not a metric name: 1-64 letters, digits, '.', '_' or '-'"));
    }
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("metrics.", metric, ": must be finite"));
    }
  }
  v1::TrialResult result;
  result.set_state(request.pruned() ? v1::Trial::PRUNED
                   : infeasible     ? v1::Trial::FAILED
                                    : v1::Trial::COMPLETED);
  // A reason over kMaxWorkerErrorBytes (a whole traceback) is cut as a worker's error is, not
  // refused: refused, the trial would stay RUNNING until its client's lease ran out.
  result.set_error(request.pruned()
                       ? absl::StrCat("pruned by client \"", request.client_id(), "\"")
                       : absl::StrCat("infeasible: ", WorkerText(request.infeasible_reason(),
                                                                 kMaxWorkerErrorBytes)));
  *result.mutable_metrics() = request.metrics();
  WriteSequence stored = 0;
  v1::Trial reply;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(StudyEntry * study, FindExternalStudyLocked(request.study()));
    ASSIGN_OR_RETURN(TrialEntry * trial, FindTrialLocked(*study, request.trial()));
    v1::Trial parsed;
    if (!GivenToClient(MessageLocked(*trial, parsed), request.client_id())) {
      return NeverGivenError(request.study(), request.trial(), request.client_id());
    }
    if (TrialTerminal(trial->state())) {
      v1::Trial settled = std::move(parsed);  // Parsed above: an ended trial has no live one.
      // A retry of the very call that settled it (its answer was lost, or said UNAVAILABLE)
      // gets the trial again once it is stored; anything else is told what the trial holds,
      // and changes nothing.
      if (!IsRetryOf(settled, request, result.error())) {
        return AlreadySettledError(study->spec, settled);
      }
      stored = store_->last_sequence();
      reply = std::move(settled);
    } else {
      // A client whose lease ran out may still complete the trial while nobody holds it (the
      // first result wins), but never one that another client evaluates now.
      if (!trial->live->client.empty() && trial->live->client != request.client_id()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "trial ", request.trial(), " of study \"", request.study(),
            "\" is leased to client \"", trial->live->client, "\" now (the lease of client \"",
            request.client_id(), "\" ran out); this result is not recorded"));
      }
      if (std::optional<std::string> missing =
              result.state() != v1::Trial::COMPLETED
                  ? std::nullopt
                  : study::MissingMetric(study->spec, result)) {
        return absl::InvalidArgumentError(
            absl::StrCat("metrics: ", *missing, "; report every objective's metric (and "
                         "constrained ones) and complete the trial again"));
      }
      stored = SettleClientTrialLocked(*trial, result, request.client_id());
      reply = FullTrialLocked(*trial);
    }
  }
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the result is accepted but ", status.message(),
                                               "; complete the trial again to check"));
  }
  return reply;
}

WriteSequence SchedulerCore::SettleClientTrialLocked(TrialEntry& trial,
                                                    const v1::TrialResult& result,
                                                    const std::string& client_id) {
  StudyEntry& study = *trial.study;
  // The first result wins, whichever attempt it comes from.
  ReleaseLocked(trial);
  v1::Trial& t = trial.trial();
  if (t.state() == v1::Trial::PENDING) {
    study.pending.erase(std::remove(study.pending.begin(), study.pending.end(), t.id()),
                        study.pending.end());
  }
  if (result.state() == v1::Trial::PRUNED) {
    // Learnt from as the study's own rule's pruned trials are: at the last value it reported,
    // when the study judges values (early_stopping keeps the curve), else with none.
    t.set_state(v1::Trial::PRUNED);
    t.set_error(result.error());
    if (!trial.curve.values.empty() && study.spec.objectives().empty()) {
      (*t.mutable_metrics())[study.spec.objective().metric()] = trial.curve.values.back().value;
      (*t.mutable_metrics())[std::string(kMetricPrunedStep)] =
          static_cast<double>(trial.curve.values.back().step);
    }
  } else {
    study::RecordResult(study.spec, result, t);
  }
  // A client whose lease ran out may complete it while nobody holds it: recorded as that
  // client's latest attempt.
  for (int attempt = t.attempts_size(); attempt >= 1; --attempt) {
    if (t.attempts(attempt - 1).client_id() == client_id) {
      RecordAsAttempt(t, attempt);
      UnchargeAttempt(t, attempt);  // Its lease ran out, but its result came.
      break;
    }
  }
  t.set_client_id(client_id);
  t.set_device("client");
  *t.mutable_end_time() = ToTimestamp(options_.clock());
  RecordTrialEndLocked(trial);
  const WriteSequence stored = SaveTrialLocked(trial);
  PublishTrialLocked(trial);
  CheckStudyEndLocked(study);
  return stored;
}

int SchedulerCore::ExpireClientLeasesLocked() {
  const absl::Time now = options_.clock();
  std::vector<uint64_t> expired;
  for (uint64_t id : leased_) {
    if (trials_.at(id).live->lease_end < now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    TrialEntry& trial = trials_.at(id);
    const std::string client = trial.live->client;
    ReleaseLocked(trial);
    RequeueLocked(trial,
                  absl::StrCat("client \"", client, "\" did not report within its lease of ",
                               absl::FormatDuration(options_.client_lease)),
                  /*lost=*/true);
    CheckStudyEndLocked(*trial.study);
  }
  return static_cast<int>(expired.size());
}

}  // namespace dhpt::scheduler
