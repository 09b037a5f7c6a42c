// Dispatch: which study's trial goes to which worker, how trials are created from
// suggestions (inline for cheap optimisers, on the suggestion threads for model-based ones),
// begun, requeued and ended, and when a study ends.

#include <algorithm>
#include <new>
#include <set>
#include <stdexcept>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/logging.h"
#include "services/common/model_catalog.h"
#include "services/scheduler/placement.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/scheduler/speed_model.h"
#include "services/study/model_choice.h"
#include "services/study/spec_translation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {

namespace {

// A worker waits for a study's suggestion at its turn only when the study's last suggestion
// took at most this long: waiting is fairer than passing the turn on, and costs the worker
// less than a trial's overhead.
constexpr absl::Duration kMaxSuggestionWorthWaitingFor = absl::Milliseconds(100);

// Pending trials a worker of known speed compares by size per take: a bound on dispatch's cost
// with a long queue (an enqueued grid), beyond which queue order holds.
constexpr int kMaxPendingSizedPerTake = 64;

// New trials a worker may have held for workers of other kinds (a model-choice study) per
// take: with two kinds, four leave it without a trial one time in sixteen; a bound, so that a
// take does not spend the study's budget on the other kind's queue.
constexpr int kMaxHeldSuggestionsPerTake = 4;

// A running trial without progress reports that has taken up to this many times its predicted
// time is still expected to end by then (PredictedRemainingLocked).
constexpr double kMaxPredictedOverrun = 2;

// Spec validation keeps a suggestion within kSuggestionMemoryBudgetBytes, but a scheduler
// under a tighter memory limit (or with other studies' suggestions running) can still fail to
// allocate. That fails this study's suggestions with a reason (AcceptSuggestionLocked); it must
// not end the scheduler and every other study with it.
absl::StatusOr<std::optional<optimizer::Point>> SuggestWithinMemory(
    optimizer::Optimizer& optimizer, const optimizer::History& history) {
  try {
    return optimizer.Suggest(history);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the suggestion ran out of memory: the scheduler's memory limit is below what this study "
      "needs (up to ", optimizer::kSuggestionMemoryBudgetBytes >> 20, " MiB per suggestion "
      "thread, docs/optimizers.md#memory); give the scheduler more memory or fewer "
      "--suggestion_threads, or submit the study with fewer parameters or values"));
}

}  // namespace

bool SchedulerCore::HasTrialToGive(const StudyEntry& study) const {
  if (study.terminal() || study.AtParallelCap()) return false;
  return !study.pending.empty() ||
         (!study.exhausted && study.budget_used() < study.spec.max_trials());
}

bool SchedulerCore::Runnable(const StudyEntry& study, const WorkerEntry& worker) const {
  return HasTrialToGive(study) && CanRun(study.spec, worker.capabilities);
}

bool SchedulerCore::RunsTrialLocked(const TrialEntry& trial,
                                    const v1::WorkerCapabilities& worker) const {
  if (study::ModelKindParameter(trial.study->spec) < 0) return true;  // One kind: CanRun said.
  return RunsKind(worker, TrialSizeLocked(trial).first);
}

std::string SchedulerCore::KindsNoWorkerRunsLocked(const StudyEntry& study) const {
  if (study::ModelKindParameter(study.spec) < 0) return "";  // One kind: CanRun said.
  std::set<std::string> kinds;
  for (uint64_t id : study.pending) {
    const TrialEntry& trial = trials_.at(id);
    const bool runnable = absl::c_any_of(workers_, [&](const auto& session_and_worker) {
      return RunsTrialLocked(trial, session_and_worker.second.capabilities);
    });
    if (runnable) return "";  // One runs: the study is not stuck.
    kinds.insert(v1::Model::Kind_Name(TrialSizeLocked(trial).first));
  }
  return absl::StrJoin(kinds, " or ");
}

std::optional<uint64_t> SchedulerCore::TakeTrialLocked(StudyEntry& study,
                                                       uint64_t memory_bytes,
                                                       std::optional<double> speed,
                                                       const v1::WorkerCapabilities* worker) {
  // In queue order, passing over the trials that ran out of memory on a worker this size. A
  // worker of known speed looks further (kMaxPendingSizedPerTake): the longest trials go to the
  // fast workers, which dispatch serves first, and the shortest to the slow ones.
  auto chosen = study.pending.end();
  double chosen_units = 0;
  int sized = 0;
  for (auto it = study.pending.begin(); it != study.pending.end(); ++it) {
    const TrialEntry& trial = trials_.at(*it);
    if (trial.live->min_memory_bytes > memory_bytes) continue;
    if (worker != nullptr && !RunsTrialLocked(trial, *worker)) continue;
    if (!speed) {
      chosen = it;
      break;
    }
    const double units = TrialSizeLocked(trial).second;
    if (chosen == study.pending.end() ||
        (*speed >= 1 ? units > chosen_units : units < chosen_units)) {
      chosen = it;
      chosen_units = units;
    }
    if (++sized >= kMaxPendingSizedPerTake) break;
  }
  if (chosen != study.pending.end()) {
    const uint64_t id = *chosen;
    study.pending.erase(chosen);
    return id;
  }
  // A model-choice study's new trial of a kind this worker does not run is held for a worker
  // that does; the worker asks again, up to kMaxHeldSuggestionsPerTake times.
  for (int held = 0;;) {
    if (study.exhausted || study.budget_used() >= study.spec.max_trials()) return std::nullopt;
    if (!CheckMemoryLocked().ok()) return std::nullopt;  // Near the memory cap: none new.
    if (!study.optimizer->cheap()) {
      RequestSuggestionLocked(study);
      return std::nullopt;
    }
    // Timed with the core's clock, as the threaded path below is: what a suggestion took decides
    // dispatch order (kMaxSuggestionWorthWaitingFor), which a test's clock must control.
    const absl::Time start = options_.clock();
    const std::optional<std::vector<bool>> learn =
        study::LearningFilter(study.early_stopping, study.created());
    absl::StatusOr<std::optional<optimizer::Point>> suggestion = SuggestWithinMemory(
        *study.optimizer,
        optimizer::History{study.history, study.keys, learn ? &*learn : nullptr});
    observer_->SuggestionMade(study.spec.algorithm().name(), options_.clock() - start);
    std::optional<uint64_t> id = AcceptSuggestionLocked(study, std::move(suggestion));
    if (!id || worker == nullptr || RunsTrialLocked(trials_.at(*id), *worker)) return id;
    study.pending.push_back(*id);
    WakeSetAsideLocked();  // A worker that runs it may be set aside.
    if (++held >= kMaxHeldSuggestionsPerTake) return std::nullopt;
  }
}

