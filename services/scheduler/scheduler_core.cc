#include "services/scheduler/scheduler_core.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/base/casts.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"
#include "services/common/enum_values.h"
#include "services/common/labels.h"
#include "services/common/logging.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/common/unsafe_text.h"
#include "services/scheduler/pareto_front.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/scheduler/placement.h"
#include "services/scheduler/trial_views.h"
#include "services/study/spec_difference.h"
#include "services/study/spec_errors.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::scheduler {

using google::protobuf::util::TimeUtil;

namespace {

absl::Status NoBestTrial(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("study \"", name, "\" has no completed trial yet"));
}

// Whether attempt `attempt` of `trial` was given to `worker_id` under `epoch`.
bool AttemptGivenTo(const v1::Trial& trial, int attempt, absl::string_view worker_id,
                    uint64_t epoch) {
  if (attempt < 1 || attempt > trial.attempts_size()) return false;
  const v1::Trial::Attempt& given = trial.attempts(attempt - 1);
  return given.worker_id() == worker_id && given.epoch() == epoch;
}

uint64_t RandomEpoch() {
  std::random_device device;
  uint64_t epoch = 0;
  while (epoch == 0) epoch = (uint64_t{device()} << 32) | device();
  return epoch;
}

absl::StatusOr<int> PageSize(int requested, int default_size, int max_size) {
  if (requested < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  if (requested == 0) return default_size;
  return std::min(requested, max_size);
}

SchedulerObserver* NoObserver() {
  static SchedulerObserver* const none = new SchedulerObserver();
  return none;
}

}  // namespace

std::string PageToken(absl::string_view kind, absl::string_view filter, uint64_t position) {
  return absl::WebSafeBase64Escape(absl::StrCat(kind, "|", filter, "|", position));
}

namespace {

absl::Status InvalidPageToken() {
  return absl::InvalidArgumentError(
      "page_token: not a token this request returned; list again from the start without one");
}

// A ListStudies token's filter is the listing's `before`.
std::string StudyPageToken(uint64_t after, uint64_t before) {
  return PageToken("studies", absl::StrCat(before), after);
}

// Adds `study` to `page` (of `bytes` so far) unless it would take a page that holds one past
// `max_bytes` (kMaxStudyPageBytes).
bool FitsStudyPage(ListPage<v1::Study>& page, size_t& bytes, v1::Study& study,
                   size_t max_bytes) {
  const size_t size = study.ByteSizeLong();
  if (!page.items.empty() && bytes + size > max_bytes) return false;
  bytes += size;
  page.items.push_back(std::move(study));
  return true;
}

absl::StatusOr<StudyListing> ParseStudyPageToken(absl::string_view token) {
  StudyListing listing;
  if (token.empty()) return listing;
  std::string decoded;
  if (!absl::WebSafeBase64Unescape(token, &decoded)) return InvalidPageToken();
  const std::vector<absl::string_view> parts = absl::StrSplit(decoded, '|');
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &listing.before)) {
    return InvalidPageToken();
  }
  ASSIGN_OR_RETURN(listing.after, PagePosition(token, "studies", parts[1]));
  return listing;
}

}  // namespace

absl::StatusOr<uint64_t> PagePosition(absl::string_view token, absl::string_view kind,
                                      absl::string_view filter) {
  if (token.empty()) return 0;
  std::string decoded;
  uint64_t position = 0;
  const absl::Status invalid = InvalidPageToken();
  if (!absl::WebSafeBase64Unescape(token, &decoded)) return invalid;
  const size_t last = decoded.rfind('|');
  if (last == std::string::npos || decoded.substr(0, last) != absl::StrCat(kind, "|", filter) ||
      !absl::SimpleAtoi(absl::string_view(decoded).substr(last + 1), &position)) {
    return invalid;
  }
  return position;
}

namespace {

constexpr absl::string_view kNoBest = "-";

std::string SampleFilter(absl::string_view filter, int stride, absl::string_view best) {
  return absl::StrCat(filter, "|", stride, "|", best);
}

}  // namespace

std::string TrialPageToken(absl::string_view filter, const TrialSample& sample, uint64_t number) {
  if (sample.all()) return PageToken("trials", filter, number);
  const std::optional<double> best = sample.best();
  return PageToken("sample", SampleFilter(filter, sample.stride(),
                                          best ? absl::StrCat(absl::bit_cast<uint64_t>(*best))
                                               : std::string(kNoBest)),
                   number);
}

absl::StatusOr<uint64_t> TrialPageStart(absl::string_view token, absl::string_view filter,
                                        TrialSample& sample) {
  if (sample.all()) return PagePosition(token, "trials", filter);
  if (token.empty()) return 0;
  // "sample|<filter>|<stride>|<best>|<number>": the best is read from the end, then the whole
  // token checked as any other.
  std::string decoded;
  if (!absl::WebSafeBase64Unescape(token, &decoded)) return InvalidPageToken();
  const std::vector<absl::string_view> parts = absl::StrSplit(decoded, '|');
  if (parts.size() < 3) return InvalidPageToken();
  const absl::string_view best = parts[parts.size() - 2];
  uint64_t bits = 0;
  if (best != kNoBest && (!absl::SimpleAtoi(best, &bits) ||
                          !std::isfinite(absl::bit_cast<double>(bits)))) {
    return InvalidPageToken();  // Not one this scheduler made: its best values are finite.
  }
  ASSIGN_OR_RETURN(const uint64_t number,
                   PagePosition(token, "sample", SampleFilter(filter, sample.stride(), best)));
  if (best != kNoBest) sample.set_best(absl::bit_cast<double>(bits));
  return number;
}


SchedulerCore::SchedulerCore(StudyStore* store, SchedulerOptions options)
    : store_(store),
      options_(std::move(options)),
      observer_(options_.observer != nullptr ? options_.observer : NoObserver()),
      epoch_(options_.epoch != 0 ? options_.epoch : RandomEpoch()),
      next_position_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()))),
      reply_budget_(options_.max_reply_bytes_in_flight),
      worker_log_(kWorkerLogLines, options_.worker_log_interval),
      suggestions_(std::make_unique<WorkQueue>(std::max(1, options_.suggestion_threads))) {
  store_->SetCommitListener([this](WriteSequence sequence) { OnStored(sequence); });
}

SchedulerCore::~SchedulerCore() {
  store_->SetCommitListener(nullptr);
  suggestions_.reset();  // No suggestion job runs past here.
  CoreLock lock(this);
  LogWorkersNotLoggedLocked(/*flush=*/true);  // A core ended without the server's Shutdown.
  shutting_down_ = true;  // No SuggestTrials call is left unanswered.
  for (StudyEntry* study : study_order_) ServeSuggestWaitersLocked(*study);
  for (PendingAnswer& answer : answers_after_store_) {
    // Perhaps stored, perhaps not: the same client asking again gets what it holds.
    answer.done(absl::UnavailableError(
        "the scheduler is shutting down; ask again with the same client_id for your trials"));
  }
}

// ---------------------------------------------------------------------------------------------
// Recovery

absl::Status SchedulerCore::Recover() {
  // A store that can read a study back loads the active studies' trials only: an ended study
  // starts as its stored summary and is read back when asked, so a start costs what is in
  // progress, not the history.
  const bool summaries = store_->reads_back();
  ASSIGN_OR_RETURN(StoredState stored, summaries ? store_->LoadActive() : store_->Load());
  CoreLock lock(this);
  next_trial_id_ = stored.next_trial_id;
  for (v1::Study& study : stored.studies) {
    auto entry = std::make_unique<StudyEntry>();
    entry->order = next_study_order_++;
    entry->spec = study.spec();
    entry->state = study.state();
    entry->state_reason = study.state_reason();
    entry->create_time = study.create_time();
    entry->end_time = study.end_time();
    entry->space = study::ToSearchSpace(entry->spec);
    entry->early_stopping = study::ToEarlyStoppingRule(entry->spec);
    if (summaries && entry->terminal()) {
      entry->evicted = true;
      entry->summary = std::move(study);
      entry->summary.clear_spec();  // The entry's.
    } else {
      entry->front.emplace(entry->spec);
      ASSIGN_OR_RETURN(entry->optimizer, options_.optimizer_factory(
                                             entry->space, study::ToOptimizerConfig(entry->spec)));
    }
    entry->head = next_position_++;
    // Counted, never refused: what was accepted before stays (a lower limit stops new ones).
    spec_bytes_total_ += static_cast<int64_t>(entry->spec.ByteSizeLong());
    study_order_.push_back(entry.get());
    study_order_changed_ = true;
    if (!entry->terminal()) dispatchable_.push_back(entry.get());
    const std::string name = entry->spec.name();
    studies_[name] = std::move(entry);
  }
  for (const v1::Trial& stored_trial : stored.trials) {
    auto study_it = studies_.find(stored_trial.study());
    if (study_it == studies_.end() || study_it->second->evicted) {
      return absl::DataLossError(absl::StrCat("trial ", stored_trial.id(), " names unknown study ",
                                              stored_trial.study()));
    }
    RETURN_IF_ERROR(RestoreTrialLocked(*study_it->second, stored_trial));
  }
  // Early stopping judges running trials against the others' curves: the stored ones, as the
  // first life saw them (each trial's latest attempt).
  for (StudyEntry* study : study_order_) {
    if (study->evicted || std::holds_alternative<std::monostate>(study->early_stopping)) continue;
    ASSIGN_OR_RETURN(std::vector<StoredIntermediateValue> values,
                     store_->LoadIntermediateValues(study->spec.name()));
    RestoreCurvesLocked(*study, values);
  }
  for (StudyEntry* study : study_order_) {
    // Grown by doubling as they were read: up to half of each would be spare for good (the
    // history's records are 88 bytes a trial).
    study->history.shrink_to_fit();
    study->trial_ids.shrink_to_fit();
    CheckStudyEndLocked(*study);
    // Ended in the previous life with trials still held (a store that cannot read back).
    if (study->terminal() && !study->evicted && !study->cached) CacheEndedLocked(*study);
  }
  // What was read to get here (the active trials parsed, their curves whole) is freed: its pages
  // go back to the system, as after an eviction, so a restart holds what it keeps, not what it
  // read (its heap's free chunks lie between the kept ones, which malloc_trim alone reaches).
  stored = StoredState();
  malloc_trim(0);
  return absl::OkStatus();
}

