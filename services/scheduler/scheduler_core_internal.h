#pragma once

// What the scheduler core's files share and nothing else includes: a study's entry and the
// small conversions every part of the core uses. The core is split by concern (recovery,
// studies, workers and records in scheduler_core.cc, dispatch in dispatch.cc, ask and tell in
// client_trials.cc, warm starts in warm_start.cc, watch fan-out in watch.cc, ended studies
// leaving memory in ended_studies.cc); each file defines SchedulerCore members over
// these types.

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/util/time_util.h"
#include "services/common/unsafe_text.h"
#include "services/scheduler/pareto_front.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/trial_sample.h"
#include "services/study/spec_validation.h"

namespace dhpt::scheduler {

// Page tokens: "<kind>|<filter>|<position>", web-safe base64, so a client treats them as opaque
// and a token from another request is recognised and refused (scheduler_core.cc).
std::string PageToken(absl::string_view kind, absl::string_view filter, uint64_t position);
absl::StatusOr<uint64_t> PagePosition(absl::string_view token, absl::string_view kind,
                                      absl::string_view filter);
// What a ListTrials token is good for: the study, by name and creation order (a token of a
// deleted study is no good for a new one of the same name), the state listed and the view (a
// values_only page followed by full ones would mix two shapes of trial in one listing).
inline std::string TrialPageFilter(absl::string_view study, v1::Trial::State only,
                                   SchedulerCore::TrialView view, uint64_t order) {
  return absl::StrCat(study, "|", only, "|", static_cast<int>(view), "|", order);
}
// Whether a study of `spec` whose largest trial is `largest_trial_bytes` answers within
// kMaxStudyAnswerBytes: INVALID_ARGUMENT naming the sizes if not. CreateStudy checks the most
// a trial can hold; ImportStudy also the trials it is given (whose attempts, up to
// kMaxImportedAttemptsPerTrial, may outnumber max_attempts).
absl::Status CheckStudyAnswerBytes(const v1::StudySpec& spec, size_t largest_trial_bytes);
// A ListTrials page's token and where it resumes. A sampled listing's token also carries its
// stride and the best value kept so far (its bits: exact), which `sample` takes back; a token of
// another stride, or of no sample, is refused as any other token.
std::string TrialPageToken(absl::string_view filter, const TrialSample& sample, uint64_t number);
absl::StatusOr<uint64_t> TrialPageStart(absl::string_view token, absl::string_view filter,
                                        TrialSample& sample);

// A SuggestTrials call waiting for a model-based suggestion.
struct SchedulerCore::SuggestWaiter {
  std::string client_id;
  std::string request_id;  // SuggestTrialsRequest.request_id; empty when the client gave none.
  int count = 1;
  std::vector<uint64_t> given;  // Trial ids leased to it so far, each once.
  // Whether it started a lease (a new trial, or one taken back after a restart): then it is
  // answered only once that is stored.
  bool started_leases = false;
  SuggestDone done;
};

// One WatchStudy stream: where it has read to in its study's events.
struct SchedulerCore::WatchState {
  StudyEntry* study = nullptr;
  StudyWatcher* watcher = nullptr;
  uint64_t position = 0;
  bool summaries_only = false;
  bool waiting = false;  // A read found nothing: OnEventsReady is due.
  bool answered = false;  // A first read returned (events, or that it is up to date).
};

// A failed trial of a study's first ones, for fail fast.
struct FirstError {
  int64_t number;
  std::string error;
};

struct SchedulerCore::StudyEntry {
  v1::StudySpec spec;
  v1::Study::State state = v1::Study::PENDING;
  std::string state_reason;
  google::protobuf::Timestamp create_time;
  google::protobuf::Timestamp end_time;