void SchedulerCore::RequestSuggestionLocked(StudyEntry& study) {
  if (study.suggesting) return;
  study.suggesting = true;
  // A snapshot: trials finishing meanwhile do not change what suggestion n is made from.
  auto history = std::make_shared<std::vector<optimizer::TrialRecord>>(study.history);
  auto keys = std::make_shared<absl::flat_hash_set<std::string>>(study.keys);
  auto learn = std::make_shared<const std::optional<std::vector<bool>>>(
      study::LearningFilter(study.early_stopping, study.created()));
  suggestions_->Post([this, &study, history, keys, learn] {
    const absl::Time start = options_.clock();
    absl::StatusOr<std::optional<optimizer::Point>> suggestion = SuggestWithinMemory(
        *study.optimizer,
        optimizer::History{*history, *keys, learn->has_value() ? &**learn : nullptr});
    const absl::Duration took = options_.clock() - start;
    CoreLock lock(this);
    study.suggesting = false;
    // The slot holding the study's turn is free again (for this trial, first, as the study
    // keeps the front of the line): a dispatch follows in every case.
    if (auto holder = workers_.find(std::exchange(study.turn_holder, 0)); holder != workers_.end()) {
      --holder->second.held_turns;
      MaybeFreeLocked(holder->first);
    }
    if (study.deleted) {
      std::erase_if(deleted_studies_, [&](const auto& entry) { return entry.get() == &study; });
      DispatchLocked();
      return;
    }
    observer_->SuggestionMade(study.spec.algorithm().name(), took);
    study.last_suggestion_took = took;
    if (!study.terminal() && !shutting_down_) {
      if (std::optional<uint64_t> id = AcceptSuggestionLocked(study, std::move(suggestion))) {
        study.pending.push_back(*id);
      }
    }
    DispatchLocked();
    ServeSuggestWaitersLocked(study);
  });
}

std::optional<uint64_t> SchedulerCore::AcceptSuggestionLocked(
    StudyEntry& study, absl::StatusOr<std::optional<optimizer::Point>> suggestion) {
  if (!suggestion.ok() || !suggestion->has_value()) {
    study.exhausted = true;
    MarkSummaryChangedLocked(study);  // No budget pending now; perhaps a reason.
    if (!suggestion.ok()) {
      DHPT_LOG_WARNING("study %s: no further suggestion: %s", study.spec.name(),
                       suggestion.status().ToString());
      study.state_reason = absl::StrCat("optimiser stopped: ", suggestion.status().message());
      study.optimizer_error = study.state_reason;
    }
    CheckStudyEndLocked(study);
    return std::nullopt;
  }
  TrialEntry& entry = CreateTrialLocked(study, std::move(**suggestion), v1::Trial::SUGGESTED);
  return entry.id();
}

SchedulerCore::TrialEntry& SchedulerCore::CreateTrialLocked(StudyEntry& study,
                                                            optimizer::Point point,
                                                            v1::Trial::Origin origin) {
  const uint64_t id = next_trial_id_++;
  TrialEntry& entry = trials_[id];
  entry.study = &study;
  v1::Trial& trial = entry.trial();
  trial.set_id(id);
  trial.set_study(study.spec.name());
  trial.set_number(study.created());
  entry.curve.number = trial.number();
  trial.set_state(v1::Trial::PENDING);
  trial.set_origin(origin);
  *trial.mutable_params() = study::ToParamMap(study.space, point);
  *trial.mutable_create_time() = ToTimestamp(options_.clock());
  entry.live->queued_or_reported = options_.clock();
  study.keys.insert(study.space.Key(point));
  study.history.push_back({std::move(point), optimizer::TrialStatus::kRunning, {}});
  study.trial_ids.push_back(id);
  if (origin != v1::Trial::ADDED) SaveTrialLocked(entry);  // Its id and number are taken for good.
  return entry;
}

SchedulerCore::Assignment SchedulerCore::AssignOneLocked(uint64_t session, WorkerEntry& worker) {
  // A CUDA worker's slots go first to the studies that need a GPU, then to the rest.
  if (worker.capabilities.device_kind() == v1::WorkerCapabilities::CUDA) {
    const Assignment gpu_first = AssignMatchingLocked(
        session, worker, [](const StudyEntry& study) { return NeedsGpu(study.spec); });
    if (gpu_first != Assignment::kNone) return gpu_first;
  }
  return AssignMatchingLocked(session, worker, [](const StudyEntry&) { return true; });
}

SchedulerCore::Assignment SchedulerCore::AssignMatchingLocked(
    uint64_t session, WorkerEntry& worker, absl::FunctionRef<bool(const StudyEntry&)> eligible) {
  // Taking a trial may end a study (its space used up), which leaves the walk: sizes are read
  // afresh each step.
  const size_t start = next_dispatchable_;
  const StudyEntry* held = nullptr;  // The first study on the walk whose turn a worker holds.
  for (size_t k = 0; k < dispatchable_.size(); ++k) {
    const size_t index = (start + k) % dispatchable_.size();
    StudyEntry& study = *dispatchable_[index];
    if (!eligible(study) || !Runnable(study, worker)) continue;
    if (LeaveToFasterLocked(study, session, worker)) continue;
    const uint64_t memory = worker.capabilities.memory_bytes();
    std::optional<uint64_t> id = TakeTrialLocked(
        study, memory > 0 ? memory : UINT64_MAX,
        options_.speed_placement ? speeds_.OverallSpeed(worker.node_class) : std::nullopt,
        &worker.capabilities);
    if (!id) {
      if (study.suggesting && study.turn_holder == 0 &&
          study.last_suggestion_took <= kMaxSuggestionWorthWaitingFor) {
        study.turn_holder = session;
        ++worker.held_turns;
        next_dispatchable_ = index;
        return Assignment::kWaiting;
      }
      if (study.turn_holder != 0 && held == nullptr) held = &study;
      continue;
    }
    // A study whose turn is held keeps the front of the line.
    auto front = std::find(dispatchable_.begin(), dispatchable_.end(), held);
    next_dispatchable_ = front != dispatchable_.end()
                             ? static_cast<size_t>(front - dispatchable_.begin())
                             : (dispatchable_.empty() ? 0 : (index + 1) % dispatchable_.size());

    StartOnWorkerLocked(session, worker, trials_.at(*id));
    return Assignment::kAssigned;
  }
  return Assignment::kNone;
}