absl::Status SchedulerCore::RestoreTrialLocked(StudyEntry& study, const v1::Trial& stored_trial) {
  if (stored_trial.number() != study.created()) {
    return absl::DataLossError(absl::StrCat("trial ", stored_trial.id(), " of ", study.spec.name(),
                                            " has number ", stored_trial.number(),
                                            ", expected ", study.created()));
  }
  ASSIGN_OR_RETURN(optimizer::Point point, study::ToPoint(study.space, stored_trial.params()));
  TrialEntry& entry = trials_[stored_trial.id()];
  entry.trial() = stored_trial;
  entry.curve.number = stored_trial.number();
  entry.study = &study;
  // Positions of this life, each its own: a watcher resuming from an earlier life's gets
  // every trial again.
  entry.position = study.head = next_position_++;
  next_trial_id_ = std::max(next_trial_id_, stored_trial.id() + 1);
  study.keys.insert(study.space.Key(point));
  study.trial_ids.push_back(stored_trial.id());
  study.history.push_back({std::move(point), optimizer::TrialStatus::kRunning, {}});
  const v1::Trial& t = entry.trial();
  if (TrialTerminal(t.state())) {
    RecordTrialEndLocked(entry);
    CompactLocked(entry);
  } else if (t.state() == v1::Trial::RUNNING && t.attempt() >= 1 &&
             t.attempt() <= t.attempts_size() &&
             !t.attempts(t.attempt() - 1).client_id().empty()) {
    // An ask-and-tell client's lease outlives the restart, counted afresh: the client does
    // not know the scheduler went away, and nobody else may take its trial meanwhile.
    ++study.running;
    LeaseLocked(entry, t.attempts(t.attempt() - 1).client_id());
  } else if (t.lost_attempts() >= study.spec.max_attempts()) {
    // Held for its lost worker when the scheduler stopped: held again, for a lease from now.
    HoldLocked(entry, options_.clock() + Lease(),
               "its worker was lost before the scheduler restarted");
  } else {
    // Running on a worker of the previous life, or pending: wait for a worker again. The
    // worker of the old attempt may claim it back when it reconnects, or deliver its result
    // (accepted once); the attempt's epoch tells its result from anyone else's.
    entry.trial().set_state(v1::Trial::PENDING);
    entry.live->queued_or_reported = options_.clock();
    study.pending.push_back(entry.id());
  }
  return absl::OkStatus();
}

void SchedulerCore::RestoreCurvesLocked(StudyEntry& study,
                                        const std::vector<StoredIntermediateValue>& values) {
  // A trial that ended without completing keeps only what its rule reads (CompactCurveLocked,
  // which found no curve when it was restored): cut as soon as its values are read (they come
  // by trial), so the study's whole curves are never in memory together and the heap does not
  // grow by them.
  TrialEntry* reading = nullptr;
  auto cut = [this](TrialEntry* trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (trial != nullptr && TrialTerminal(trial->state())) CompactCurveLocked(*trial);
  };
  for (const StoredIntermediateValue& value : values) {
    auto it = trials_.find(value.trial_id);
    if (it == trials_.end()) continue;
    if (reading != &it->second) {
      cut(reading);
      reading = &it->second;
    }
    if (value.attempt != it->second.attempt()) continue;
    std::vector<study::IntermediateValue>& curve = it->second.curve.values;
    if (curve.empty() || value.step > curve.back().step) {
      curve.push_back({value.step, value.value});
      if (LiveTrial* live = it->second.live.get()) {  // A reclaimed attempt goes on from there.
        live->last_step = value.step;
        ++live->stored_values;
      }
      if (curve.size() >= 2) study.progress_reported = true;
    }
  }
  cut(reading);
}

// ---------------------------------------------------------------------------------------------
// Users

absl::StatusOr<v1::Study> SchedulerCore::CreateStudy(const v1::StudySpec& request) {
  ASSIGN_OR_RETURN(v1::StudySpec spec, study::NormalizeStudySpec(request, options_.spec_limits));
  v1::Study reply;
  WriteSequence stored;
  {
    CoreLock lock(this);
    // An evicted study to learn from is read back off the lock first; a study that is not
    // there is WarmStartLocked's to report.
    if (!spec.warm_start_study().empty()) {
      FindStudyReadingBack(spec.warm_start_study(), lock).IgnoreError();
    }
    ASSIGN_OR_RETURN(stored, CreateStudyLocked(std::move(spec), reply));
  }
  // Acknowledged only once it would survive a crash.
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the study is accepted but ", status.message(),
                                               "; create it again to check"));
  }
  return reply;
}

absl::StatusOr<WriteSequence> SchedulerCore::CreateStudyLocked(v1::StudySpec spec,
                                                               v1::Study& reply) {
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  if (auto it = studies_.find(spec.name()); it != studies_.end()) {
    const study::SpecDifference difference = study::DifferenceOf(it->second->spec, spec);
    if (difference.text.empty()) {
      reply = BuildStudyLocked(*it->second);
      return store_->last_sequence();  // Created before, perhaps not yet stored.
    }
    const bool only_limits =
        std::all_of(difference.fields.begin(), difference.fields.end(), [](const auto& field) {
          return std::find(kUpdatableFields.begin(), kUpdatableFields.end(), field) !=
                 kUpdatableFields.end();
        });
    return absl::AlreadyExistsError(absl::StrCat(
        "study \"", spec.name(), "\" exists with a different spec (", difference.text, "); ",
        only_limits ? "change its budget and limits with dhpt extend (UpdateStudy), or choose "
                      "another name"
                    : absl::StrCat("choose another name (dhpt submit --warm-start=", spec.name(),
                                   " keeps what it learnt)")));
  }
  RETURN_IF_ERROR(CheckMemoryLocked());
  RETURN_IF_ERROR(CheckRoomForStudyLocked(spec));
  ASSIGN_OR_RETURN(std::unique_ptr<StudyEntry> entry, NewStudyEntryLocked(spec));
  // Checked before anything is created; added before its first trial is suggested.
  CheckedTrials warm;
  if (!spec.warm_start_study().empty()) {
    ASSIGN_OR_RETURN(warm, WarmStartLocked(spec, entry->space));
  }
  entry->spec = std::move(spec);
  entry->create_time = ToTimestamp(options_.clock());
  entry->order = next_study_order_++;
  entry->head = next_position_++;
  WriteSequence stored = entry->last_write = store_->PutStudy(BuildStudyLocked(*entry));
  spec_bytes_total_ += static_cast<int64_t>(entry->spec.ByteSizeLong());
  StudyEntry& created = *entry;
  study_order_.push_back(entry.get());
  study_order_changed_ = true;
  dispatchable_.push_back(entry.get());
  studies_[created.spec.name()] = std::move(entry);
  if (!warm.empty()) {
    v1::AddTrialsResponse added;
    AddCheckedLocked(created, std::move(warm), added);
    stored = SaveStudyLocked(created);
  }
  DHPT_LOG_INFO("study %s created: %s %s, %d trials", created.spec.name(),
                v1::Model::Kind_Name(created.spec.model().kind()),
                v1::Algorithm::Name_Name(created.spec.algorithm().name()),
                created.spec.max_trials());
  DispatchLocked();
  reply = BuildStudyLocked(created);
  return stored;
}

namespace {

// Beyond its spec and its best trial, a study's answer holds its state, reason and counts.
constexpr size_t kStudySummaryBytes = 8 << 10;

// The most a trial of `spec` can hold as made here: each parameter at its longest value, every
// attempt its max_attempts allow (three ids of at most 128 bytes and a time each), and the
// rest (its error, metrics and times), bounded by the limits on them.
size_t LargestTrialBytes(const v1::StudySpec& spec) {
  constexpr size_t kTrialRestBytes = 8 << 10;
  constexpr size_t kAttemptBytes = 512;
  size_t bytes = kTrialRestBytes + static_cast<size_t>(std::max(spec.max_attempts(), 1)) * kAttemptBytes;
  for (const v1::Parameter& parameter : spec.parameters()) {
    size_t value = 11;  // A varint or a double, with its tag.
    for (const std::string& choice : parameter.categorical().values()) {
      value = std::max(value, choice.size() + 4);
    }
    bytes += parameter.name().size() + value + 8;  // A map entry's tags and lengths.
  }
  return bytes;
}

}  // namespace

absl::Status CheckStudyAnswerBytes(const v1::StudySpec& spec, size_t largest_trial_bytes) {
  const size_t answer = spec.ByteSizeLong() + kStudySummaryBytes + largest_trial_bytes;
  if (answer <= kMaxStudyAnswerBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the spec is ", spec.ByteSizeLong(), " bytes: with its largest trial the study's answer "
      "(GetStudy, ListStudies) could reach ", answer, " bytes, past the ", kMaxStudyAnswerBytes,
      " that gRPC clients such as grpcurl read by default; make the spec smaller (fewer or "
      "shorter categorical values)"));
}

absl::Status SchedulerCore::CheckRoomForStudyLocked(const v1::StudySpec& spec) const {
  if (absl::Status health = store_->health(); !health.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the database refuses writes, so no study is accepted: ", health.message()));
  }
  if (static_cast<int>(studies_.size()) >= options_.max_studies) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scheduler holds ", studies_.size(), " studies, its limit (--max_studies); "
        "delete finished studies (export them first to keep them) or ask its operator to "
        "raise the limit"));
  }
  // A study a client with gRPC's default receive limit (grpcurl, a stub) cannot read would
  // also stop its ListStudies at that study's page (hostile review).
  RETURN_IF_ERROR(CheckStudyAnswerBytes(spec, LargestTrialBytes(spec)));
  const int64_t bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (spec_bytes_total_ + bytes > options_.max_spec_bytes_total) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the scheduler holds ", spec_bytes_total_, " bytes of study specs and this one has ",
        bytes, ", past its limit (--max_spec_bytes_total=", options_.max_spec_bytes_total,
        "); delete finished studies (export them first to keep them), make the spec smaller, "
        "or ask its operator to raise the limit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SchedulerCore::StudyEntry>> SchedulerCore::NewStudyEntryLocked(
    const v1::StudySpec& spec) {
  auto entry = std::make_unique<StudyEntry>();
  entry->space = study::ToSearchSpace(spec);
  entry->early_stopping = study::ToEarlyStoppingRule(spec);
  entry->front.emplace(spec);
  ASSIGN_OR_RETURN(entry->optimizer,
                   options_.optimizer_factory(entry->space, study::ToOptimizerConfig(spec)));
  return entry;
}

absl::StatusOr<const SchedulerCore::StudyEntry*> SchedulerCore::FindSummaryLocked(
    absl::string_view name) const {
  if (name.empty()) return absl::InvalidArgumentError("name: the study's name is required");
  auto it = studies_.find(name);
  // Quoted cut short: a name of any length (up to the message limit) would otherwise come back
  // whole in the status, past the 8 KiB of metadata a gRPC client takes by default, which then
  // reports RESOURCE_EXHAUSTED "received initial metadata size exceeds limit" instead.
  if (it == studies_.end()) {
    return absl::NotFoundError(absl::StrCat("no study named ", study::Quote(name)));
  }
  return it->second.get();
}