  optimizer::SearchSpace space;
  std::unique_ptr<optimizer::Optimizer> optimizer;
  // Indexed by trial number: the optimiser's history, and the ids of the trials.
  std::vector<optimizer::TrialRecord> history;
  absl::flat_hash_set<std::string> keys;
  std::vector<uint64_t> trial_ids;
  // Trials waiting for a worker: requeued ones first (front), in order.
  std::deque<uint64_t> pending;
  int held = 0;  // Pending but out of the queue, for a lost worker's return (RequeueLocked).
  int running = 0;
  // No new trial may start: a held trial keeps the slot it ran in for its worker's return.
  bool AtParallelCap() const {
    return spec.parallel_trials() > 0 && running + held >= spec.parallel_trials();
  }
  int completed = 0;
  int failed = 0;
  int cancelled = 0;
  // The optimiser has no point left (grid exhausted, countable space covered).
  bool exhausted = false;
  // Why the optimiser stopped, when it failed (ran out of memory, ...): the study ends with it.
  std::string optimizer_error;
  // A suggestion is being computed off the lock; at most one per study, so suggestion n is
  // always made from a history of n trials.
  bool suggesting = false;
  // A worker reached the study's turn while its suggestion was being made, and waits for it
  // instead of passing the turn on: round robin stays fair to model-based studies. One worker
  // per suggestion; the study keeps the front of the line until the suggestion comes. Only
  // while its suggestions are quick (kMaxSuggestionWorthWaitingFor): a study whose suggestions
  // are slow, or whose first is still being made, passes its turn, so it starves no other.
  uint64_t turn_holder = 0;  // The session whose slot waits for the suggestion; 0 if none.
  absl::Duration last_suggestion_took = absl::InfiniteDuration();
  std::optional<uint64_t> best;
  // Watch fan-out: the watches of the study, its events for them to read, and the position of
  // its latest change.
  std::vector<uint64_t> watch_ids;
  int trial_watchers = 0;  // Watches that read trial events (not summaries only).
  std::optional<WatchJournal> journal;  // While it is watched.
  uint64_t head = 0;
  // A trial changed since the last summary event, which was made then.
  bool summary_stale = false;
  absl::Time last_summary = absl::InfinitePast();
  study::EarlyStoppingRule early_stopping;
  // Multi-objective studies: the non-dominated feasible completed trials.
  std::optional<ParetoFront> front;
  int pruned = 0;
  // Trials from AddTrials: learnt from, never run, and outside max_trials and the counts.
  int added = 0;
  // Trials leased to ask-and-tell clients now, and calls waiting for more.
  absl::flat_hash_set<uint64_t> leased;
  std::deque<std::unique_ptr<SuggestWaiter>> suggest_waiters;
  // ServeSuggestWaitersLocked is running for this study (taking a trial can end the study,
  // which serves the waiters again from inside).
  bool serving_waiters = false;
  // The errors of its first failed trials, up to FailFastTrials(spec), in the order they
  // ended: the same error every time ends the study (fail fast).
  std::vector<FirstError> first_errors;
  // Some trial reported progress (a second intermediate value): early stopping has a curve to
  // judge.
  bool progress_reported = false;
  // Ended and evicted: its trials are in the store only (trial_ids, history, keys, front and
  // optimiser are empty) and `summary` (without the spec) answers for it until it is read
  // back (SchedulerCore::LoadEvictedLocked).
  bool evicted = false;
  // Which eviction it is in (of the core's, numbered): a read back begun off the lock during
  // one is not put into the study after another (FindStudyReadingBack).
  uint64_t eviction = 0;
  v1::Study summary;
  // The latest write of it or its trials: it may be evicted only once that is committed, so a
  // read back sees everything it had.
  WriteSequence last_write = 0;
  // Its changes written to the store in this process (of it or its trials; an eviction's
  // summary is none): what was computed from the study holds while this stays the same.
  uint64_t changes = 0;
  // GetParamImportances' answers of the study once ended, the latest first, at most
  // kKeptImportanceAnswers (a few numbers each): kept through its eviction, so an ended study
  // out of memory is not read from the store again for the same question (issue 31).
  struct KeptImportances {
    std::string request;  // The request without the study's name, serialised.
    uint64_t changes = 0;  // As of this count of changes.
    v1::GetParamImportancesResponse response;
  };
  std::vector<KeptImportances> importances;
  // Its place in the core's cache of ended studies in memory, and the bytes counted for it.
  std::optional<std::list<StudyEntry*>::iterator> cached;
  size_t cached_bytes = 0;
  uint64_t order = 0;    // Creation order, for ListStudies pages.
  bool deleted = false;  // Deleted while a suggestion was computed for it.
  // Its published summary (SchedulerCore::TrackSummaryLocked): read by a user, so kept
  // published; changed since it was, and waiting in summaries_changed_; and the spec and best
  // trial the publications share (the best as of its trial's position).
  bool summary_tracked = false;
  bool summary_changed = false;
  std::shared_ptr<const v1::StudySpec> published_spec;
  std::shared_ptr<const v1::Trial> published_best;
  uint64_t published_best_id = 0;
  uint64_t published_best_position = 0;