void SchedulerCore::StartOnWorkerLocked(uint64_t session, WorkerEntry& worker,
                                        TrialEntry& entry) {
  const StudyEntry& study = *entry.study;
  const v1::Trial& trial = entry.trial();
  BeginAttemptLocked(entry, worker.worker_id, "", DeviceLabel(worker.capabilities));
  entry.trial().set_node_name(worker.capabilities.node_name());
  entry.session = session;
  worker.running.insert(entry.id());
  SaveTrialLocked(entry);

  v1::SchedulerMessage message;
  v1::Assign& assign = *message.mutable_assign();
  assign.set_trial_id(entry.id());
  assign.set_attempt(trial.attempt());
  assign.set_epoch(epoch_);
  assign.set_study(study.spec.name());
  // A model-choice study's trial runs as its own model_kind (model_choice.h).
  study::ModelForTrial(study.spec, trial.params(), assign.mutable_model(), assign.mutable_params());
  if (study.spec.has_dataset()) *assign.mutable_dataset() = study.spec.dataset();
  assign.set_objective_metric(study.spec.objective().metric());
  entry.live->deadline = absl::InfiniteFuture();
  if (std::optional<absl::Duration> timeout = TrialTimeout(study.spec)) {
    assign.set_timeout_ms(absl::ToInt64Milliseconds(*timeout));
    // The worker stops the trial itself; the scheduler steps in a lease later.
    entry.live->deadline = options_.clock() + *timeout +
                     options_.heartbeat_interval * options_.missed_heartbeats;
  }
  worker.channel->Send(std::move(message));
  PublishTrialLocked(entry);
}

void SchedulerCore::BeginAttemptLocked(TrialEntry& entry, const std::string& worker_id,
                                       const std::string& client_id,
                                       absl::string_view device_label) {
  StudyEntry& study = *entry.study;
  v1::Trial& trial = entry.trial();
  trial.set_state(v1::Trial::RUNNING);
  if (trial.attempt() >= 1 && trial.attempt() <= trial.attempts_size() &&
      trial.has_start_time()) {
    // The earlier attempt's start, for its late result (which may still count).
    *trial.mutable_attempts(trial.attempt() - 1)->mutable_start_time() = trial.start_time();
  }
  // Attempts are numbered by their place in the list: after a worker took back an earlier
  // attempt, the next comes after the later ones too (it was numbered after the current one,
  // and every word of its worker was refused as another attempt's; hostile review).
  trial.set_attempt(trial.attempts_size() + 1);
  v1::Trial::Attempt& given = *trial.add_attempts();
  given.set_worker_id(worker_id);
  given.set_client_id(client_id);
  given.set_epoch(epoch_);
  entry.live->started = false;
  entry.live->stored_values = 0;
  entry.live->last_step.reset();
  entry.live->first_report_ms = 0;
  entry.live->first_report_step = 0;
  entry.curve.values.clear();  // Each attempt's curve starts over.
  trial.set_worker_id(worker_id);
  trial.set_client_id(client_id);
  trial.clear_node_name();
  *trial.mutable_start_time() = ToTimestamp(options_.clock());
  observer_->TrialStarted(study.spec, std::string(device_label),
                          options_.clock() - entry.live->queued_or_reported);
  ++study.running;
  if (study.state == v1::Study::PENDING) {
    study.state = v1::Study::RUNNING;
    study.state_reason.clear();
    SaveStudyLocked(study);
    PublishStudyLocked(study);
  }
}

bool SchedulerCore::LargerWorkerConnectedLocked(const StudyEntry& study,
                                                uint64_t memory_bytes) const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const auto& entry) {
    const v1::WorkerCapabilities& capabilities = entry.second.capabilities;
    return capabilities.memory_bytes() > memory_bytes && CanRun(study.spec, capabilities);
  });
}

void SchedulerCore::DispatchLocked() {
  if (shutting_down_ || dispatchable_.empty()) return;
  // While the store cannot write, nothing new starts: its results could not be acknowledged
  // and would pile up on the workers. Dispatch resumes with the next commit (OnStored).
  if (!store_->health().ok()) return;
  WakeSetAsideLocked();
  // One trial per worker per round, so that workers fill evenly. A worker given nothing is
  // set aside: nothing it can run has a trial to give until a later dispatch finds one.
  // The fastest workers first (learnt speeds; those not learnt yet count as the cluster's
  // median), so that of several ready trials the longest go to them (TakeTrialLocked). With no
  // speed learnt, session order, as first-come dispatch always had.
  bool assigned = true;
  std::vector<std::pair<double, uint64_t>> order;
  while (assigned) {
    assigned = false;
    order.clear();
    for (uint64_t session : maybe_free_) {
      auto worker = workers_.find(session);
      const double speed = worker == workers_.end() || !options_.speed_placement
                               ? 1
                               : speeds_.OverallSpeed(worker->second.node_class).value_or(1);
      order.emplace_back(-speed, session);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [unused, session] : order) {
      if (!maybe_free_.contains(session)) continue;
      auto worker = workers_.find(session);
      if (worker == workers_.end() || worker->second.free_slots() <= 0) {
        maybe_free_.erase(session);
        continue;
      }
      ++sessions_tried_;
      // A slot holding a study's turn counts as taken until the suggestion comes.
      if (DuplicateOntoLocked(session, worker->second, /*early=*/true) ||
          AssignOneLocked(session, worker->second) != Assignment::kNone ||
          DuplicateOntoLocked(session, worker->second)) {
        assigned = true;
      } else {
        SetAsideLocked(session, worker->second);
        maybe_free_.erase(session);
      }
    }
    // Sessions freed during this round (a study's end releases slots) are tried in the next.
    for (uint64_t session : maybe_free_) {
      if (std::none_of(order.begin(), order.end(),
                       [&](const auto& tried) { return tried.second == session; })) {
        assigned = true;
        break;
      }
    }
  }
}

std::pair<v1::Model::Kind, double> SchedulerCore::TrialSizeLocked(const TrialEntry& trial) const {
  if (trial.size_kind < 0) {  // Worked out once (TrialEntry::size_kind).
    const v1::StudySpec& spec = trial.study->spec;
    v1::Model model;
    google::protobuf::Map<std::string, v1::ParameterValue> params;
    v1::Trial parsed;  // An ended trial's params are in its bytes.
    study::ModelForTrial(spec, MessageLocked(trial, parsed).params(), &model, &params);
    trial.size_units = static_cast<float>(TrialWorkUnits(model, params, spec.dataset()));
    const std::optional<double> steps = TrialSteps(model, params);
    trial.size_steps = steps ? static_cast<float>(*steps) : -1;
    trial.size_kind = model.kind();
  }
  return {static_cast<v1::Model::Kind>(trial.size_kind), trial.size_units};
}