absl::StatusOr<v1::Study> SchedulerCore::GetStudy(absl::string_view name) const {
  // Off the lock when it can be: see published_studies.h.
  if (std::shared_ptr<const PublishedStudy> published = published_.Find(name)) {
    return published->Answer();
  }
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(name));
  TrackSummaryLocked(*const_cast<StudyEntry*>(study));  // Published as the lock is released.
  return BuildStudyLocked(*study);
}

absl::StatusOr<v1::Study> SchedulerCore::GetStudyUnderLockForTest(absl::string_view name) const {
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(name));
  return BuildStudyLocked(*study);
}

absl::StatusOr<v1::Trial> SchedulerCore::GetBestTrialUnderLockForTest(absl::string_view name) {
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindStudyReadingBack(name, lock));
  if (!study->best) return NoBestTrial(name);
  return FullTrialLocked(trials_.at(*study->best));
}

absl::StatusOr<std::vector<int64_t>> SchedulerCore::CurveInMemoryForTest(absl::string_view name,
                                                                         int64_t number) const {
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(name));
  if (number < 0 || number >= study->created()) return absl::NotFoundError("no such trial");
  std::vector<int64_t> steps;
  for (const study::IntermediateValue& value :
       trials_.at(study->trial_ids[static_cast<size_t>(number)]).curve.values) {
    steps.push_back(value.step);
  }
  return steps;
}

void SchedulerCore::TrackSummaryLocked(StudyEntry& study) const {
  study.summary_tracked = true;
  MarkSummaryChangedLocked(study);
}

void SchedulerCore::MarkSummaryChangedLocked(StudyEntry& study) const {
  if (!study.summary_tracked || study.summary_changed) return;
  study.summary_changed = true;
  summaries_changed_.push_back(&study);
}

void SchedulerCore::PublishSummariesLocked() {
  for (StudyEntry* study : summaries_changed_) {
    study->summary_changed = false;
    published_.Publish(study->spec.name(), PublishedLocked(*study));
  }
  summaries_changed_.clear();
  if (study_order_changed_ && study_order_tracked_) {
    auto order = std::make_shared<PublishedOrder>();
    order->reserve(study_order_.size());
    for (const StudyEntry* study : study_order_) order->emplace_back(study->order, study->spec.name());
    published_.PublishOrder(std::move(order));
  }
  study_order_changed_ = false;
}

namespace {

// The summary of a study not ended that runs nothing and has trials to run says why it waits
// (which workers are connected, which kinds they run, the memory cap): it reads more than the
// study, so it is not published (PublishedLocked) and GetStudy builds it under the lock.
bool ReadsConnectedWorkers(bool terminal, int running, const v1::Study& summary) {
  return !terminal && summary.trials_pending() > 0 && running == 0;
}

}  // namespace

std::shared_ptr<const PublishedStudy> SchedulerCore::PublishedLocked(StudyEntry& study) {
  auto published = std::make_shared<PublishedStudy>();
  published->summary = BuildSummaryLocked(study);
  if (ReadsConnectedWorkers(study.terminal(), study.running, published->summary)) return nullptr;
  if (!study.published_spec) study.published_spec = std::make_shared<const v1::StudySpec>(study.spec);
  published->spec = study.published_spec;
  if (study.evicted || !study.best) {
    study.published_best.reset();  // An evicted study's summary holds its best trial.
  } else {
    const TrialEntry& best = trials_.at(*study.best);
    // A trial's position moves at each change of it (PublishTrialLocked).
    if (!study.published_best || study.published_best_id != *study.best ||
        study.published_best_position != best.position) {
      study.published_best = std::make_shared<const v1::Trial>(FullTrialLocked(best));
      study.published_best_id = *study.best;
      study.published_best_position = best.position;
    }
    published->best = study.published_best;
  }
  return published;
}

std::vector<v1::Worker> SchedulerCore::ListWorkers() const {
  CoreLock lock(this);
  std::vector<v1::Worker> workers;
  for (const auto& [session, worker] : workers_) {
    v1::Worker& out = workers.emplace_back();
    out.set_worker_id(worker.worker_id);
    *out.mutable_capabilities() = worker.capabilities;
    std::vector<uint64_t> running(worker.running.begin(), worker.running.end());
    running.insert(running.end(), worker.superseded.begin(), worker.superseded.end());
    std::sort(running.begin(), running.end());
    out.mutable_running_trials()->Add(running.begin(), running.end());
    out.set_node_class(worker.node_class);
    for (const SpeedModel::Estimate& estimate : speeds_.EstimatesOf(worker.node_class)) {
      v1::WorkerSpeed& speed = *out.add_speeds();
      speed.set_kind(estimate.kind);
      speed.set_relative_speed(estimate.relative_speed);
      speed.set_seconds_per_unit(estimate.seconds_per_unit);
    }
    out.set_prior_speed(speeds_.PriorSpeed(worker.node_class).value_or(0));
    if (worker.utilisation) {
      *out.mutable_utilisation() = *worker.utilisation;
      *out.mutable_utilisation_time() = ToTimestamp(worker.utilisation_time);
    }
  }
  std::sort(workers.begin(), workers.end(), [](const v1::Worker& a, const v1::Worker& b) {
    return a.worker_id() < b.worker_id();
  });
  return workers;
}

std::vector<SpeedModel::Estimate> SchedulerCore::SpeedEstimates() const {
  CoreLock lock(this);
  return speeds_.Estimates();
}

absl::StatusOr<ListPage<v1::Study>> SchedulerCore::ListStudies(
    int page_size, absl::string_view page_token) const {
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultStudyPageSize, kMaxStudyPageSize));
  ASSIGN_OR_RETURN(const StudyListing listing, ParseStudyPageToken(page_token));
  ASSIGN_OR_RETURN(std::optional<ListPage<v1::Study>> published, PublishedStudyPage(size, listing));
  if (published) return *std::move(published);
  CoreLock lock(this);
  return StudyPageLocked(size, listing, /*track=*/true);
}

absl::StatusOr<ListPage<v1::Study>> SchedulerCore::ListStudiesUnderLockForTest(
    int page_size, absl::string_view page_token) const {
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultStudyPageSize, kMaxStudyPageSize));
  ASSIGN_OR_RETURN(const StudyListing listing, ParseStudyPageToken(page_token));
  CoreLock lock(this);
  return StudyPageLocked(size, listing, /*track=*/false);
}

absl::StatusOr<std::optional<ListPage<v1::Study>>> SchedulerCore::PublishedStudyPageForTest(
    int page_size, absl::string_view page_token) const {
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultStudyPageSize, kMaxStudyPageSize));
  ASSIGN_OR_RETURN(const StudyListing listing, ParseStudyPageToken(page_token));
  return PublishedStudyPage(size, listing);
}

absl::StatusOr<ListPage<v1::Study>> SchedulerCore::StudyPageLocked(int size, StudyListing listing,
                                                                   bool track) const {
  // Pages are built one at a time, under the lock, so what the budget has now is this page's.
  ASSIGN_OR_RETURN(const size_t available, reply_budget_.Available());
  const size_t max_bytes = std::min(kMaxStudyPageBytes, available);
  ListPage<v1::Study> page;
  auto it = std::upper_bound(study_order_.begin(), study_order_.end(), listing.after,
                             [](uint64_t order, const StudyEntry* s) { return order < s->order; });
  // The first page fixes which studies the listing shows: those that exist now.
  const uint64_t before = std::min(
      listing.before, study_order_.empty() ? 0 : study_order_.back()->order + 1);
  size_t bytes = 0;
  // The next page of these studies is read off the lock (published as the lock is released).
  if (track && !study_order_tracked_) {
    study_order_tracked_ = true;
    study_order_changed_ = true;
  }
  for (; it != study_order_.end() && (*it)->order < before; ++it) {
    const bool full = static_cast<int>(page.items.size()) >= size;
    std::optional<v1::Study> study;
    if (!full) {
      if (track) TrackSummaryLocked(**it);
      study = BuildStudyLocked(**it);
    }
    if (full || !FitsStudyPage(page, bytes, *study, max_bytes)) {
      page.next_page_token = StudyPageToken((*(it - 1))->order, before);
      break;
    }
  }
  page.lease = reply_budget_.Take(bytes);
  return page;
}

absl::StatusOr<std::optional<ListPage<v1::Study>>> SchedulerCore::PublishedStudyPage(
    int size, StudyListing listing) const {
  std::optional<PublishedStudies::Listed> listed =
      published_.After(listing.after, listing.before, static_cast<size_t>(size));
  if (!listed) return std::nullopt;
  // As the page under the lock (ListStudies), cut at kMaxStudyPageBytes here and at what the
  // budget has left below.
  ListPage<v1::Study> page;
  size_t bytes = 0;
  for (size_t i = 0; i < listed->studies.size(); ++i) {
    v1::Study study = listed->studies[i].second->Answer();
    if (!FitsStudyPage(page, bytes, study, kMaxStudyPageBytes)) {
      page.next_page_token = StudyPageToken(listed->studies[i - 1].first, listed->before);
      break;
    }
  }
  if (page.next_page_token.empty() && listed->more) {
    page.next_page_token = StudyPageToken(
        listed->studies.empty() ? listing.after : listed->studies.back().first, listed->before);
  }
  ASSIGN_OR_RETURN(std::optional<ReplyBudget::Lease> lease, reply_budget_.TakeIfFits(bytes));
  if (!lease) return std::nullopt;  // Cut to the budget, under the lock.
  page.lease = *std::move(lease);
  return page;
}

absl::StatusOr<v1::Study> SchedulerCore::StopStudy(absl::string_view name) {
  WriteSequence stored;
  v1::Study reply;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* found, FindSummaryLocked(name));
    StudyEntry& study = *const_cast<StudyEntry*>(found);
    if (!study.terminal()) EndStudyLocked(study, v1::Study::STOPPED, "stopped by a user");
    reply = BuildStudyLocked(study);
    stored = store_->last_sequence();
  }
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the study is stopped but ", status.message()));
  }
  return reply;
}