  bool terminal() const {
    return state == v1::Study::COMPLETED || state == v1::Study::STOPPED ||
           state == v1::Study::FAILED;
  }
  int created() const { return static_cast<int>(trial_ids.size()); }
  // The trials that count towards max_trials.
  int budget_used() const { return created() - added; }
  // At its end: every trial suggested and none waiting, so a free worker can only run a
  // duplicate of one still running (DuplicateOntoLocked).
  bool all_given() const {
    return !terminal() && pending.empty() && (exhausted || budget_used() >= spec.max_trials());
  }
};

// Without TimeUtil's nanosecond count: the end game converts every running trial's start at
// each free worker, and a count of nanoseconds overflows past the year 2262.
inline absl::Time FromTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

inline google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

// Completed trials without progress after which an early-stopping study says its rule is idle.
inline constexpr int kCompletedTrialsBeforeIdleRuleNotice = 3;

// The failed trials, all alike, that end a study before any succeeds; 0 = never. EXTERNAL
// studies' trials fail as their clients say (infeasible points), not from a broken setup.
inline int FailFastTrials(const v1::StudySpec& spec) {
  if (spec.model().kind() == v1::Model::EXTERNAL) return 0;
  return spec.has_fail_fast_trials() ? spec.fail_fast_trials() : study::kDefaultFailFastTrials;
}

// The spec's limit on one attempt, if it sets one.
inline std::optional<absl::Duration> TrialTimeout(const v1::StudySpec& spec) {
  if (!spec.has_trial_timeout()) return std::nullopt;
  return absl::Seconds(spec.trial_timeout().seconds()) +
         absl::Nanoseconds(spec.trial_timeout().nanos());
}

inline bool TrialTerminal(v1::Trial::State state) {
  return state == v1::Trial::COMPLETED || state == v1::Trial::FAILED ||
         state == v1::Trial::CANCELLED || state == v1::Trial::PRUNED;
}

// Cancels one attempt: the worker stops it, or forgets its result if it has finished.
inline v1::SchedulerMessage CancelMessage(uint64_t trial_id, int attempt, uint64_t epoch,
                                   std::string reason) {
  v1::SchedulerMessage message;
  v1::Cancel& cancel = *message.mutable_cancel();
  cancel.set_trial_id(trial_id);
  cancel.set_attempt(attempt);
  cancel.set_epoch(epoch);
  cancel.set_reason(std::move(reason));
  return message;
}

// Charges the trial's current attempt as lost, once: its worker (or client) started it and
// was lost. A trial whose attempt has no record (an export from before attempts were listed)
// is charged by its count alone.
inline void ChargeLostAttempt(v1::Trial& trial) {
  if (trial.attempt() >= 1 && trial.attempt() <= trial.attempts_size()) {
    v1::Trial::Attempt& attempt = *trial.mutable_attempts(trial.attempt() - 1);
    if (attempt.lost()) return;
    attempt.set_lost(true);
  }
  trial.set_lost_attempts(trial.lost_attempts() + 1);
}

// Takes back the charge of `attempt` (1-based), if it had one: its result counted, or its
// worker came back for it, so it was not lost after all.
inline void UnchargeAttempt(v1::Trial& trial, int attempt) {
  if (attempt < 1 || attempt > trial.attempts_size()) return;
  v1::Trial::Attempt& record = *trial.mutable_attempts(attempt - 1);
  if (!record.lost()) return;
  record.set_lost(false);
  trial.set_lost_attempts(trial.lost_attempts() - 1);
}

// Records an ending trial as the attempt (1-based, one of its attempts) whose result counted:
// a late result of an earlier attempt (its worker or client lost, or a duplicate's slow
// original) takes that attempt's number and start, so its duration is its own.
inline void RecordAsAttempt(v1::Trial& trial, int attempt) {
  if (attempt == trial.attempt()) return;
  if (trial.attempt() >= 1 && trial.has_start_time()) {  // The attempt it cancels keeps its start.
    *trial.mutable_attempts(trial.attempt() - 1)->mutable_start_time() = trial.start_time();
  }
  const v1::Trial::Attempt& given = trial.attempts(attempt - 1);
  if (given.has_start_time()) *trial.mutable_start_time() = given.start_time();
  trial.set_attempt(attempt);
}

// Cancels the trial's current attempt.
inline v1::SchedulerMessage CancelMessage(const v1::Trial& trial, std::string reason) {
  const uint64_t epoch =
      trial.attempts_size() >= trial.attempt() && trial.attempt() > 0
          ? trial.attempts(trial.attempt() - 1).epoch()
          : 0;
  return CancelMessage(trial.id(), trial.attempt(), epoch, std::move(reason));
}

// What UpdateStudy may change: the budget and the limits. Anything else (space, algorithm,
// objective, data) would make the history another study's: that is a new study with
// --warm-start.
inline constexpr std::array<absl::string_view, 4> kUpdatableFields = {
    "max_trials", "parallel_trials", "max_failed_trials", "trial_timeout"};

// Worker text for logs, results and metric labels: cut to `limit`, control bytes replaced, so
// a worker cannot grow the scheduler's memory or forge log lines.
inline std::string WorkerText(absl::string_view text, size_t limit) {
  size_t cut = std::min(text.size(), limit);
  // Not inside a UTF-8 character: a string field must stay valid UTF-8, or a reader's parse of
  // the trial (the Python client's, grpcurl's) fails.
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  const absl::string_view kept = text.substr(0, cut);
  std::string out;
  out.reserve(kept.size() + 3);
  // Each unsafe character (unsafe_text.h: controls, C1's too, and the invisible or
  // direction-changing formats; hostile review: a C1 CSI and U+202E came back raw) a space.
  for (size_t i = 0; i < kept.size();) {
    const size_t unsafe = UnsafeCharacterBytes(kept, i);
    out.push_back(unsafe > 0 ? ' ' : kept[i]);
    i += std::max<size_t>(unsafe, 1);
  }
  if (text.size() > limit) absl::StrAppend(&out, "...");
  return out;
}

// A copy of a worker's result within the protocol's limits: the objective metric first, then
// at most kMaxResultMetrics names of sane length with finite values (a NaN or an infinity
// measures nothing, and stored it made the study's export one that import refuses); text cut
// short. An objective that is not finite is dropped too: the trial fails as one that did
// not report it.
inline v1::TrialResult BoundedResult(const v1::TrialResult& result, const std::string& objective) {
  v1::TrialResult bounded;
  bounded.set_trial_id(result.trial_id());
  bounded.set_attempt(result.attempt());
  bounded.set_state(result.state());
  bounded.set_error(WorkerText(result.error(), kMaxWorkerErrorBytes));
  bounded.set_device(WorkerText(result.device(), kMaxWorkerTextBytes));
  bounded.set_out_of_memory(result.out_of_memory());
  auto& metrics = *bounded.mutable_metrics();
  const auto keep = [&metrics](const std::string& name, double value) {
    if (!name.empty() && name.size() <= kMaxMetricNameBytes && std::isfinite(value) &&
        !HasUnsafeCharacters(name)) {
      metrics[name] = value;
    }
  };
  if (auto it = result.metrics().find(objective); it != result.metrics().end()) {
    keep(objective, it->second);
  }
  for (const auto& [name, value] : result.metrics()) {
    if (static_cast<int>(metrics.size()) >= kMaxResultMetrics) break;
    keep(name, value);
  }
  return bounded;
}

// Bounded device labels for metrics: "cpu" or "cuda", whatever the device index, or "client"
// for trials evaluated by ask-and-tell clients.
inline std::string DeviceLabel(const v1::WorkerCapabilities& worker) {
  return worker.device_kind() == v1::WorkerCapabilities::CUDA ? "cuda" : "cpu";
}
inline std::string DeviceLabel(absl::string_view device) {
  // Workers write this text: only known values become labels, so none can grow the series.
  const absl::string_view kind = device.substr(0, device.find(':'));
  if (kind == "cpu" || kind == "cuda" || kind == "client") return std::string(kind);
  return device.empty() ? "unknown" : "other";
}

}  // namespace dhpt::scheduler