std::optional<double> SchedulerCore::TrialStepsLocked(const TrialEntry& trial) const {
  TrialSizeLocked(trial);  // Works the steps out with the size.
  if (trial.size_steps < 0) return std::nullopt;
  return trial.size_steps;
}

// The slower of two paces: since the attempt began, counting the time since its last report
// as spent on no further step (a silent board's grows until it reports again), and between
// its first and its last report (which leaves out the start's dataset load, and shows a board
// that slowed after its speed was learnt, throttled or its link slow, at its next report).
std::optional<double> SchedulerCore::SecondsPerStep(const TrialEntry& trial, double steps,
                                                    absl::Time now) const {
  if (!trial.live->last_step || *trial.live->last_step <= 0 || *trial.live->last_step >= steps) return std::nullopt;
  const absl::Time start = FromTimestamp(trial.trial().start_time());
  const double done = static_cast<double>(*trial.live->last_step);
  double pace = absl::ToDoubleSeconds(now - start) / done;
  if (trial.live->first_report_ms > 0 && done > trial.live->first_report_step) {
    const double between = absl::ToDoubleSeconds(trial.live->queued_or_reported - start) -
                           trial.live->first_report_ms / 1000.0;
    pace = std::max(pace, between / (done - trial.live->first_report_step));
  }
  return pace;
}

std::optional<absl::Duration> SchedulerCore::PredictedRemainingLocked(
    const TrialEntry& trial, const std::string& node_class, absl::Time now) const {
  const auto [kind, units] = TrialSizeLocked(trial);
  const std::optional<absl::Duration> whole = speeds_.Predict(node_class, kind, units);
  if (!whole) return std::nullopt;
  const absl::Duration elapsed = now - FromTimestamp(trial.trial().start_time());
  const std::optional<double> steps = TrialStepsLocked(trial);
  if (const std::optional<double> pace = steps ? SecondsPerStep(trial, *steps, now) : std::nullopt) {
    return absl::Seconds(*pace * (*steps - static_cast<double>(*trial.live->last_step)));
  }
  // Without progress, an overrun of up to its prediction again is taken as noise (a process
  // started late on a loaded board): it is expected by twice its prediction. Beyond that
  // nothing says when it ends.
  if (elapsed > *whole * kMaxPredictedOverrun) return std::nullopt;
  return (elapsed > *whole ? *whole * kMaxPredictedOverrun : *whole) - elapsed;
}

bool SchedulerCore::LeaveToFasterLocked(const StudyEntry& study, uint64_t session,
                                        const WorkerEntry& worker) {
  if (!options_.speed_placement || study.trial_ids.empty()) return false;
  const std::vector<EndgameTrial> left = TrialsLeftAtEndLocked(study);
  if (left.empty()) return false;  // Not yet its end: first-come keeps every slot busy.
  const absl::Time now = options_.clock();
  const std::optional<absl::Duration> recheck =
      LeftToOthersUntil(left, EndgameSlotsLocked(study, session, worker, now));
  if (!recheck) return false;
  if (*recheck != absl::InfiniteDuration()) {
    endgame_recheck_ = std::min(endgame_recheck_, now + *recheck);
  }
  return true;
}

std::vector<SchedulerCore::EndgameTrial> SchedulerCore::TrialsLeftAtEndLocked(
    const StudyEntry& study) const {
  const int unsuggested =
      study.exhausted ? 0 : std::max(0, study.spec.max_trials() - study.budget_used());
  const int remaining = static_cast<int>(study.pending.size()) + unsuggested;
  if (remaining == 0 || remaining > kMaxEndgameSlots) return {};
  int capable = 0;
  for (const auto& [unused, other] : workers_) {
    if (other.draining || !CanRun(study.spec, other.capabilities)) continue;
    capable += other.capabilities.slots();
    if (capable > kMaxEndgameSlots) return {};
  }
  if (remaining > capable) return {};
  std::vector<EndgameTrial> left;
  for (uint64_t id : study.pending) {
    const TrialEntry& trial = trials_.at(id);
    const auto [kind, units] = TrialSizeLocked(trial);
    left.push_back({kind, units, trial.live->min_memory_bytes});
  }
  if (unsuggested > 0) {
    // Of the latest trial's kind, for a model-choice study.
    const v1::Model::Kind kind = TrialSizeLocked(trials_.at(study.trial_ids.back())).first;
    left.insert(left.end(), unsuggested,
                EndgameTrial{kind, RecentMedianUnitsLocked(study, kind), 0});
  }
  std::sort(left.begin(), left.end(),
            [](const EndgameTrial& a, const EndgameTrial& b) { return a.units > b.units; });
  return left;
}

double SchedulerCore::RecentMedianUnitsLocked(const StudyEntry& study,
                                              v1::Model::Kind kind) const {
  std::vector<double> sizes;
  for (auto it = study.trial_ids.rbegin();
       it != study.trial_ids.rend() && sizes.size() < static_cast<size_t>(kEndgameSizeSample);
       ++it) {
    const auto [k, units] = TrialSizeLocked(trials_.at(*it));
    if (k == kind) sizes.push_back(units);
  }
  if (sizes.empty()) return 1;
  std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
  return sizes[sizes.size() / 2];
}

std::optional<absl::Duration> SchedulerCore::RestOfStudyLocked(const StudyEntry& study,
                                                               const TrialEntry& except,
                                                               absl::Time now) const {
  const v1::Model::Kind kind = TrialSizeLocked(except).first;
  const std::optional<double> median_seconds = speeds_.MedianSecondsPerUnit(kind);
  if (!median_seconds) return std::nullopt;
  double work = 0;      // Seconds of the median board.
  double capacity = 0;  // Median boards.
  for (const auto& [unused, worker] : workers_) {
    if (worker.draining || !CanRun(study.spec, worker.capabilities)) continue;
    const std::optional<double> speed = speeds_.RelativeSpeed(worker.node_class, kind);
    if (!speed) return std::nullopt;
    capacity += *speed * worker.capabilities.slots();
    for (uint64_t id : worker.running) {
      const TrialEntry& trial = trials_.at(id);
      if (id == except.id() || trial.study != &study) continue;
      const std::optional<absl::Duration> left = PredictedRemainingLocked(trial, worker.node_class, now);
      if (!left) return std::nullopt;
      work += absl::ToDoubleSeconds(*left) * *speed;
    }
  }
  for (uint64_t id : study.pending) work += TrialSizeLocked(trials_.at(id)).second * *median_seconds;
  const int unsuggested =
      study.exhausted ? 0 : std::max(0, study.spec.max_trials() - study.budget_used());
  work += unsuggested * RecentMedianUnitsLocked(study, kind) * *median_seconds;
  if (!(capacity > 0)) return std::nullopt;
  return absl::Seconds(work / capacity);
}