absl::Status SchedulerCore::DeleteStudy(absl::string_view name, bool force) {
  WriteSequence stored;
  {
    CoreLock lock(this);
    ASSIGN_OR_RETURN(const StudyEntry* found, FindSummaryLocked(name));
    StudyEntry& study = *const_cast<StudyEntry*>(found);
    if (!study.terminal()) {
      if (!force) {
        return absl::FailedPreconditionError(absl::StrCat(
            "study \"", name, "\" is ", v1::Study::State_Name(study.state),
            "; stop it first (dhpt stop), or delete it with force"));
      }
      EndStudyLocked(study, v1::Study::STOPPED, "deleted by a user");
    }
    EndWatchesLocked(study, absl::NotFoundError(absl::StrCat("study \"", name, "\" was deleted")));
    for (uint64_t id : study.trial_ids) trials_.erase(id);
    ForgetCachedLocked(study);
    spec_bytes_total_ -= static_cast<int64_t>(study.spec.ByteSizeLong());
    study_order_.erase(std::find(study_order_.begin(), study_order_.end(), &study));
    study_order_changed_ = true;
    stored = store_->DeleteStudy(study.spec.name());
    if (study.summary_changed) {
      summaries_changed_.erase(
          std::find(summaries_changed_.begin(), summaries_changed_.end(), &study));
    }
    published_.Publish(study.spec.name(), nullptr);
    auto owned = studies_.extract(study.spec.name());
    DHPT_LOG_INFO("study %s deleted", study.spec.name());
    if (study.suggesting) {
      // A suggestion thread still reads its optimiser: it frees the entry when it returns.
      study.deleted = true;
      deleted_studies_.push_back(std::move(owned.mapped()));
    }
  }
  if (absl::Status status = store_->Sync(stored); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the study is deleted but ", status.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ListPage<v1::Trial>> SchedulerCore::ListTrials(
    absl::string_view name, v1::Trial::State only, int page_size, absl::string_view page_token,
    TrialView view, int sample_stride) {
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultTrialPageSize, kMaxTrialPageSize));
  if (sample_stride < 0 || sample_stride > kMaxSampleStride) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample_stride: ", sample_stride, " is not 0 to ", kMaxSampleStride,
        " (0 or 1 lists every trial; N lists every N-th and each that improved on the best)"));
  }
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* found, FindSummaryLocked(name));
  if (found->evicted) {
    // A page of an ended study out of memory comes from the store's rows: reading the whole
    // study back for it cost a 100,000-trial study a second of CPU (issue 31).
    ASSIGN_OR_RETURN(
        std::optional<ListPage<v1::Trial>> stored,
        ListStoredTrialsLocked(name, only, size, page_token, view, sample_stride, lock));
    if (stored) return *std::move(stored);
  }
  ASSIGN_OR_RETURN(const StudyEntry* study, FindStudyReadingBack(name, lock));
  const std::string filter = TrialPageFilter(name, only, view, study->order);
  TrialSample sample(study->spec, sample_stride, std::nullopt);
  ASSIGN_OR_RETURN(const uint64_t start, TrialPageStart(page_token, filter, sample));
  // Pages are built one at a time, under the lock, so what the budget has now is this page's:
  // many callers cannot each hold a large page (a short page's token goes on from its end).
  ASSIGN_OR_RETURN(const size_t available, reply_budget_.Available());
  const size_t max_bytes = std::min(kMaxPageBytes, available);
  ListPage<v1::Trial> page;
  size_t bytes = 0;
  for (size_t number = start; number < study->trial_ids.size(); ++number) {
    if (static_cast<int>(page.items.size()) >= size || bytes >= max_bytes) {
      page.next_page_token = TrialPageToken(filter, sample, number);
      break;
    }
    const TrialEntry& trial = trials_.at(study->trial_ids[number]);
    ++page.covered;
    if (only != v1::Trial::STATE_UNSPECIFIED && trial.state() != only) continue;
    if (!sample.Keep(trial.number(), trial.state(), trial.objective_value())) continue;
    bytes += page.items
                 .emplace_back(view == TrialView::kValuesOnly ? ValuesOnlyLocked(trial)
                               : view == TrialView::kPlot     ? PlotViewLocked(trial)
                                                              : FullTrialLocked(trial))
                 .ByteSizeLong();
  }
  page.lease = reply_budget_.Take(bytes);
  return page;
}

absl::StatusOr<v1::Trial> SchedulerCore::GetBestTrial(absl::string_view name) {
  // Off the lock when it can be, as GetStudy: the published summary holds the best trial (an
  // evicted study's too, so it is not read back for it).
  if (std::shared_ptr<const PublishedStudy> published = published_.Find(name)) {
    if (const v1::Trial* best = published->BestTrial()) return *best;
    return NoBestTrial(name);
  }
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindStudyReadingBack(name, lock));
  TrackSummaryLocked(*const_cast<StudyEntry*>(study));  // Published as the lock is released.
  if (!study->best) return NoBestTrial(name);
  return FullTrialLocked(trials_.at(*study->best));
}

absl::StatusOr<v1::GetParetoFrontResponse> SchedulerCore::GetParetoFront(
    absl::string_view name, int page_size, absl::string_view page_token) {
  ASSIGN_OR_RETURN(const int size, PageSize(page_size, kDefaultTrialPageSize, kMaxTrialPageSize));
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* study, FindStudyReadingBack(name, lock));
  const std::string filter = absl::StrCat(name, "|", study->order);
  ASSIGN_OR_RETURN(const uint64_t start, PagePosition(page_token, "front", filter));
  // One objective: the front is the best trial, when it is feasible (as Vizier answers).
  std::vector<const TrialEntry*> members;
  if (study->spec.objectives_size() < 2) {
    if (study->best && !trials_.at(*study->best).infeasible()) {
      members.push_back(&trials_.at(*study->best));
    }
  } else {
    for (uint64_t id : study->front->trial_ids()) members.push_back(&trials_.at(id));
  }
  std::sort(members.begin(), members.end(), [](const TrialEntry* a, const TrialEntry* b) {
    return a->number() < b->number();
  });
  v1::GetParetoFrontResponse front;
  size_t bytes = 0;
  for (const TrialEntry* member : members) {
    const uint64_t number = static_cast<uint64_t>(member->number());
    if (number < start) continue;
    if (front.trials_size() >= size || bytes >= kMaxPageBytes) {
      front.set_next_page_token(PageToken("front", filter, number));
      break;
    }
    v1::Trial* trial = front.add_trials();
    *trial = FullTrialLocked(*member);
    bytes += trial->ByteSizeLong();
  }
  if (study->spec.objectives_size() >= 2) {
    front.set_hypervolume(study->front->hypervolume());
    front.set_hypervolume_estimated(study->front->hypervolume_estimated());
    for (double coordinate : study->front->reference_point()) front.add_reference_point(coordinate);
  }
  return front;
}

// ---------------------------------------------------------------------------------------------
// Workers

namespace {

absl::Status ValidateHello(const v1::Hello& hello) {
  if (hello.worker_id().empty()) return absl::InvalidArgumentError("hello.worker_id: is required");
  if (hello.worker_id().size() > kMaxWorkerIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.worker_id: longer than ", kMaxWorkerIdBytes, " bytes"));
  }
  // Shown to every user (ListWorkers, trials, the dashboard): no text that would rewrite their
  // terminals or read other than it is (hostile review: an ESC and a C1 CSI were kept).
  if (HasUnsafeCharacters(hello.worker_id())) {
    return absl::InvalidArgumentError(
        "hello.worker_id: control or invisible characters; name the worker with printable text");
  }
  RETURN_IF_ERROR(CheckEnumValues(hello, "hello"));
  const v1::WorkerCapabilities& caps = hello.capabilities();
  if (caps.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrCat("hello.capabilities.labels: ",
                                                   caps.labels_size(), " labels, more than ",
                                                   kMaxLabels));
  }
  for (const auto& [key, value] : caps.labels()) {
    RETURN_IF_ERROR(ValidateLabel("hello.capabilities.labels", key, value));
  }
  if (caps.slots() < 1 || caps.slots() > 1024) {
    return absl::InvalidArgumentError("hello.capabilities.slots: must be between 1 and 1024");
  }
  if (caps.models().empty() || caps.models_size() > 16) {
    return absl::InvalidArgumentError("hello.capabilities.models: must name 1 to 16 models");
  }
  for (const std::string* text : {&caps.device_name(), &caps.node_name(), &caps.arch(),
                                  &caps.version(), &caps.gpu_telemetry()}) {
    if (text->size() > kMaxWorkerTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hello.capabilities: names must be at most ", kMaxWorkerTextBytes, " bytes"));
    }
    if (HasUnsafeCharacters(*text)) {
      return absl::InvalidArgumentError(
          "hello.capabilities: names must not hold control or invisible characters");
    }
  }
  // Echoed by ListWorkers and read as a speed prior: NaN, an infinity or a negative count of
  // cores is no measurement (0: not measured).
  if (!std::isfinite(caps.trial_cpu_cores()) || caps.trial_cpu_cores() < 0) {
    return absl::InvalidArgumentError(
        "hello.capabilities.trial_cpu_cores: must be a finite number of cores, 0 or more");
  }
  if (caps.commands_size() > kMaxWorkerCommands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.capabilities.commands: more than ", kMaxWorkerCommands, " commands"));
  }
  for (const std::string& command : caps.commands()) {
    if (!IsUserCodeName(command)) {
      return absl::InvalidArgumentError(
          "hello.capabilities.commands: names are 1-64 letters, digits, '.', '_' or '-'");
    }
  }
  if (hello.running_size() > kMaxHeldAttempts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.running: more than ", kMaxHeldAttempts, " attempts held by one worker"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> SchedulerCore::ConnectWorker(const v1::Hello& hello,
                                                      const std::vector<std::string>& peer_names,
                                                      WorkerChannel* channel) {
  RETURN_IF_ERROR(ValidateHello(hello));
  if (!peer_names.empty() &&
      std::find(peer_names.begin(), peer_names.end(), hello.worker_id()) == peer_names.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker id \"", WorkerText(hello.worker_id(), kMaxWorkerIdBytes),
        "\" is not a name of this worker's certificate; start the worker with "
        "--worker_id set to its certificate's common name"));
  }
  const v1::WorkerCapabilities& caps = hello.capabilities();
  CoreLock lock(this);
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  // Without a certificate to prove it, a second connection may not push out a worker that is
  // still heard from: anyone can read worker ids from ListWorkers. A worker whose old stream
  // broke unnoticed is let in once that stream has been silent for 1.5 heartbeat intervals.
  if (peer_names.empty()) {
    for (const auto& [other, worker] : workers_) {
      const absl::Duration silent = options_.clock() - worker.last_seen;
      if (worker.worker_id == hello.worker_id() && silent < options_.heartbeat_interval * 3 / 2) {
        return absl::AlreadyExistsError(absl::StrCat(
            "worker id \"", worker.worker_id, "\" is connected and was heard from ",
            absl::FormatDuration(silent), " ago; give every worker its own --worker_id"));
      }
    }
  }
  const uint64_t session = next_session_++;
  WorkerEntry& worker = workers_[session];
  worker.worker_id = hello.worker_id();
  worker.capabilities = caps;
  worker.placement_class = PlacementClass(caps);
  worker.node_class = NodeClass(caps, hello.worker_id());
  ++workers_per_class_[worker.node_class];
  if (!speeds_.HasRoomFor(worker.node_class)) {
    // Classes come and go (a worker without a board label is a class of its own, and a pod's
    // id changes with each restart): make room by forgetting those no worker belongs to now.
    speeds_.ForgetClassesExcept([this](const std::string& node_class) {
      mutex_.AssertHeld();
      return workers_per_class_.contains(node_class);
    });
  }
  speeds_.SetPrior(worker.node_class, caps.trial_cpu_cores());
  MaybeFreeLocked(session);
  worker.channel = channel;
  worker.last_seen = options_.clock();
  v1::SchedulerMessage welcome;
  welcome.mutable_welcome()->set_worker_id(hello.worker_id());
  welcome.mutable_welcome()->set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  welcome.mutable_welcome()->set_epoch(epoch_);
  channel->Send(std::move(welcome));

  // The attempts it still holds stay with it: moved from an older stream of the same worker
  // id (a reconnect before the old one was noticed dead), or taken back from pending.
  // The others it is told to drop (hostile reviews): left running, each filled a slot that was
  // given a new trial, which waited behind it (a 0.2 ms trial measured at 13 s and learnt as
  // the board's speed), and one whose trial runs elsewhere was cancelled at its first progress
  // report anyway. A finished one's result, sent right after the Hello, still counts if first.
  for (const v1::TrialAttempt& attempt : hello.running()) {
    if (ReclaimLocked(session, worker, attempt) || attempt.attempt() < 1) continue;
    channel->Send(CancelMessage(attempt.trial_id(), attempt.attempt(), attempt.epoch(),
                                "not this worker's to run now: the trial has ended, runs "
                                "elsewhere, or waits under its study's parallel_trials"));
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto next = std::next(it);
    if (it->first != session && it->second.worker_id == hello.worker_id()) {
      it->second.channel->Close(absl::AbortedError("replaced by a newer connection"));
      DisconnectLocked(it->first, "replaced by a newer connection");
    }
    it = next;
  }
  observer_->WorkerConnected(caps);
  LogWorkersNotLoggedLocked();
  if (worker_log_.Admit("connects", options_.clock())) {
    DHPT_LOG_INFO("worker %s connected: %s on %s, %d slots, %d attempts kept", worker.worker_id,
                  v1::WorkerCapabilities::DeviceKind_Name(caps.device_kind()),
                  WorkerText(caps.node_name(), kMaxWorkerTextBytes), caps.slots(),
                  worker.running.size());
  }
  DispatchLocked();
  PublishWaitingStudiesLocked();
  return session;
}