std::vector<SchedulerCore::EndgameSlot> SchedulerCore::EndgameSlotsLocked(
    const StudyEntry& study, uint64_t session, const WorkerEntry& worker, absl::Time now) const {
  auto memory = [](const WorkerEntry& w) {
    return w.capabilities.memory_bytes() > 0 ? w.capabilities.memory_bytes() : UINT64_MAX;
  };
  std::vector<EndgameSlot> slots{{absl::ZeroDuration(), &worker.node_class, memory(worker), true}};
  for (const auto& [other_session, other] : workers_) {
    if (other_session == session || other.draining || !CanRun(study.spec, other.capabilities)) {
      continue;
    }
    for (int i = 0; i < other.free_slots(); ++i) {
      slots.push_back({absl::ZeroDuration(), &other.node_class, memory(other), false});
    }
    for (uint64_t id : other.running) {
      if (auto left_there = PredictedRemainingLocked(trials_.at(id), other.node_class, now)) {
        slots.push_back({*left_there, &other.node_class, memory(other), false});
      }
    }
  }
  return slots;
}

std::optional<absl::Duration> SchedulerCore::LeftToOthersUntil(
    const std::vector<EndgameTrial>& trials, std::vector<EndgameSlot> slots) const {
  absl::Duration recheck = absl::InfiniteDuration();
  for (const EndgameTrial& trial : trials) {
    EndgameSlot* best = nullptr;
    absl::Duration best_end;
    for (EndgameSlot& slot : slots) {
      if (slot.memory_bytes < trial.min_memory_bytes) continue;
      const std::optional<absl::Duration> takes =
          speeds_.Predict(*slot.node_class, trial.kind, trial.units);
      if (!takes) {
        if (slot.mine) return std::nullopt;  // Its own speed unknown: first-come.
        continue;
      }
      if (best == nullptr || slot.free_in + *takes < best_end) {
        best = &slot;
        best_end = slot.free_in + *takes;
      }
    }
    if (best == nullptr || best->mine) return std::nullopt;
    // Looked at again once the slot it is left to should be free (now, for a free one: the
    // next sweep, should that worker not take it after all).
    recheck = std::min(recheck, best->free_in);
    best->free_in = best_end;
  }
  return recheck;
}

bool SchedulerCore::DuplicateOntoLocked(uint64_t session, WorkerEntry& idle, bool early) {
  if (!options_.speed_placement || options_.duplicate_margin <= 0 || idle.free_slots() <= 0) {
    return false;
  }
  // Early duplicates are looked for at every dispatch of a free worker, before its new trial:
  // a bound on that walk's cost in a large cluster, where one slow board's trial is also less
  // likely to be a study's tail.
  if (early && (!options_.early_duplicates ||
                workers_.size() > static_cast<size_t>(kMaxEndgameSlots))) {
    return false;
  }
  // Mid-study, only a board faster than the cluster's median runs a duplicate: a trial is
  // duplicated once, and a slow board's copy would keep the fast boards, free again soon,
  // from taking it (a Pi 4 duplicating a slowed Pi 4's trial held one study's end 3 minutes).
  if (early && !(speeds_.OverallSpeed(idle.node_class).value_or(0) > 1)) return false;
  // The walk below goes over every worker's running trials, and a dispatch that finds a free
  // worker nothing new to run comes here: in a large cluster whose studies are not at their end
  // (the common case) that walk would find nothing, once per free worker. The studies with a
  // running trial are few and all dispatchable.
  if (std::none_of(dispatchable_.begin(), dispatchable_.end(), [&](const StudyEntry* study) {
        return study->running > 0 && study->all_given() != early;
      })) {
    return false;
  }
  const absl::Time now = options_.clock();
  const uint64_t memory = idle.capabilities.memory_bytes();
  TrialEntry* best = nullptr;
  absl::Duration best_gain = absl::ZeroDuration();
  // The idle worker's speed per kind, looked up once: the walk asks for it at every trial.
  absl::flat_hash_map<int, std::optional<double>> idle_speeds;
  const auto idle_seconds_per_unit = [&](v1::Model::Kind kind) {
    auto [it, added] = idle_speeds.try_emplace(kind);
    if (added) it->second = speeds_.SecondsPerUnit(idle.node_class, kind);
    return it->second;
  };
  for (const auto& [other_session, other] : workers_) {
    if (other_session == session) continue;
    for (uint64_t id : other.running) {
      TrialEntry& trial = trials_.at(id);
      const StudyEntry& study = *trial.study;
      // At a study's end; earlier (`early`) only for its predicted tail, below.
      if (trial.superseded_session != 0 || trial.live->duplicated || study.all_given() == early ||
          trial.live->min_memory_bytes > (memory > 0 ? memory : UINT64_MAX) ||
          !CanRun(study.spec, idle.capabilities) || !RunsTrialLocked(trial, idle.capabilities)) {
        continue;
      }
      const auto [kind, units] = TrialSizeLocked(trial);
      // Its board's own learnt speed, not its prior: a prior is coarse (a core is not a core on
      // every board), an overrun of it no sign of a straggler, and a board whose every trial
      // were duplicated would never learn its speed.
      const std::optional<double> there_per_unit =
          speeds_.LearntSecondsPerUnit(other.node_class, kind);
      const std::optional<double> here_per_unit = idle_seconds_per_unit(kind);
      if (!there_per_unit || !here_per_unit || *there_per_unit * units <= 0) continue;
      const absl::Duration there = absl::Seconds(*there_per_unit * units);
      const absl::Duration here = absl::Seconds(*here_per_unit * units);
      // The trial's own pace where it reports progress (SecondsPerStep): its size measure
      // leaves out what else makes it slow (deeper trees), and a straggler is one that
      // overruns its prediction. The idle worker's prediction is scaled by how much slower
      // than predicted the trial ran, taken at its first report where that is less than over
      // its whole run so far: a board that slowed since (throttled, frozen) would otherwise
      // scale the idle worker's prediction with it, and no worker of its own speed would ever
      // be predicted to finish first. Without progress: its prediction less the time it has
      // run, and once past its prediction, as much again as it has overrun (its board
      // slowed by that much, or it is larger than its size says; a duplicate settles which).
      const absl::Duration elapsed = now - FromTimestamp(trial.trial().start_time());
      absl::Duration remaining = there > elapsed ? there - elapsed : elapsed - there;
      double own = 1;  // How many times its prediction the trial itself takes.
      const std::optional<double> steps = TrialStepsLocked(trial);
      if (const std::optional<double> pace = steps ? SecondsPerStep(trial, *steps, now) : std::nullopt) {
        const double done = static_cast<double>(*trial.live->last_step);
        remaining = absl::Seconds(*pace * (*steps - done));
        const double predicted_pace = absl::ToDoubleSeconds(there) / *steps;
        own = absl::ToDoubleSeconds(elapsed) / done / predicted_pace;
        if (trial.live->first_report_ms > 0) {
          own = std::min(own, trial.live->first_report_ms / 1000.0 / trial.live->first_report_step / predicted_pace);
        }
      }
      const absl::Duration fast = here * own;
      if (remaining <= fast * options_.duplicate_margin) continue;
      // Mid-study, a trial the rest of the study would finish before: its slow board is the
      // study's tail (TPE's random start gave a Pi 4 the largest trial before speeds were
      // learnt). Otherwise the free worker is of more use on a new trial.
      if (early) {
        const std::optional<absl::Duration> rest = RestOfStudyLocked(study, trial, now);
        if (!rest || remaining <= *rest) continue;
      }
      if (best == nullptr || remaining - fast > best_gain) {
        best = &trial;
        best_gain = remaining - fast;
      }
    }
  }
  if (best == nullptr) return false;
  // The slow worker keeps running its attempt (its slot stays taken); the duplicate becomes the
  // trial's current attempt. The study's running count stays: one trial, two attempts.
  WorkerEntry& slow = workers_.at(best->session);
  slow.running.erase(best->id());
  slow.superseded.insert(best->id());
  best->superseded_session = best->session;
  best->superseded_attempt = best->attempt();
  best->live->duplicated = true;
  best->session = 0;
  --best->study->running;
  DHPT_LOG_INFO("trial %d of study %s: duplicate on worker %s (%s), predicted to finish %s "
                "before worker %s (%s)",
                best->id(), best->study->spec.name(), idle.worker_id, idle.node_class,
                absl::FormatDuration(absl::Trunc(best_gain, absl::Seconds(1))), slow.worker_id,
                slow.node_class);
  observer_->TrialDuplicated(best->study->spec);
  StartOnWorkerLocked(session, idle, *best);
  return true;
}