bool SchedulerCore::ReclaimLocked(uint64_t session, WorkerEntry& worker,
                                  const v1::TrialAttempt& attempt) {
  auto it = trials_.find(attempt.trial_id());
  if (it == trials_.end()) return false;
  TrialEntry& trial = it->second;
  if (TrialTerminal(trial.state())) return false;  // Its result counts once, if it is first.
  v1::Trial& t = trial.trial();
  // Only by the worker id the attempt was given to, under its epoch: the current attempt, or,
  // while nobody runs the trial, any other attempt its worker still runs (back from a dropped
  // link after the attempt given since, or an earlier one taken back meanwhile, was lost too:
  // the trial goes back to it rather than wait to start over, or fail at the end of a hold;
  // hostile reviews).
  const bool current = attempt.attempt() == t.attempt();
  if (!(current || t.state() == v1::Trial::PENDING) ||
      !AttemptGivenTo(t, attempt.attempt(), worker.worker_id, attempt.epoch())) {
    return false;
  }
  StudyEntry& study = *trial.study;
  if (t.state() == v1::Trial::RUNNING) {
    if (trial.session == session) return true;
    if (auto old = workers_.find(trial.session); old != workers_.end()) {
      old->second.running.erase(t.id());
      MaybeFreeLocked(trial.session);
    }
  } else if (t.state() == v1::Trial::PENDING) {
    // A held trial kept its slot (even under a parallel_trials lowered since, as a running
    // trial keeps running): its worker takes it back. Any other waits under the study's cap.
    const bool held = held_.contains(t.id());
    if (study.terminal() || (!held && study.spec.parallel_trials() > 0 &&
                             study.running >= study.spec.parallel_trials())) {
      return false;
    }
    study.pending.erase(std::remove(study.pending.begin(), study.pending.end(), t.id()),
                        study.pending.end());
    RecordAsAttempt(t, attempt.attempt());
    t.set_state(v1::Trial::RUNNING);
    t.set_worker_id(worker.worker_id);
    t.set_node_name(worker.capabilities.node_name());
    t.clear_error();
    ++study.running;
    ReleaseHoldLocked(trial);
    UnchargeAttempt(t, t.attempt());  // Its worker came back for it: not lost after all.
    if (!trial.live->started) {
      // After a restart nothing says whether it had begun (Recover starts every attempt
      // unbegun): its worker holds it, so it is taken as begun, as HandleStarted would have.
      // Losing it again is charged, and the trial_timeout backstop runs from now (hostile
      // review: neither held after a restart, so max_attempts 1 gave it a second attempt).
      trial.live->started = true;
      if (std::optional<absl::Duration> timeout = TrialTimeout(study.spec)) {
        trial.live->deadline = options_.clock() + *timeout +
                               options_.heartbeat_interval * options_.missed_heartbeats;
      }
    }
    SaveTrialLocked(trial);
    PublishTrialLocked(trial);
  } else {
    return false;
  }
  trial.session = session;
  worker.running.insert(t.id());
  return true;
}

void SchedulerCore::DisconnectWorker(uint64_t session, absl::string_view reason) {
  CoreLock lock(this);
  DisconnectLocked(session, reason, /*may_return=*/true);
  DispatchLocked();
  PublishWaitingStudiesLocked();
}

void SchedulerCore::DisconnectLocked(uint64_t session, absl::string_view reason,
                                     bool may_return) {
  auto it = workers_.find(session);
  if (it == workers_.end()) return;
  LeaveSetAsideLocked(session, it->second);
  WorkerEntry worker = std::move(it->second);
  workers_.erase(it);
  // A class's prior stands for its connected boards: once none is left it must not go on
  // moving the others' predictions (what the class learnt is kept for its return).
  if (auto count = workers_per_class_.find(worker.node_class); --count->second == 0) {
    workers_per_class_.erase(count);
    speeds_.ForgetPrior(worker.node_class);
  }
  LogWorkersNotLoggedLocked();
  if (worker_log_.Admit("disconnects", options_.clock())) {
    DHPT_LOG_INFO("worker %s disconnected (%s); %d running trials go back to pending",
                  worker.worker_id, reason, worker.running.size());
  }
  // A trial it ran while a duplicate runs elsewhere carries on there.
  for (uint64_t id : worker.superseded) trials_.at(id).superseded_session = 0;
  std::vector<StudyEntry*> touched;
  for (uint64_t id : worker.running) {
    TrialEntry& trial = trials_.at(id);
    trial.session = 0;
    --trial.study->running;
    // A duplicate's worker lost: the attempt it superseded runs on, and the trial with it.
    if (!shutting_down_ && ResumeSupersededLocked(trial)) continue;
    // A scheduler going away loses nothing of the worker's doing.
    RequeueLocked(trial, absl::StrCat("worker ", worker.worker_id, " was lost: ", reason),
                  /*lost=*/!shutting_down_,
                  may_return ? worker.last_seen + Lease() : absl::InfinitePast());
    touched.push_back(trial.study);
  }
  for (StudyEntry* study : touched) CheckStudyEndLocked(*study);
}

void SchedulerCore::HandleWorkerMessage(uint64_t session, const v1::WorkerMessage& message) {
  switch (message.kind_case()) {
    case v1::WorkerMessage::kResult:
      HandleResult(session, message.result());
      break;
    case v1::WorkerMessage::kProgress:
      HandleProgress(session, message.progress());
      break;
    case v1::WorkerMessage::kStarted:
      HandleStarted(session, message.started());
      break;
    case v1::WorkerMessage::kDraining:
      HandleDraining(session, message.draining());
      break;
    case v1::WorkerMessage::kHeartbeat:
      HandleHeartbeat(session, message.heartbeat());
      break;
    case v1::WorkerMessage::kHello:  // A second hello changes nothing.
    case v1::WorkerMessage::KIND_NOT_SET:
      HandleHeartbeat(session, v1::Heartbeat());
      break;
  }
}

namespace {

// A worker's word about itself is bounded like everything else it sends: a broken or lying
// worker must not put NaN or a million cores into ListWorkers, the dashboard or the gauges.
absl::Status ValidateUtilisation(const v1::WorkerUtilisation& u) {
  if (!std::isfinite(u.cpu_cores()) || u.cpu_cores() < 0 ||
      u.cpu_cores() > kMaxUtilisationCpuCores) {
    return absl::InvalidArgumentError(absl::StrCat(
        "utilisation.cpu_cores must be between 0 and ", kMaxUtilisationCpuCores, "; got ",
        u.cpu_cores()));
  }
  if (u.memory_bytes() > kMaxUtilisationMemoryBytes) {
    return absl::InvalidArgumentError(absl::StrCat("utilisation.memory_bytes must be at most ",
                                                   kMaxUtilisationMemoryBytes, "; got ",
                                                   u.memory_bytes()));
  }
  if (u.has_gpu_percent() &&
      (!std::isfinite(u.gpu_percent()) || u.gpu_percent() < 0 || u.gpu_percent() > 100)) {
    return absl::InvalidArgumentError(
        absl::StrCat("utilisation.gpu_percent must be between 0 and 100; got ", u.gpu_percent()));
  }
  if (u.interval_ms() <= 0 || u.interval_ms() > kMaxUtilisationIntervalMs) {
    return absl::InvalidArgumentError(absl::StrCat("utilisation.interval_ms must be between 1 and ",
                                                   kMaxUtilisationIntervalMs, "; got ",
                                                   u.interval_ms()));
  }
  return absl::OkStatus();
}

}  // namespace

void SchedulerCore::HandleHeartbeat(uint64_t session, const v1::Heartbeat& heartbeat) {
  CoreLock lock(this);
  auto it = workers_.find(session);
  if (it == workers_.end()) return;
  WorkerEntry& worker = it->second;
  worker.last_seen = options_.clock();
  if (!heartbeat.has_utilisation()) return;
  if (absl::Status valid = ValidateUtilisation(heartbeat.utilisation()); !valid.ok()) {
    // Refused, not clamped: a clamped lie still looks like a measurement. Said once per
    // stream: a worker sending thousands of bad heartbeats must not flood the log.
    if (!worker.utilisation_refusal_logged) {
      DHPT_LOG_WARNING("worker %s: heartbeat's utilisation refused (said once per connection): %s",
                       worker.worker_id, valid.message());
      worker.utilisation_refusal_logged = true;
    }
    return;
  }
  worker.utilisation = heartbeat.utilisation();
  worker.utilisation_time = worker.last_seen;
}

bool SchedulerCore::RunsOnLocked(const TrialEntry& trial, uint64_t session, int attempt) const {
  return trial.state() == v1::Trial::RUNNING && trial.session == session &&
         attempt == trial.attempt();
}

void SchedulerCore::RefuseTrialLocked(uint64_t session, WorkerEntry& worker, uint64_t trial_id,
                                      int attempt, uint64_t epoch, absl::string_view what) {
  if (worker.refused_trials.contains(trial_id)) return;  // Answered already.
  if (worker.refused_trials.size() >= kMaxUnknownTrialsPerSession) {
    DHPT_LOG_WARNING("worker %s names too many trials it does not run; cutting it off",
                     worker.worker_id);
    worker.channel->Close(absl::ResourceExhaustedError(absl::StrCat(
        "sent ", what, " for more than ", kMaxUnknownTrialsPerSession,
        " trials it does not run")));
    DisconnectLocked(session, "protocol abuse");
    DispatchLocked();
    return;
  }
  worker.refused_trials.insert(trial_id);
  // Tell it to stop rather than fail the stream: a worker that missed a Cancel stops now.
  worker.channel->Send(CancelMessage(
      trial_id, attempt, epoch,
      absl::StrCat("attempt ", attempt, " of trial ", trial_id, " is not running on this worker")));
}

SchedulerCore::TrialEntry* SchedulerCore::AttemptOfSessionLocked(uint64_t session,
                                                                 uint64_t trial_id, int attempt,
                                                                 uint64_t epoch,
                                                                 absl::string_view what) {
  auto worker = workers_.find(session);
  if (worker == workers_.end()) return nullptr;
  worker->second.last_seen = options_.clock();
  auto trial = trials_.find(trial_id);
  v1::Trial parsed;
  if (trial != trials_.end() && TrialTerminal(trial->second.state()) &&
      AttemptGivenTo(MessageLocked(trial->second, parsed), attempt, worker->second.worker_id,
                     epoch)) {
    // Its own attempt of a trial that has ended (pruned, stopped, timed out): what was in
    // flight when it was told to stop. Dropped; counting it as naming an unknown trial would
    // cut off a worker that had simply run many pruned trials.
    return nullptr;
  }
  if (trial != trials_.end() && trial->second.superseded_session == session &&
      trial->second.superseded_attempt == attempt) {
    // An attempt a duplicate superseded: it runs on to its result, but the duplicate's progress
    // is the trial's curve.
    return nullptr;
  }
  if (trial == trials_.end() || !RunsOnLocked(trial->second, session, attempt) ||
      !AttemptGivenTo(trial->second.trial(), attempt, worker->second.worker_id, epoch)) {
    RefuseTrialLocked(session, worker->second, trial_id, attempt, epoch, what);
    return nullptr;
  }
  return &trial->second;
}

void SchedulerCore::HandleProgress(uint64_t session, const v1::TrialProgress& progress) {
  CoreLock lock(this);
  TrialEntry* trial = AttemptOfSessionLocked(session, progress.trial_id(), progress.attempt(),
                                             progress.epoch(), "progress");
  if (trial == nullptr) return;
  RecordProgressLocked(*trial, progress.step(), progress.value());
  if (trial->state() == v1::Trial::RUNNING) ReconsiderDuplicatesLocked(*trial);
}

void SchedulerCore::RecordProgressLocked(TrialEntry& trial, int64_t step, double value) {
  if (trial.live->stored_values >= kMaxIntermediateValuesPerAttempt) return;
  // What is stored is exactly what is judged, so that a restart decides alike.
  if (!study::IsJudgedReport(trial.live->last_step, step, value)) return;
  trial.live->last_step = step;
  trial.live->queued_or_reported = options_.clock();
  if (trial.live->first_report_ms == 0 && step > 0 && trial.trial().has_start_time()) {
    const int64_t ms = absl::ToInt64Milliseconds(options_.clock() -
                                                 FromTimestamp(trial.trial().start_time()));
    trial.live->first_report_ms = static_cast<int32_t>(std::clamp<int64_t>(ms, 1, INT32_MAX));
    trial.live->first_report_step = static_cast<int32_t>(std::min<int64_t>(step, INT32_MAX));
  }
  ++trial.live->stored_values;
  // One value is the final one (a program that prints its objective only at exit); progress
  // is a second.
  if (trial.live->stored_values >= 2 && !trial.study->progress_reported) {
    trial.study->progress_reported = true;
    MarkSummaryChangedLocked(*trial.study);  // Its early-stopping notice goes.
  }
  ++trial.study->changes;
  trial.study->last_write = store_->PutIntermediateValue(
      trial.study->spec.name(), trial.id(), trial.attempt(), step, value);
  if (!std::holds_alternative<std::monostate>(trial.study->early_stopping)) {
    ConsiderStoppingLocked(trial, step, value);
  }
}

void SchedulerCore::ConsiderStoppingLocked(TrialEntry& trial, int64_t step, double value) {
  trial.curve.values.push_back({step, value});
  StudyEntry& study = *trial.study;
  const absl::Time start = absl::Now();
  std::vector<const study::TrialCurve*> others;
  int64_t longest_completed = 0;
  for (uint64_t id : study.trial_ids) {
    const TrialEntry& other = trials_.at(id);
    if (&other == &trial || other.curve.values.empty()) continue;
    others.push_back(&other.curve);
    if (other.curve.completed) longest_completed = std::max(longest_completed, other.curve.values.back().step);
  }
  const bool maximize = study.spec.objective().goal() == v1::Objective::MAXIMIZE;
  const bool stop = study::ShouldStop(study.early_stopping, maximize, trial.curve, others);
  observer_->EarlyStoppingDecided(study.spec, absl::Now() - start, stop,
                                  std::max<int64_t>(0, longest_completed - step));
  if (!stop) return;

  // Stopped: the slot frees at once, and the trial counts neither as failed nor as an attempt.
  // The worker is told once the decision is stored: a crash in between cannot leave a trial
  // its worker stopped but the store still holds running. Its CANCELLED answer adds what the
  // attempt cost (HandleResult).
  const uint64_t session = trial.session;
  v1::Trial& t = trial.trial();
  study::RecordPruned(study.spec, step, value, t);
  v1::SchedulerMessage cancel = CancelMessage(t, t.error());
  ReleaseLocked(trial);
  *t.mutable_end_time() = ToTimestamp(options_.clock());
  RecordTrialEndLocked(trial);
  SendWhenStoredLocked(session, SaveTrialLocked(trial), std::move(cancel));
  PublishTrialLocked(trial);
  CheckStudyEndLocked(study);
  DispatchLocked();
}

void SchedulerCore::HandleStarted(uint64_t session, const v1::TrialAttempt& started) {
  CoreLock lock(this);
  TrialEntry* trial = AttemptOfSessionLocked(session, started.trial_id(), started.attempt(),
                                             started.epoch(), "starts");
  if (trial == nullptr) return;
  trial->live->started = true;
  if (std::optional<absl::Duration> timeout = TrialTimeout(trial->study->spec)) {
    // The worker's clock starts when a slot begins the trial; the scheduler's follows it.
    trial->live->deadline =
        options_.clock() + *timeout + options_.heartbeat_interval * options_.missed_heartbeats;
  }
}

void SchedulerCore::HandleDraining(uint64_t session, const v1::Draining& draining) {
  CoreLock lock(this);
  auto worker = workers_.find(session);
  if (worker == workers_.end() || worker->second.draining) return;
  worker->second.draining = true;
  worker->second.last_seen = options_.clock();
  // A fleet stopped at once (a rollout, a node drained) drains as it connected: in a flood.
  LogWorkersNotLoggedLocked();
  if (worker_log_.Admit("drains", options_.clock())) {
    DHPT_LOG_INFO("worker %s drains (%s): no new trials for it", worker->second.worker_id,
                  WorkerText(draining.reason(), kMaxWorkerTextBytes));
  }
}