void SchedulerCore::ReconsiderDuplicatesLocked(const TrialEntry& trial) {
  const StudyEntry& study = *trial.study;
  if (!options_.speed_placement || options_.duplicate_margin <= 0 ||
      trial.superseded_session != 0 || !study.all_given()) {
    return;
  }
  std::vector<uint64_t> idle;
  for (const auto& [unused, aside] : set_aside_) {
    if (CanRun(study.spec, aside.capabilities)) idle.insert(idle.end(), aside.sessions.begin(), aside.sessions.end());
  }
  for (uint64_t session : idle) {
    auto worker = workers_.find(session);
    if (worker == workers_.end()) continue;
    if (DuplicateOntoLocked(session, worker->second)) {
      MaybeFreeLocked(session);  // Out of set-aside: it may have more free slots.
      DispatchLocked();
      return;
    }
  }
}

bool SchedulerCore::WakeForDuplicatesLocked() {
  if (!options_.speed_placement || options_.duplicate_margin <= 0 || set_aside_.empty()) {
    return false;
  }
  int woken = 0;
  for (const StudyEntry* study : dispatchable_) {
    if (study->running == 0 || !study->all_given()) continue;
    for (auto aside = set_aside_.begin(); aside != set_aside_.end() && woken < kMaxEndgameSlots;) {
      std::set<uint64_t>& sessions = aside->second.sessions;
      if (!CanRun(study->spec, aside->second.capabilities)) {
        ++aside;
        continue;
      }
      while (!sessions.empty() && woken < kMaxEndgameSlots) {
        maybe_free_.insert(sessions.extract(sessions.begin()));
        ++woken;
      }
      if (sessions.empty()) {
        set_aside_.erase(aside++);
      } else {
        ++aside;
      }
    }
  }
  return woken > 0;
}

void SchedulerCore::ForgetSupersededLocked(TrialEntry& trial, bool cancel,
                                           absl::string_view reason) {
  if (trial.superseded_session == 0) return;
  const uint64_t session = std::exchange(trial.superseded_session, 0);
  if (auto it = workers_.find(session); it != workers_.end()) {
    it->second.superseded.erase(trial.id());
    MaybeFreeLocked(session);
  }
  if (cancel) {
    const int attempt = trial.superseded_attempt;
    const uint64_t epoch =
        attempt >= 1 && attempt <= trial.trial().attempts_size() ? trial.trial().attempts(attempt - 1).epoch() : 0;
    SendLocked(session, CancelMessage(trial.id(), attempt, epoch, std::string(reason)));
  }
}

bool SchedulerCore::ResumeSupersededLocked(TrialEntry& trial) {
  if (trial.superseded_session == 0 || !workers_.contains(trial.superseded_session)) return false;
  StudyEntry& study = *trial.study;
  if (trial.session != 0) {  // The duplicate's worker, if still connected, is free of it.
    if (auto it = workers_.find(trial.session); it != workers_.end()) {
      it->second.running.erase(trial.id());
      MaybeFreeLocked(trial.session);
    }
    trial.session = 0;
    --study.running;
  }
  const uint64_t session = std::exchange(trial.superseded_session, 0);
  WorkerEntry& slow = workers_.at(session);
  slow.superseded.erase(trial.id());
  slow.running.insert(trial.id());
  trial.session = session;
  ++study.running;
  // The duplicate leaves no trace in the trial: a user sees one attempt that ran throughout.
  // Attempts are numbered by their place in the list, so a later attempt takes the number back;
  // the duplicate's own late words (its worker reconnecting) are refused as not given to it.
  v1::Trial& t = trial.trial();
  const int attempt = trial.superseded_attempt;
  while (t.attempts_size() > attempt) {
    UnchargeAttempt(t, t.attempts_size());
    t.mutable_attempts()->RemoveLast();
  }
  t.set_attempt(attempt);
  t.set_state(v1::Trial::RUNNING);
  t.set_worker_id(slow.worker_id);
  t.set_client_id(t.attempts(attempt - 1).client_id());
  t.set_node_name(slow.capabilities.node_name());
  t.clear_error();
  *t.mutable_start_time() = t.attempts(attempt - 1).start_time();
  t.mutable_attempts(attempt - 1)->clear_start_time();  // It is the latest attempt again.
  trial.live->started = true;  // It ran long enough to be worth a duplicate.
  // Its reports start over (what it stored before the duplicate stays stored).
  trial.live->last_step.reset();
  trial.live->first_report_ms = 0;
  trial.live->first_report_step = 0;
  trial.live->stored_values = 0;
  trial.curve.values.clear();
  trial.live->deadline = absl::InfiniteFuture();
  if (std::optional<absl::Duration> timeout = TrialTimeout(study.spec)) {
    trial.live->deadline = FromTimestamp(t.start_time()) + *timeout +
                     options_.heartbeat_interval * options_.missed_heartbeats;
  }
  DHPT_LOG_INFO("trial %d of study %s: its duplicate ended without a result; attempt %d on "
                "worker %s carries on",
                t.id(), study.spec.name(), attempt, slow.worker_id);
  SaveTrialLocked(trial);
  PublishTrialLocked(trial);
  return true;
}