void SchedulerCore::HandleResult(uint64_t session, const v1::TrialResult& reported) {
  CoreLock lock(this);
  auto worker_it = workers_.find(session);
  if (worker_it == workers_.end()) return;  // Closed: nothing to answer on.
  WorkerEntry& worker = worker_it->second;
  worker.last_seen = options_.clock();
  v1::SchedulerMessage ack;
  ack.mutable_ack()->set_trial_id(reported.trial_id());
  ack.mutable_ack()->set_attempt(reported.attempt());
  ack.mutable_ack()->set_epoch(reported.epoch());

  auto trial_it = trials_.find(reported.trial_id());
  if (trial_it == trials_.end()) {
    // Answered, so the worker stops resending it (a flood of these is bounded by the outbox:
    // a worker that does not read its acks is cut off).
    worker.channel->Send(std::move(ack));
    return;
  }
  TrialEntry& trial = trial_it->second;
  StudyEntry& study = *trial.study;
  // Only the worker an attempt was given to, under the epoch it was given in, may settle it:
  // a late result of an earlier attempt of the same worker counts (once); anyone else's is
  // refused, whatever it claims, and so is one meant for another scheduler's trial of this id.
  const int attempt = reported.attempt();
  v1::Trial parsed;
  if (!AttemptGivenTo(MessageLocked(trial, parsed), attempt, worker.worker_id,
                      reported.epoch())) {
    if (!worker.refused_trials.contains(reported.trial_id())) {
      DHPT_LOG_WARNING("worker %s sent a result for trial %d attempt %d (epoch %016x), which it "
                       "was not given; refused",
                       worker.worker_id, reported.trial_id(), attempt, reported.epoch());
    }
    RefuseTrialLocked(session, worker, reported.trial_id(), attempt, reported.epoch(), "results");
    return;
  }
  if (TrialTerminal(trial.state())) {
    // A duplicate or late result, counted once already: acknowledged once that is stored. The
    // stopped attempt of a pruned trial still tells what it cost, kept with the trial.
    uint64_t stored = store_->last_sequence();
    if (attempt == trial.attempt() && trial.state() == v1::Trial::PRUNED) {
      v1::Trial full = std::move(parsed);  // An ended trial: parsed for the check above.
      if (study::RecordCostOfPrunedAttempt(BoundedResult(reported, study.spec.objective().metric()),
                                    full)) {
        trial.live = std::make_unique<LiveTrial>();  // Compacted again as it is saved.
        trial.live->message = std::move(full);
        stored = SaveTrialLocked(trial);
      }
    }
    SendWhenStoredLocked(session, stored, std::move(ack));
    return;
  }
  const bool from_current_attempt = RunsOnLocked(trial, session, attempt);
  const v1::TrialResult result = BoundedResult(reported, study.spec.objective().metric());
  const bool from_superseded =
      trial.superseded_session == session && attempt == trial.superseded_attempt;
  if (from_superseded && result.state() != v1::Trial::COMPLETED) {
    // The duplicate runs on: the slow attempt's failure or hand-back ends only that attempt.
    ForgetSupersededLocked(trial, /*cancel=*/false, "");
    SendWhenStoredLocked(session, store_->last_sequence(), std::move(ack));
    DispatchLocked();
    return;
  }
  if (from_superseded) {
    // The slow attempt finished before its duplicate: it counts (below, as a late result).
    ForgetSupersededLocked(trial, /*cancel=*/false, "");
  }
  if (from_current_attempt &&
      (result.state() == v1::Trial::FAILED || result.state() == v1::Trial::CANCELLED) &&
      ResumeSupersededLocked(trial)) {
    // A duplicate handed back or failed while the attempt it superseded runs on: as a slow
    // attempt's failure leaves its duplicate running, the duplicate's leaves the slow attempt.
    SendWhenStoredLocked(session, store_->last_sequence(), std::move(ack));
    DispatchLocked();
    return;
  }
  if (result.state() == v1::Trial::CANCELLED) {
    // The worker gave the trial back (it is stopping): someone else runs it, at no cost.
    if (from_current_attempt) {
      ReleaseLocked(trial);
      RequeueLocked(trial, absl::StrCat("worker gave it back: ", result.error()), /*lost=*/false);
      CheckStudyEndLocked(study);
    }
    SendWhenStoredLocked(session, store_->last_sequence(), std::move(ack));
    DispatchLocked();
    return;
  }

  // A failure of an attempt that is no longer the trial's (its worker was lost, and the trial
  // given again): while another attempt runs, it ends only that attempt, as a slow attempt's
  // failure leaves its duplicate running. Out of memory, it still says which workers are too
  // small, and a pending trial waits for a larger one. (Accepted, such a failure ended a trial
  // that a larger board was running: a Pi that ran out of memory and missed its heartbeats
  // reported it when it came back.)
  if (!from_current_attempt && !from_superseded && result.state() == v1::Trial::FAILED) {
    const uint64_t memory = worker.capabilities.memory_bytes();
    const bool too_small = result.out_of_memory() && memory > 0;
    if (too_small) {
      trial.live->min_memory_bytes = std::max(trial.live->min_memory_bytes, memory + 1);
    }
    if (trial.state() == v1::Trial::RUNNING ||
        (too_small && LargerWorkerConnectedLocked(study, memory))) {
      SendWhenStoredLocked(session, store_->last_sequence(), std::move(ack));
      DispatchLocked();
      return;
    }
  }

  // Out of memory on this worker: not the trial's fault while a larger worker could run it.
  // It goes back to the queue for workers with more memory, its attempt charged (so
  // max_attempts bounds the retries); with no larger worker connected it fails here.
  if (result.state() == v1::Trial::FAILED && result.out_of_memory() && from_current_attempt &&
      worker.capabilities.memory_bytes() > 0 &&
      LargerWorkerConnectedLocked(study, worker.capabilities.memory_bytes())) {
    trial.live->min_memory_bytes = worker.capabilities.memory_bytes() + 1;
    ReleaseLocked(trial);
    RequeueLocked(trial,
                  absl::StrCat(result.error(), "; retried on a worker with more than ",
                               worker.capabilities.memory_bytes() >> 20, " MiB"),
                  /*lost=*/true);
    CheckStudyEndLocked(study);
    SendWhenStoredLocked(session, store_->last_sequence(), std::move(ack));
    DispatchLocked();
    return;
  }

  // Accept the result, whichever of its attempts it came from: the first result wins.
  const uint64_t running_on = trial.session;
  if (trial.state() == v1::Trial::RUNNING) ReleaseLocked(trial);
  if (trial.state() == v1::Trial::PENDING) {
    study.pending.erase(std::remove(study.pending.begin(), study.pending.end(), trial.id()),
                        study.pending.end());
    ReleaseHoldLocked(trial);
  }
  if (running_on != 0 && !(running_on == session && attempt == trial.attempt())) {
    SendLocked(running_on,
               CancelMessage(trial.trial(), "an earlier attempt of this trial already finished"));
  }
  v1::Trial& t = trial.trial();
  if (!from_current_attempt) {
    // A late result: recorded as its own attempt's, on its node, so that the speed learnt
    // from it is that attempt's.
    RecordAsAttempt(t, attempt);
    t.set_node_name(worker.capabilities.node_name());
  }
  UnchargeAttempt(t, attempt);  // Its worker was given up for lost, but its result came.
  study::RecordResult(study.spec, result, t);
  t.set_worker_id(worker.worker_id);
  *t.mutable_end_time() = ToTimestamp(options_.clock());
  if (t.state() == v1::Trial::COMPLETED && t.has_start_time()) {
    const auto [kind, units] = TrialSizeLocked(trial);
    // The speed gauges are read from the model at each scrape (scheduler_metrics.cc).
    speeds_.Record(worker.node_class, kind, units,
                   FromTimestamp(t.end_time()) - FromTimestamp(t.start_time()));
  }
  RecordTrialEndLocked(trial);
  SendWhenStoredLocked(session, SaveTrialLocked(trial), std::move(ack));
  PublishTrialLocked(trial);
  CheckStudyEndLocked(study);
  DispatchLocked();
}

int SchedulerCore::ExpireLeases() {
  CoreLock lock(this);
  const absl::Time deadline = options_.clock() - Lease();
  std::vector<uint64_t> expired;
  for (const auto& [session, worker] : workers_) {
    if (worker.last_seen < deadline) expired.push_back(session);
  }
  for (uint64_t session : expired) {
    workers_.at(session).channel->Close(absl::UnavailableError(
        "no heartbeat within the lease; reconnect to get new work"));
    DisconnectLocked(session, "missed heartbeats");
  }
  const int clients = ExpireClientLeasesLocked();
  const int unclaimed = FailUnclaimedHeldLocked();
  LogWorkersNotLoggedLocked();
  if (!expired.empty() || unclaimed > 0) DispatchLocked();  // A held trial's slot is free.
  RefuseUnstorableAnswersLocked();
  return static_cast<int>(expired.size()) + clients + unclaimed;
}

void SchedulerCore::LogWorkersNotLogged() {
  CoreLock lock(this);
  LogWorkersNotLoggedLocked(/*flush=*/true);
}

void SchedulerCore::LogWorkersNotLoggedLocked(bool flush) {
  const std::string counts =
      flush ? worker_log_.Flush() : worker_log_.Summary(options_.clock());
  if (counts.empty()) return;
  DHPT_LOG_INFO("workers: %s not logged (more than %d lines in %s); %d workers connected now",
                counts, worker_log_.lines(), absl::FormatDuration(worker_log_.interval()),
                workers_.size());
}

void SchedulerCore::RefuseUnstorableAnswersLocked() {
  if (answers_after_store_.empty()) return;
  const absl::Status health = store_->health();
  if (health.ok()) return;
  // Their leases could not be stored: the clients hear so within a sweep rather than at their
  // deadline, and not which trials (a crash could still make them other points). The leases
  // stay theirs: the same client asking once writes succeed gets its trials back.
  for (PendingAnswer& answer : answers_after_store_) {
    answer.done(absl::UnavailableError(absl::StrCat(
        "the database refuses writes, so the trials leased to you are not stored: ",
        health.message(), "; ask again with the same client_id once it accepts writes")));
  }
  answers_after_store_.clear();
}

int SchedulerCore::ExpireTrials() {
  CoreLock lock(this);
  const absl::Time now = options_.clock();
  std::vector<uint64_t> late;
  for (const auto& [session, worker] : workers_) {
    for (uint64_t id : worker.running) {
      if (trials_.at(id).live->deadline < now) late.push_back(id);
    }
  }
  for (uint64_t id : leased_) {
    if (trials_.at(id).live->deadline < now) late.push_back(id);
  }
  for (uint64_t id : late) {
    TrialEntry& trial = trials_.at(id);
    StudyEntry& study = *trial.study;
    // An earlier one of this sweep may have ended the study, cancelling this trial.
    if (trial.state() != v1::Trial::RUNNING ||
        (trial.session == 0 && trial.live->client.empty())) {
      continue;
    }
    const uint64_t session = trial.session;
    ReleaseLocked(trial);
    if (!trial.live->started) {
      // Never begun (it waited behind a trial the worker was still stopping): not its fault.
      SendLocked(session,
                 CancelMessage(trial.trial(), "not started within the study's trial_timeout"));
      RequeueLocked(trial, "its worker did not start it in time", /*lost=*/false);
      CheckStudyEndLocked(study);
      continue;
    }
    const std::string reason = absl::StrCat(
        "exceeded the study's trial_timeout of ", absl::FormatDuration(*TrialTimeout(study.spec)),
        session != 0 ? " and its worker did not stop it" : " before its client completed it");
    SendLocked(session, CancelMessage(trial.trial(), reason));
    v1::Trial& t = trial.trial();
    t.set_state(v1::Trial::FAILED);
    t.set_error(reason);
    *t.mutable_end_time() = ToTimestamp(now);
    RecordTrialEndLocked(trial);
    SaveTrialLocked(trial);
    PublishTrialLocked(trial);
    CheckStudyEndLocked(study);
  }
  // A worker that left a study's end to a faster one whose predicted finish has passed: placed
  // again now, with what is known now (LeaveToFasterLocked).
  const bool recheck = now >= endgame_recheck_;
  if (recheck) endgame_recheck_ = absl::InfiniteFuture();
  const bool woken = WakeForDuplicatesLocked();
  if (!late.empty() || recheck || woken) DispatchLocked();
  return static_cast<int>(late.size());
}

void SchedulerCore::Shutdown(absl::string_view reason) {
  CoreLock lock(this);
  shutting_down_ = true;
  v1::SchedulerMessage drain;
  drain.mutable_drain()->set_reason(std::string(reason));
  for (auto& [session, worker] : workers_) {
    worker.channel->Send(drain);
    worker.channel->Close(absl::UnavailableError(reason));
  }
  for (StudyEntry* study : study_order_) EndWatchesLocked(*study, absl::UnavailableError(reason));
  for (StudyEntry* study : study_order_) ServeSuggestWaitersLocked(*study);
}

int SchedulerCore::connected_workers() const {
  CoreLock lock(this);
  return static_cast<int>(workers_.size());
}

// ---------------------------------------------------------------------------------------------
// Records and events

WriteSequence SchedulerCore::SaveTrialLocked(TrialEntry& trial) {
  ++trial.study->changes;
  const WriteSequence sequence = trial.study->last_write = store_->PutTrial(trial.trial());
  if (TrialTerminal(trial.state())) CompactLocked(trial);
  return sequence;
}

void SchedulerCore::CompactLocked(TrialEntry& entry) {
  const v1::Trial& full = entry.live->message;
  entry.ended = {.id = full.id(),
                 .number = full.number(),
                 .objective_value = full.has_objective_value()
                                        ? std::optional<double>(full.objective_value())
                                        : std::nullopt,
                 .constraint_violation = full.constraint_violation(),
                 .attempt = full.attempt(),
                 .state = full.state(),
                 .infeasible = full.infeasible()};
  entry.finished = full.SerializeAsString();
  entry.live.reset();
  CompactCurveLocked(entry);
}

std::optional<double> SchedulerCore::TrialEntry::objective_value() const {
  if (!live) return ended.objective_value;
  return live->message.has_objective_value()
             ? std::optional<double>(live->message.objective_value())
             : std::nullopt;
}

v1::Trial SchedulerCore::TrialEntry::Summary() const {
  v1::Trial summary;
  summary.set_number(number());
  summary.set_state(state());
  if (const std::optional<double> value = objective_value()) summary.set_objective_value(*value);
  summary.set_infeasible(infeasible());
  summary.set_constraint_violation(live ? live->message.constraint_violation()
                                        : ended.constraint_violation);
  return summary;
}

void SchedulerCore::CompactCurveLocked(TrialEntry& entry) {
  // A trial ended without completing is judged no more: of its curve the rules read only a few
  // points (JudgedPoints); the store keeps the whole curve for users (TrialCurves).
  if (entry.state() == v1::Trial::COMPLETED || entry.curve.values.empty()) return;
  entry.curve = study::JudgedPoints(entry.study->early_stopping, entry.curve);
}

v1::Trial SchedulerCore::ValuesOnlyLocked(const TrialEntry& entry) const {
  // A finished trial of several objectives has its values only in its stored bytes.
  if (!entry.live && !entry.ended.objective_value && entry.ended.state == v1::Trial::COMPLETED) {
    return ValuesOnlyOf(entry.finished);
  }
  v1::Trial values = entry.Summary();
  values.clear_infeasible();
  values.clear_constraint_violation();
  if (entry.live) *values.mutable_objective_values() = entry.live->message.objective_values();
  return values;
}

v1::Trial SchedulerCore::PlotViewLocked(const TrialEntry& entry) const {
  const v1::StudySpec& spec = entry.study->spec;
  if (!entry.live) return PlotViewOf(entry.finished, entry.state(), spec);
  // Not finished: the whole message is at hand, and small.
  const v1::Trial& from = entry.trial();
  v1::Trial view;
  view.set_id(from.id());
  view.set_number(from.number());
  view.set_state(from.state());
  *view.mutable_params() = from.params();
  if (from.has_objective_value()) view.set_objective_value(from.objective_value());
  *view.mutable_objective_values() = from.objective_values();
  view.set_infeasible(from.infeasible());
  if (from.has_create_time()) *view.mutable_create_time() = from.create_time();
  if (from.has_start_time()) *view.mutable_start_time() = from.start_time();
  if (from.has_end_time()) *view.mutable_end_time() = from.end_time();
  view.set_worker_id(from.worker_id());
  view.set_client_id(from.client_id());
  *view.mutable_metrics() = from.metrics();
  KeepPlottedMetric(spec, view);
  return view;
}

v1::Trial SchedulerCore::FullTrialLocked(const TrialEntry& entry) const {
  if (entry.live) return entry.live->message;
  v1::Trial full;
  full.ParseFromString(entry.finished);  // Bytes this process wrote.
  return full;
}

const v1::Trial& SchedulerCore::MessageLocked(const TrialEntry& entry, v1::Trial& parsed) const {
  if (entry.live) return entry.live->message;
  parsed.ParseFromString(entry.finished);
  return parsed;
}

WriteSequence SchedulerCore::SaveStudyLocked(StudyEntry& study) {
  ++study.changes;
  v1::Study stored = BuildStudyLocked(study);
  // Its own reason, not what the workers connected now make it wait for: stored, that was read
  // back by a restart as the study's own and shown while workers ran it (hostile review).
  stored.set_state_reason(study.state_reason);
  return study.last_write = store_->PutStudy(std::move(stored));
}

void SchedulerCore::SendWhenStoredLocked(uint64_t session, WriteSequence sequence,
                                         v1::SchedulerMessage message) {
  if (sequence <= stored_through_) {
    SendLocked(session, std::move(message));
    return;
  }
  sends_after_store_.push_back({sequence, session, std::move(message)});
}

void SchedulerCore::OnStored(WriteSequence sequence) {
  CoreLock lock(this);
  stored_through_ = std::max(stored_through_, sequence);
  while (!sends_after_store_.empty() && sends_after_store_.front().sequence <= stored_through_) {
    PendingSend& send = sends_after_store_.front();
    SendLocked(send.session, std::move(send.message));
    sends_after_store_.pop_front();
  }
  while (!answers_after_store_.empty() &&
         answers_after_store_.front().sequence <= stored_through_) {
    PendingAnswer answer = std::move(answers_after_store_.front());
    answers_after_store_.pop_front();
    answer.done(std::move(answer.response));
  }
  DispatchLocked();  // In case it paused while the store could not write.
  // Ended studies whose last writes waited for this commit may go now, but not the one used
  // last: a study larger than the whole cache, read back for a paged reader (GetParetoFront;
  // before ListTrials read an evicted study's rows, the dashboard's ten pages of 100,000
  // trials), was evicted by the next commit (its own read back's eviction of another study is
  // one) and read back again, under the lock, for each page.
  if (ended_cache_bytes_ > options_.ended_study_cache_bytes) {
    TrimEndedCacheLocked(options_.ended_study_cache_bytes,
                         ended_cache_.empty() ? nullptr : ended_cache_.front());
  }
}

v1::Study SchedulerCore::BuildStudyLocked(const StudyEntry& study) const {
  v1::Study out = BuildSummaryLocked(study);
  *out.mutable_spec() = study.spec;
  if (!study.evicted && study.best) *out.mutable_best_trial() = FullTrialLocked(trials_.at(*study.best));
  return out;
}

v1::Study SchedulerCore::BuildSummaryLocked(const StudyEntry& study) const {
  if (study.evicted) return study.summary;  // Ended: its summary does not change.
  v1::Study out;
  out.set_state(study.state);
  out.set_state_reason(study.state_reason);
  // An ended study runs nothing more: none pending, whatever budget it had left.
  out.set_trials_pending(
      study.terminal() ? 0
                       : static_cast<int32_t>(study.pending.size()) + study.held +
                             (study.exhausted
                                  ? 0
                                  : std::max(0, study.spec.max_trials() - study.budget_used())));
  out.set_trials_running(study.running);
  out.set_trials_completed(study.completed);
  out.set_trials_failed(study.failed);
  out.set_trials_cancelled(study.cancelled);
  out.set_trials_pruned(study.pruned);
  if (study.pruned > 0 && study.best) {
    const study::TrialCurve& best = trials_.at(*study.best).curve;
    const bool maximize = study.spec.objective().goal() == v1::Objective::MAXIMIZE;
    int within_reach = 0;
    for (uint64_t id : study.trial_ids) {
      const TrialEntry& trial = trials_.at(id);
      within_reach += trial.state() == v1::Trial::PRUNED &&
                      study::WithinReachOfBest(maximize, trial.curve, best);
    }
    out.set_trials_pruned_within_reach(within_reach);
  }
  out.set_trials_added(study.added);
  if (study.spec.objectives_size() >= 2) {
    out.set_pareto_front_size(static_cast<int32_t>(study.front->trial_ids().size()));
    out.set_hypervolume(study.front->hypervolume());
    out.set_hypervolume_estimated(study.front->hypervolume_estimated());
  }
  *out.mutable_create_time() = study.create_time;
  if (study.terminal()) *out.mutable_end_time() = study.end_time;
  if (ReadsConnectedWorkers(study.terminal(), study.running, out) && study.pending.empty() &&
      !memory_status_.ok()) {
    // Budget left but no trial accepted, and each new one refused at the memory cap: no worker
    // would change that, so this comes before what the workers run.
    out.set_state_reason(absl::StrCat("waiting for memory: ", memory_status_.message()));
  } else if (ReadsConnectedWorkers(study.terminal(), study.running, out)) {
    std::vector<const v1::WorkerCapabilities*> connected;
    bool servable = false;
    for (const auto& [session, worker] : workers_) {
      connected.push_back(&worker.capabilities);
      servable = servable || CanRun(study.spec, worker.capabilities);
    }
    if (!servable) {
      out.set_state_reason(WaitingForWorker(study.spec, connected));
    } else if (std::string kinds = KindsNoWorkerRunsLocked(study); !kinds.empty()) {
      out.set_state_reason(absl::StrCat(
          "waiting for a worker that runs ", kinds, ": the study's ", out.trials_pending(),
          " pending trials are of model kinds no connected worker runs (a worker started with "
          "--models runs only those)"));
    }
  }
  // Early stopping judges intermediate values: with none from the first completed trials, it
  // will never stop one, and the user should know the rule is idle rather than wait for it.
  if (!study.terminal() && !study.progress_reported &&
      study.completed >= kCompletedTrialsBeforeIdleRuleNotice &&
      !std::holds_alternative<std::monostate>(study.early_stopping)) {
    std::string notice = absl::StrCat(
        "early stopping is idle: none of the first ", study.completed,
        " completed trials reported progress (more than one intermediate value), so none can "
        "be pruned");
    if (study.spec.model().kind() == v1::Model::COMMAND) {
      absl::StrAppend(&notice, "; the command must print its objective metric (",
                      study.spec.objective().metric(),
                      "=VALUE, with step=N) as it trains, not only at exit");
    }
    out.set_state_reason(out.state_reason().empty() ? notice
                                                    : absl::StrCat(out.state_reason(), "; ", notice));
  }
  return out;
}

void SchedulerCore::SendLocked(uint64_t session, v1::SchedulerMessage message) {
  if (auto it = workers_.find(session); it != workers_.end()) {
    it->second.channel->Send(std::move(message));
  }
}

}  // namespace dhpt::scheduler