void SchedulerCore::MaybeFreeLocked(uint64_t session) {
  auto worker = workers_.find(session);
  if (worker == workers_.end()) return;
  LeaveSetAsideLocked(session, worker->second);
  maybe_free_.insert(session);
}

void SchedulerCore::LeaveSetAsideLocked(uint64_t session, const WorkerEntry& worker) {
  auto aside = set_aside_.find(worker.placement_class);
  if (aside == set_aside_.end()) return;
  aside->second.sessions.erase(session);
  if (aside->second.sessions.empty()) set_aside_.erase(aside);
}

void SchedulerCore::SetAsideLocked(uint64_t session, const WorkerEntry& worker) {
  auto [aside, added] = set_aside_.try_emplace(worker.placement_class);
  if (added) aside->second.capabilities = worker.capabilities;
  aside->second.sessions.insert(session);
}

void SchedulerCore::WakeSetAsideLocked() {
  for (auto aside = set_aside_.begin(); aside != set_aside_.end();) {
    const bool wanted = std::any_of(dispatchable_.begin(), dispatchable_.end(),
                                    [&](const StudyEntry* study) {
                                      return HasTrialToGive(*study) &&
                                             CanRun(study->spec, aside->second.capabilities);
                                    });
    if (!wanted) {
      ++aside;
      continue;
    }
    maybe_free_.insert(aside->second.sessions.begin(), aside->second.sessions.end());
    set_aside_.erase(aside++);
  }
}

void SchedulerCore::ReleaseLocked(TrialEntry& trial) {
  ForgetSupersededLocked(trial, /*cancel=*/true, "a duplicate of this trial ended it first");
  if (trial.session != 0) {
    if (auto it = workers_.find(trial.session); it != workers_.end()) {
      it->second.running.erase(trial.id());
      MaybeFreeLocked(trial.session);
    }
    trial.session = 0;
    --trial.study->running;
  }
  if (!trial.live->client.empty()) {
    trial.study->leased.erase(trial.id());
    leased_.erase(trial.id());
    trial.live->client.clear();
    trial.live->lease_end = absl::InfiniteFuture();
    --trial.study->running;
  }
}

void SchedulerCore::RequeueLocked(TrialEntry& trial, absl::string_view reason, bool lost,
                                  absl::Time hold_until) {
  StudyEntry& study = *trial.study;
  v1::Trial& t = trial.trial();
  // Only an attempt its worker had begun counts: a worker that drops before starting (a
  // flapping node) or hands a trial back costs no attempt.
  if (lost && trial.live->started) ChargeLostAttempt(t);
  if (t.lost_attempts() >= study.spec.max_attempts() && hold_until > options_.clock()) {
    // Its last allowed attempt: a link that blinks must not fail it while its worker, still
    // training, reconnects (and takes it back, uncharged) within its lease.
    t.set_error(absl::StrCat(reason, "; its last attempt (max_attempts ", study.spec.max_attempts(),
                             "): it fails unless its worker comes back for it by ",
                             absl::FormatTime(hold_until, absl::UTCTimeZone())));
    HoldLocked(trial, hold_until, reason);
    SaveTrialLocked(trial);
    PublishTrialLocked(trial);
    return;
  }
  if (t.lost_attempts() >= study.spec.max_attempts()) {
    GiveUpLocked(trial, reason);
  } else {
    t.set_state(v1::Trial::PENDING);
    t.set_error(std::string(reason));
    t.clear_worker_id();
    t.clear_node_name();
    study.pending.push_front(t.id());
    trial.live->queued_or_reported = options_.clock();
    observer_->TrialRequeued(study.spec);
  }
  SaveTrialLocked(trial);
  PublishTrialLocked(trial);
}

void SchedulerCore::GiveUpLocked(TrialEntry& trial, absl::string_view reason) {
  v1::Trial& t = trial.trial();
  t.set_state(v1::Trial::FAILED);
  t.set_error(absl::StrCat("gave up after losing ", t.lost_attempts(), " started attempts; last: ",
                           reason));
  *t.mutable_end_time() = ToTimestamp(options_.clock());
  RecordTrialEndLocked(trial);
}

void SchedulerCore::HoldLocked(TrialEntry& trial, absl::Time until, absl::string_view reason) {
  trial.trial().set_state(v1::Trial::PENDING);
  trial.live->held_until = until;
  trial.live->held_reason = std::string(reason);
  held_.insert(trial.id());
  ++trial.study->held;
}

void SchedulerCore::ReleaseHoldLocked(TrialEntry& trial) {
  if (trial.live == nullptr || !held_.erase(trial.id())) return;
  trial.live->held_until = absl::InfinitePast();
  trial.live->held_reason.clear();
  --trial.study->held;
}

int SchedulerCore::FailUnclaimedHeldLocked() {
  const absl::Time now = options_.clock();
  std::vector<uint64_t> unclaimed;
  for (uint64_t id : held_) {
    if (trials_.at(id).live->held_until <= now) unclaimed.push_back(id);
  }
  for (uint64_t id : unclaimed) {
    TrialEntry& trial = trials_.at(id);
    const std::string reason =
        absl::StrCat(trial.live->held_reason, " (its worker did not come back for it in time)");
    ReleaseHoldLocked(trial);
    GiveUpLocked(trial, reason);
    SaveTrialLocked(trial);
    PublishTrialLocked(trial);
    CheckStudyEndLocked(*trial.study);
  }
  return static_cast<int>(unclaimed.size());
}

void SchedulerCore::RecordTrialEndLocked(TrialEntry& trial) {
  StudyEntry& study = *trial.study;
  const v1::Trial& ended = trial.trial();
  study::RecordEnded(study.spec, ended, study.history[trial.number()]);
  if (ended.origin() == v1::Trial::ADDED) {
    // Learnt from like any other result, but it ran elsewhere: no count, no metric.
    ++study.added;
    if (ended.state() != v1::Trial::COMPLETED) return;
    study.front->Add(ended);
    if (!study.best || study::IsBetterTrial(study.spec, ended, trials_.at(*study.best).Summary())) {
      study.best = ended.id();
    }
    return;
  }
  const bool ran = ended.has_start_time() && ended.has_end_time();
  // A trial read back from the store ended long ago: its metric counted it then.
  if (!reading_back_) {
    observer_->TrialEnded(
        study.spec, ended.state(), ran ? DeviceLabel(ended.device()) : "",
        ran ? FromTimestamp(ended.end_time()) - FromTimestamp(ended.start_time())
            : absl::ZeroDuration());
  }
  switch (trial.state()) {
    case v1::Trial::COMPLETED: {
      ++study.completed;
      trial.curve.completed = true;
      study.front->Add(trial.trial());
      if (!study.best ||
          study::IsBetterTrial(study.spec, trial.trial(), trials_.at(*study.best).Summary())) {
        study.best = trial.id();
      }
      break;
    }
    case v1::Trial::FAILED:
      ++study.failed;
      if (study.first_errors.size() < static_cast<size_t>(FailFastTrials(study.spec))) {
        study.first_errors.push_back({trial.number(), trial.trial().error()});
      }
      break;
    case v1::Trial::CANCELLED:
      ++study.cancelled;
      break;
    case v1::Trial::PRUNED:
      ++study.pruned;
      break;
    default:
      break;
  }
}

namespace {

// Why the study should fail fast, if it should: its first FailFastTrials() finished trials all
// failed, with one and the same error.
// (`succeeded`: some trial completed or was pruned.)
std::optional<std::string> FailFastReason(const v1::StudySpec& spec, bool succeeded,
                                          const std::vector<FirstError>& first_errors) {
  const int limit = FailFastTrials(spec);
  if (limit == 0 || succeeded || first_errors.size() < static_cast<size_t>(limit)) {
    return std::nullopt;
  }
  for (const FirstError& failed : first_errors) {
    if (failed.error != first_errors.front().error) return std::nullopt;
  }
  return absl::StrCat("fail fast: the first ", limit,
                      " trials all failed with the same error; fix its cause and run the study "
                      "again, or set fail_fast_trials: 0 to spend the budget regardless (dhpt "
                      "trial ", spec.name(), " ", first_errors.front().number,
                      " shows a trial in full). The error: ", first_errors.front().error);
}

}  // namespace

void SchedulerCore::CheckStudyEndLocked(StudyEntry& study) {
  if (study.terminal()) return;
  const int finished = study.completed + study.failed + study.pruned;
  // Cancelled trials (a stop's, in a study reopened since) used their share of max_trials.
  const bool budget_spent = finished + study.cancelled >= study.spec.max_trials();
  if (std::optional<std::string> reason =
          FailFastReason(study.spec, study.completed + study.pruned > 0, study.first_errors)) {
    EndStudyLocked(study, v1::Study::FAILED, *std::move(reason));
  } else if (study.spec.has_max_failed_trials() && study.failed > study.spec.max_failed_trials()) {
    EndStudyLocked(study, v1::Study::FAILED,
                   absl::StrCat(study.failed, " trials failed, more than max_failed_trials (",
                                study.spec.max_failed_trials(), ")"));
  } else if (budget_spent ||
             (study.exhausted && study.pending.empty() && study.held == 0 &&
              study.running == 0)) {
    const std::string how =
        budget_spent ? absl::StrCat("all ", finished, " trials finished")
        : !study.optimizer_error.empty()
            ? absl::StrCat(study.optimizer_error, " (after ", finished, " trials)")
            : absl::StrCat("search space exhausted after ", finished, " trials");
    if (!study.optimizer_error.empty() && study.completed == 0) {
      EndStudyLocked(study, v1::Study::FAILED, how);  // The reason, not "every one failed".
    } else if (study.completed == 0 && finished > 0) {
      // Nothing to show for it: not a success, whatever max_failed_trials allowed.
      EndStudyLocked(study, v1::Study::FAILED,
                     absl::StrCat(how, ", and every one failed; dhpt trials ", study.spec.name(),
                                  " shows why"));
    } else {
      EndStudyLocked(study, v1::Study::COMPLETED, how);
    }
  }
}

void SchedulerCore::ForgetDispatchableLocked(StudyEntry& study) {
  auto it = std::find(dispatchable_.begin(), dispatchable_.end(), &study);
  if (it == dispatchable_.end()) return;
  const size_t index = static_cast<size_t>(it - dispatchable_.begin());
  dispatchable_.erase(it);
  if (index < next_dispatchable_) --next_dispatchable_;
  if (next_dispatchable_ >= dispatchable_.size()) next_dispatchable_ = 0;
}

void SchedulerCore::EndStudyLocked(StudyEntry& study, v1::Study::State state, std::string reason) {
  ForgetDispatchableLocked(study);
  study.state = state;
  study.state_reason = std::move(reason);
  study.end_time = ToTimestamp(options_.clock());
  // Nothing of an ended study runs or waits.
  for (uint64_t id : study.trial_ids) {
    TrialEntry& trial = trials_.at(id);
    const v1::Trial::State s = trial.state();
    if (s != v1::Trial::RUNNING && s != v1::Trial::PENDING) continue;
    ReleaseHoldLocked(trial);
    ForgetSupersededLocked(trial, /*cancel=*/true,
                           absl::StrCat("study ", study.spec.name(), " ended"));
    if (s == v1::Trial::RUNNING) {
      const uint64_t session = trial.session;
      ReleaseLocked(trial);
      SendLocked(session, CancelMessage(trial.trial(), absl::StrCat("study ", study.spec.name(), " ended: ",
                                                         study.state_reason)));
    }
    trial.trial().set_state(v1::Trial::CANCELLED);
    trial.trial().set_error(absl::StrCat("study ended: ", study.state_reason));
    *trial.trial().mutable_end_time() = study.end_time;
    RecordTrialEndLocked(trial);
    SaveTrialLocked(trial);
    PublishTrialLocked(trial);
  }
  study.pending.clear();
  SaveStudyLocked(study);
  DHPT_LOG_INFO("study %s %s: %s", study.spec.name(), v1::Study::State_Name(state),
                study.state_reason);
  PublishStudyLocked(study);  // Its watchers read to here, then their streams end.
  ServeSuggestWaitersLocked(study);  // Answered with what they hold: nothing more comes.
  CacheEndedLocked(study);  // Its trials leave memory once others are read more recently.
}

}  // namespace dhpt::scheduler
