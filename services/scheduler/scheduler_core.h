#pragma once

// The scheduler's logic: studies, their optimisers and trial queues, connected workers and
// their leases, and the assignment of trials to workers. No gRPC here: sessions and services
// translate streams and RPCs into these calls.
//
// Threading: every public method takes the one mutex (GetStudy, GetBestTrial and ListStudies
// only when what they read is not published: published_studies.h); callbacks into WorkerChannel and StudyWatcher run
// under it and must not block or call back into the core.

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/study_service.pb.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/common/log_limiter.h"
#include "services/common/work_queue.h"
#include "services/common/worker_limits.h"
#include "services/optimizer/optimizer.h"
#include "services/study/early_stopping.h"
#include "services/scheduler/memory_limit.h"
#include "services/scheduler/published_studies.h"
#include "services/scheduler/reply_budget.h"
#include "services/scheduler/scheduler_observer.h"
#include "services/scheduler/speed_model.h"
#include "services/study/spec_validation.h"
#include "services/scheduler/study_store.h"
#include "services/scheduler/watch_journal.h"

namespace dhpt::scheduler {

// The core's handle on one worker's stream (a WorkerSession).
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Queues a message for the worker; never blocks. Dropped once the channel is closing.
  virtual void Send(v1::SchedulerMessage message) = 0;
  // Ends the stream with `status` once the queued messages are written.
  virtual void Close(const absl::Status& status) = 0;
};

// A WatchStudy stream. It reads its study's events with ReadWatch at its own pace; the core
// calls it under its lock, so it must not block or call back into the core from these.
class StudyWatcher {
 public:
  virtual ~StudyWatcher() = default;
  // Events have come since a ReadWatch found none: read again.
  virtual void OnEventsReady() = 0;
  // The watch is over before its events were read to the study's end (the study was deleted,
  // or the scheduler is going away). The core forgets the watcher before making this call.
  virtual void OnEnd(const absl::Status& status) = 0;
};

struct WatchOptions {
  // Resume after this position (StudyEvent.position); 0 starts with the study's summary now.
  uint64_t after_position = 0;
  // Only the study's summaries, no trial events.
  bool summaries_only = false;
};

// One ReadWatch: events in position order, or none and why.
struct WatchRead {
  std::vector<WatchEventPtr> events;
  // The study has ended and every event was read: end the stream.
  bool ended = false;
  // No event now: read again after this long (a summary falls due), or, when zero, once
  // OnEventsReady is called.
  absl::Duration retry_after = absl::ZeroDuration();
  // The watch's first read, resumed with nothing new: answer at once with no events, so its
  // client knows the stream is up (it reconnected) without waiting for the study to change.
  bool up_to_date = false;
};

// Summaries while a watched study's trials change: at most this often, so a progress line
// stays current without a summary per trial.
inline constexpr absl::Duration kWatchSummaryInterval = absl::Milliseconds(100);

// The default of --max_spec_bytes_total: 128 MiB of specs cost about 400 MB of memory, a tenth
// of a 4 GB board; a spec is at most --max_message_bytes (4 MiB), so at least 32 of the
// largest fit, and thousands of ordinary ones (a few KiB each).
inline constexpr int64_t kDefaultMaxSpecBytesTotal = int64_t{128} << 20;

// The default of --ended_study_cache_bytes: a few ended studies of thousands of trials, so a user
// paging through one reads the store once; small beside the 150 MB a lean scheduler aims at.
inline constexpr size_t kDefaultEndedStudyCacheBytes = size_t{16} << 20;

// The share of --max_memory_bytes past which the scheduler sheds caches and refuses new work:
// the rest is headroom for what is under way (pages being sent, suggestions, results coming
// in), so the kernel's limit is not reached.
inline constexpr double kMemoryPressureShare = 0.9;
// Once refusing, new work is taken again only under this share of the cap: a resident size at
// the line moves by a few MiB (caches trimmed, gRPC's buffers freed), and without the margin
// the scheduler took and refused work by turns at it.
inline constexpr double kMemoryResumeShare = 0.85;
// Under this share of the cap the resident size is read at most every memory_check_interval;
// past it, at every call that may grow memory: calls that add megabytes each (AddTrials,
// ImportStudy) can come faster than the interval and would overshoot the cap between reads.
inline constexpr double kMemoryRecheckShare = 0.5;

using OptimizerFactory = std::function<absl::StatusOr<std::unique_ptr<optimizer::Optimizer>>(
    const optimizer::SearchSpace&, const optimizer::OptimizerConfig&)>;

// Above 1, so that a duplicate is run only where it is predicted to finish clearly first: the
// estimates come from a window of past trials and a trial's time varies with its parameters.
inline constexpr double kDefaultDuplicateMargin = 1.5;

// Worker connects, drains and disconnects logged one line each, at most kWorkerLogLines lines
// an interval (--worker_log_interval); the rest are counted and told as one line when it ends
// (or at shutdown, LogWorkersNotLogged): a
// flood of reconnecting workers (a network flap, a crash loop, a hostile client) would
// otherwise write a line for each, thousands a second.
inline constexpr int kWorkerLogLines = 20;
inline constexpr absl::Duration kDefaultWorkerLogInterval = absl::Seconds(10);
// Earliest-finish-time placement at a study's end (LeaveToFasterLocked) applies where at most
// this many slots can run the study (an edge cluster's boards), and so with at most as many
// trials left. A bound on its cost: each free worker simulates the trials left over every
// slot, at each dispatch; a larger cluster keeps first-come at the end (and duplicates).
inline constexpr int kMaxEndgameSlots = 64;
// Of a study's latest trials, how many give the size of the trials it has yet to suggest.
inline constexpr int kEndgameSizeSample = 8;

struct SchedulerOptions {
  // How often workers must send a heartbeat; a worker silent for `missed_heartbeats` intervals
  // loses its leases.
  absl::Duration heartbeat_interval = absl::Seconds(5);
  int missed_heartbeats = 3;
  // The core's time: leases, timeouts and what a suggestion took. Called from the suggestion
  // threads too, so a test's clock must be safe to read from any thread.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Threads that run model-based optimisers, so that a slow suggestion for one study never
  // holds up the dispatch of another.
  int suggestion_threads = 1;
  OptimizerFactory optimizer_factory = optimizer::MakeOptimizer;
  // Told of trials, suggestions and workers as they happen (metrics); may be null.
  SchedulerObserver* observer = nullptr;
  // How much each watched study keeps for its watchers to read at their own pace.
  WatchJournalLimits watch_journal;
  // Studies kept at once (finished ones count until deleted); more are RESOURCE_EXHAUSTED.
  int max_studies = 10'000;
  // The specs of all studies kept, in bytes (each is held in memory, about three times over,
  // for the study's life): past it CreateStudy and ImportStudy are RESOURCE_EXHAUSTED.
  int64_t max_spec_bytes_total = kDefaultMaxSpecBytesTotal;
  // Reply pages built and not yet sent, across all callers (ReplyBudget).
  size_t max_reply_bytes_in_flight = kDefaultMaxReplyBytesInFlight;
  study::SpecLimits spec_limits;
  // This instance's epoch (Welcome.epoch); 0 draws a random one, as every start should.
  uint64_t epoch = 0;
  // How long an ask-and-tell client keeps a trial without a ReportProgress; then it goes back
  // to pending for another client, its attempt charged like a lost worker's.
  absl::Duration client_lease = absl::Minutes(30);
  // Ended studies whose trials stay in memory after they end or are read (most recently used
  // kept), in estimated bytes; past it the least recently used are evicted to their summary
  // and read back from the store when asked (ended_studies.cc). The one used last stays even
  // when it alone is larger, until another is used. Only for a store that reads_back(); a
  // store without a file keeps everything.
  size_t ended_study_cache_bytes = kDefaultEndedStudyCacheBytes;
  // The memory the scheduler may hold (--max_memory_bytes); 0: no cap. Past
  // kMemoryPressureShare of it the ended studies are shed from memory first; if that is not
  // enough, CreateStudy, ImportStudy, AddTrials, EnqueueTrial and SuggestTrials are
  // RESOURCE_EXHAUSTED and dispatch starts no new trial (those begun run on) until it is back
  // under.
  int64_t max_memory_bytes = 0;
  // How the core reads its resident bytes (memory_limit.h; a test stands a fault in), and how
  // often at most while under kMemoryRecheckShare of the cap (a read costs a few microseconds;
  // new trials come thousands a second).
  std::function<int64_t()> resident_bytes = ResidentBytes;
  absl::Duration memory_check_interval = absl::Milliseconds(100);
  // Duplicates at a study's end (--duplicate_margin, docs/deployment.md#placement-by-learnt-speed): once a
  // study has no trial left to suggest, an idle worker runs a copy of a trial a slower worker
  // holds when the slow one's predicted remaining time is more than this many times the idle
  // one's predicted time for the whole trial; the first result counts. 0 turns duplicates off.
  double duplicate_margin = kDefaultDuplicateMargin;
  // Duplicates mid-study too (--early_duplicates): a slower board's trial predicted to end
  // after the rest of its study (DuplicateOntoLocked's `early`). Off: on the edge benchmark it
  // duplicated 14 of 60 trials and made the study longer (docs/benchmarks.md).
  bool early_duplicates = false;
  // Placement by learnt speed (--speed_placement): false dispatches first-come, as before issue
  // 32, and runs no duplicates; speeds are learnt and shown either way.
  bool speed_placement = true;
  // Worker connect and disconnect lines: kWorkerLogLines an interval, the rest counted into one
  // line (--worker_log_interval). Zero logs every one.
  absl::Duration worker_log_interval = kDefaultWorkerLogInterval;
};

// Ask and tell, and warm starts.
inline constexpr int kMaxSuggestCount = 100;
inline constexpr size_t kMaxClientIdBytes = 128;
inline constexpr int kMaxAddedTrialsPerCall = 10'000;
// Added trials live in memory as long as their study: a warm start takes the most recent ones.
inline constexpr int kMaxAddedTrialsPerStudy = 20'000;
// SuggestTrials calls that may wait at once for one study's next model-based suggestion.
inline constexpr size_t kMaxSuggestWaiters = 1'000;

// What one worker may send: longer text is cut, extra metrics dropped (the objective kept).
// The longest worker id and node name (kMaxWorkerIdBytes, kMaxWorkerTextBytes) are in
// services/common/worker_limits.h.
inline constexpr size_t kMaxWorkerErrorBytes = 2048;
inline constexpr int kMaxWorkerCommands = 256;
inline constexpr int kMaxResultMetrics = 64;
inline constexpr size_t kMaxMetricNameBytes = 64;
// Distinct trials a session may name without running them (a stale worker names a few after
// a reconnect); past it the session is cut off as broken or hostile.
inline constexpr size_t kMaxUnknownTrialsPerSession = 256;
// Attempts a worker may list in its hello (running, queued, finished but unacknowledged).
inline constexpr int kMaxHeldAttempts = 4096;
// Intermediate values stored per trial attempt; later ones still count as progress.
inline constexpr int kMaxIntermediateValuesPerAttempt = 10'000;
// What a heartbeat's utilisation may claim (issue 31): a value outside is refused, with a
// warning naming the worker, and the worker's last good value is kept. 4096 cores and 64 TiB
// are far beyond any one node the scheduler serves; an interval is at most an hour.
inline constexpr double kMaxUtilisationCpuCores = 4096;
inline constexpr uint64_t kMaxUtilisationMemoryBytes = uint64_t{64} << 40;
inline constexpr int64_t kMaxUtilisationIntervalMs = 3'600'000;

// Pages of ListStudies and ListTrials (AIP-158): a page_size of 0 gets the default, larger
// ones are cut to the maximum, and a page also ends once it holds kMaxPageBytes.
inline constexpr int kDefaultStudyPageSize = 100;
inline constexpr int kMaxStudyPageSize = 1'000;
inline constexpr int kDefaultTrialPageSize = 1'000;
inline constexpr int kMaxTrialPageSize = 10'000;
inline constexpr size_t kMaxPageBytes = 32 << 20;
// A ListStudies page ends before a study that would take it past this, so that a client with
// gRPC's default receive limit (4 MiB: grpcurl's, a new user's own stub) can read every page
// when specs are large (up to --max_message_bytes each). A larger study (one accepted before
// kMaxStudyAnswerBytes) is a page of its own.
inline constexpr size_t kMaxStudyPageBytes = (size_t{4} << 20) - (64 << 10);
// The largest study answer CreateStudy and ImportStudy accept a spec for: gRPC's default
// receive limit (4 MiB), less room for a ListStudies page's token.
inline constexpr size_t kMaxStudyAnswerBytes = (size_t{4} << 20) - (1 << 10);
// ListTrials with intermediate values (an export): at most this many trials a page, as each
// may carry up to kMaxIntermediateValuesPerAttempt values per attempt.
inline constexpr int kMaxCurvePageSize = 100;

// ImportStudy: what one export may hold, beyond the request's size (--max_message_bytes).
inline constexpr int kMaxImportedAttemptsPerTrial = 1'000;
// How far ahead of this scheduler's clock an imported time may be (the exporting machine's
// clock may run ahead); later ones are refused.
inline constexpr absl::Duration kMaxImportClockSkew = absl::Hours(24);

// Where a listing of the studies is: after `after` in creation order, and only studies created
// before `before`, the first study not yet created when its first page was read. A study created
// during the listing (one deleted and created again included) is left for the next listing, so
// no listing shows a name twice, and each study that exists all through it is shown once.
struct StudyListing {
  uint64_t after = 0;
  uint64_t before = std::numeric_limits<uint64_t>::max();  // The first page's: none yet.
};

template <typename Item>
struct ListPage {
  std::vector<Item> items;
  std::string next_page_token;  // Empty on the last page.
  // The page's share of the reply budget: hold it until the reply is written.
  ReplyBudget::Lease lease;
  // ListTrials: how many trials the page went through, listed or not (a sample's are fewer).
  int64_t covered = 0;
};

// One connected worker, for metrics and status.
class SchedulerCore {
 public:
  SchedulerCore(StudyStore* store, SchedulerOptions options);
  ~SchedulerCore();
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  // Rebuilds studies, optimisers and trials from the store. Trials that were running go back
  // to pending with their attempts kept, so their workers can claim them back (Hello.running)
  // or deliver their results. Call once, before anything else.
  absl::Status Recover();

  // --- Users ---
  // Idempotent by name: an identical (normalised) spec returns the existing study. Returns
  // once the study is committed to the store (UNAVAILABLE when the store cannot write).
  absl::StatusOr<v1::Study> CreateStudy(const v1::StudySpec& spec);
  absl::StatusOr<v1::Study> GetStudy(absl::string_view name) const;
  absl::StatusOr<ListPage<v1::Study>> ListStudies(int page_size,
                                                  absl::string_view page_token) const;
  // Forgets the study and its trials, here and in the store. A study not yet ended is
  // FAILED_PRECONDITION unless `force`, which stops it first.
  absl::Status DeleteStudy(absl::string_view name, bool force);
  // Connected workers with their capabilities and running trials.
  std::vector<v1::Worker> ListWorkers() const;
  // Every learnt speed (node class, model kind), for metrics and tests.
  std::vector<SpeedModel::Estimate> SpeedEstimates() const;
  absl::StatusOr<v1::Study> StopStudy(absl::string_view name);
  // Changes the fields update_mask names (max_trials, parallel_trials, max_failed_trials,
  // trial_timeout), checked as CreateStudy checks them; reopens a COMPLETED or STOPPED study
  // that the change gives room for more trials (a FAILED one only when it failed for
  // max_failed_trials and the change raises it). Returns once the change is stored
  // (update_study.cc).
  absl::StatusOr<v1::Study> UpdateStudy(const v1::UpdateStudyRequest& request);
  // What ListTrials puts in each trial: all of it; its number, state and objective value(s)
  // (values_only); or what plots draw (plot_view, PlotViewLocked).
  enum class TrialView { kFull, kValuesOnly, kPlot };
  // One page of the study's trials in number order; `only` filters by state unless unset.
  // An ended study evicted from memory is answered from the store's rows of the page, without
  // reading it back (the same answer). The calls below read such a study back first.
  // `sample_stride` over 1 lists a sample for plots (ListTrialsRequest.sample_stride,
  // trial_sample.h), at most kMaxSampleStride.
  absl::StatusOr<ListPage<v1::Trial>> ListTrials(absl::string_view study, v1::Trial::State only,
                                                 int page_size, absl::string_view page_token,
                                                 TrialView view = TrialView::kFull,
                                                 int sample_stride = 1);
  absl::StatusOr<v1::Trial> GetBestTrial(absl::string_view study);
  // One page of the non-dominated feasible completed trials in number order, with the whole
  // front's hypervolume (one objective: the best trial, if feasible).
  absl::StatusOr<v1::GetParetoFrontResponse> GetParetoFront(absl::string_view study,
                                                            int page_size = 0,
                                                            absl::string_view page_token = "");
  // Each parameter's importance over the study's completed trials (services/analysis/
  // importance.h). The trials are copied under the lock, at most the evaluator's limit of them
  // (a seeded subsample of a larger study), and evaluated off it (param_importances.cc).
  // Without `read_back`, an ended study evicted from memory is FAILED_PRECONDITION instead
  // (the metrics' scrape: it must not read the history back).
  absl::StatusOr<v1::GetParamImportancesResponse> GetParamImportances(
      const v1::GetParamImportancesRequest& request, bool read_back = true);
  // Registers `watcher` for the study's events (read with ReadWatch); returns its id. The core
  // forgets it when ReadWatch reports the end, at Unwatch, or before calling OnEnd.
  absl::StatusOr<uint64_t> Watch(absl::string_view study, const WatchOptions& options,
                                 StudyWatcher* watcher);
  void Unwatch(uint64_t watch_id);
  // The watcher's next events after its position, up to about `max_bytes`, and moves it on.
  // NOT_FOUND for a watch the core has forgotten.
  absl::StatusOr<WatchRead> ReadWatch(uint64_t watch_id, size_t max_bytes);

  // --- Ask and tell (EXTERNAL studies) ---
  // Up to `count` trials leased to `client_id`: those it holds or held before a restart first
  // (with a `request_id`, only those an ask with that id was given: a retry of a lost answer),
  // then pending and new ones. `done` is called once, under the core's lock (it must not call
  // back into the core): at once, or when a model-based suggestion it waits for arrives, the
  // study ends or the scheduler shuts down.
  using SuggestDone = std::function<void(absl::StatusOr<v1::SuggestTrialsResponse>)>;
  void SuggestTrials(absl::string_view study, int count, absl::string_view client_id,
                     absl::string_view request_id, SuggestDone done);
  // The same, waiting for the answer (tests).
  absl::StatusOr<v1::SuggestTrialsResponse> SuggestTrials(absl::string_view study, int count,
                                                          absl::string_view client_id,
                                                          absl::string_view request_id = {});
  // Renews the client's lease of trial `number` and records an intermediate value if given.
  absl::StatusOr<v1::ReportProgressResponse> ReportClientProgress(
      const v1::ReportProgressRequest& request);
  // Settles trial `number` with the client's result; returns once it is stored. A repeat of
  // the call that settled it answers the trial again.
  absl::StatusOr<v1::Trial> CompleteTrial(const v1::CompleteTrialRequest& request);

  // --- Warm starts ---
  absl::StatusOr<v1::Trial> EnqueueTrial(const v1::EnqueueTrialRequest& request);
  absl::StatusOr<v1::AddTrialsResponse> AddTrials(const v1::AddTrialsRequest& request);

  // --- Backups (study_import.cc) ---
  // Restores an export as a new study, all or nothing, answered once it is stored: the
  // trials keep numbers, states, attempts, times and curves and get new ids; pending and
  // running ones become pending. The same study again answers it as it is; a study of that
  // name with another spec is ALREADY_EXISTS, with other trials FAILED_PRECONDITION.
  absl::StatusOr<v1::Study> ImportStudy(const v1::StudyExport& exported);
  // The stored intermediate values of `trials` (all of one study), every attempt's, in trial
  // and step order; their bytes are added to `lease` (RESOURCE_EXHAUSTED past the budget).
  absl::StatusOr<std::vector<v1::TrialCurve>> TrialCurves(const std::vector<v1::Trial>& trials,
                                                          ReplyBudget::Lease& lease);

  // --- Workers ---
  // Registers a worker's stream; answers Welcome and starts assigning. Returns the session id
  // the other worker calls name. `peer_names`: the names of the worker's verified certificate
  // (mutual TLS); when given, the worker id must be one of them. A worker id already connected
  // is taken over: the attempts `hello` lists stay with the worker, the rest go back to pending.
  absl::StatusOr<uint64_t> ConnectWorker(const v1::Hello& hello,
                                         const std::vector<std::string>& peer_names,
                                         WorkerChannel* channel);
  // The stream ended: the worker's running trials go back to pending. Unknown ids are ignored.
  void DisconnectWorker(uint64_t session, absl::string_view reason);
  // Any message after Hello. Results, progress and starts count only for the attempts given to
  // this session's worker id; anything else is refused (and answered at most once per trial).
  void HandleWorkerMessage(uint64_t session, const v1::WorkerMessage& message);
  void HandleResult(uint64_t session, const v1::TrialResult& result);
  void HandleProgress(uint64_t session, const v1::TrialProgress& progress);
  void HandleStarted(uint64_t session, const v1::TrialAttempt& started);
  void HandleDraining(uint64_t session, const v1::Draining& draining);
  // Keeps the worker's lease; a valid utilisation becomes its ListWorkers figure.
  void HandleHeartbeat(uint64_t session, const v1::Heartbeat& heartbeat = v1::Heartbeat());
  // Closes the streams of workers silent for longer than their lease, and takes back the
  // trials of clients that let theirs run out; returns how many workers and clients. Also logs
  // the worker connections not logged in an interval that has ended (kWorkerLogLines).
  int ExpireLeases();
  // Fails the running trials past their study's trial_timeout (plus a lease of grace, so the
  // worker's own timeout normally comes first); returns how many.
  int ExpireTrials();
  // Stops assigning, asks every worker to drain and ends every watch.
  void Shutdown(absl::string_view reason);
  // Logs the worker connects, drains and disconnects counted but not told yet, whether or not
  // their interval has ended: once the workers' streams have ended at shutdown (their last
  // disconnects come after Shutdown), so that no count is lost with the process.
  void LogWorkersNotLogged();

  absl::Duration heartbeat_interval() const { return options_.heartbeat_interval; }
  // How long a worker may stay silent before it loses its trials.
  absl::Duration lease() const {
    return options_.heartbeat_interval * options_.missed_heartbeats;
  }
  uint64_t epoch() const { return epoch_; }
  // How many times dispatch has tried a worker session so far: what dispatching costs, for
  // tests and benchmarks.
  uint64_t sessions_tried() const {
    CoreLock lock(this);
    return sessions_tried_;
  }
  // The store's state, for metrics and health.
  absl::Status store_health() const { return store_->health(); }
  int64_t store_bytes() const { return store_->size_bytes(); }
  int connected_workers() const;
  const ReplyBudget& reply_budget() const { return reply_budget_; }
  // The periodic tick's second trim after a burst of pages (ReplyBudget::TrimIfOwed).
  void TrimFreedReplyMemory() { reply_budget_.TrimIfOwed(); }
  // Ended studies whose trials are in memory, and the bytes estimated for them
  // (--ended_study_cache_bytes bounds these).
  struct EndedStudiesInMemory {
    int studies = 0;
    size_t bytes = 0;
  };
  EndedStudiesInMemory ended_studies_in_memory() const;
  // Evicts every ended study that nothing holds now to its summary, whatever the cache's
  // bound (a memory cap sheds this first); returns how many.
  int ShedEndedStudies();

  // Tests: runs `f` holding the core's lock (a stream thread in the middle of a dispatch), and
  // the study's summary as built under the lock, to compare with GetStudy's published one.
  void RunUnderLockForTest(absl::FunctionRef<void()> f) {
    CoreLock lock(this);
    f();
  }
  absl::StatusOr<v1::Study> GetStudyUnderLockForTest(absl::string_view name) const;
  // GetBestTrial as built under the lock (an evicted study is read back for it).
  absl::StatusOr<v1::Trial> GetBestTrialUnderLockForTest(absl::string_view name);
  // ListStudies' page as built under the lock (publishing nothing), and as read off the lock
  // now (nullopt: it would be built under the lock).
  absl::StatusOr<ListPage<v1::Study>> ListStudiesUnderLockForTest(int page_size,
                                                                  absl::string_view page_token) const;
  absl::StatusOr<std::optional<ListPage<v1::Study>>> PublishedStudyPageForTest(
      int page_size, absl::string_view page_token) const;
  // The steps of trial `number`'s curve that the core holds in memory (for early stopping).
  absl::StatusOr<std::vector<int64_t>> CurveInMemoryForTest(absl::string_view study,
                                                            int64_t number) const;
  // What GetStudy answers off the lock now, if anything.
  std::optional<v1::Study> PublishedStudyForTest(absl::string_view name) const {
    std::shared_ptr<const PublishedStudy> published = published_.Find(name);
    if (published == nullptr) return std::nullopt;
    return published->Answer();
  }

 private:
  // The core's lock, which every public method takes. Released, it first publishes the
  // summaries of the read studies that changed under it (PublishSummariesLocked), so GetStudy
  // and GetBestTrial, reading those without the lock, answers as of the last call that returned.
  class ABSL_SCOPED_LOCKABLE CoreLock {
   public:
    explicit CoreLock(const SchedulerCore* core) ABSL_EXCLUSIVE_LOCK_FUNCTION(core->mutex_)
        : core_(const_cast<SchedulerCore*>(core)) {
      core_->mutex_.Lock();
    }
    ~CoreLock() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS { Release(); }
    // For a store read in the middle of a call (FindStudyReadingBack): released as at the end.
    void Release() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      core_->PublishSummariesLocked();
      core_->mutex_.Unlock();
    }
    void Reacquire() ABSL_EXCLUSIVE_LOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      core_->mutex_.Lock();
    }
    CoreLock(const CoreLock&) = delete;
    CoreLock& operator=(const CoreLock&) = delete;

   private:
    SchedulerCore* const core_;
  };
  struct StudyEntry;
  // What only a live (pending or running) trial needs: its whole message and its current
  // attempt's bookkeeping. It goes when the trial ends (CompactLocked), which was most of what a
  // long study's finished trials held (an entry of 696 bytes then, 192 now).
  struct LiveTrial {
    v1::Trial message;
    // Pending: when it last joined the queue, for the queue-wait metric. Running: when its
    // attempt last reported progress, for its pace (SecondsPerStep).
    absl::Time queued_or_reported;
    // Intermediate values of the current attempt stored so far, and the last one's step.
    int stored_values = 0;
    // The current attempt's first report past step 0: its step, and its time from the
    // attempt's start in milliseconds (0 until one). The trial's own pace before its board can
    // have slowed, and the point its later pace is measured from (PredictedRemainingLocked).
    int32_t first_report_step = 0;
    int32_t first_report_ms = 0;
    std::optional<int64_t> last_step;
    // Whether the current attempt's worker began it (losing it is charged only then).
    bool started = false;
    // Duplicated once already: a duplicate that ended without a result (failed, handed back,
    // its worker lost) is not started again, so a trial that fails on fast boards cannot
    // bounce between them while its slow attempt runs.
    bool duplicated = false;
    absl::Time deadline = absl::InfiniteFuture();  // trial_timeout plus grace.
    // The ask-and-tell client holding it, and until when; empty when none.
    std::string client;
    absl::Time lease_end = absl::InfiniteFuture();
    // Its last allowed attempt's worker dropped its stream: pending, out of the queue, until
    // then, for the worker to come back for it (a link that blinked); failed after (HeldLocked).
    absl::Time held_until = absl::InfinitePast();
    std::string held_reason;  // Why its worker was lost, for the failure if it does not return.
    // The OOM killer ended an attempt on a worker with this much less memory: only workers
    // with at least this many memory_bytes get it (kept in memory only: after a restart any
    // worker may try it once more).
    uint64_t min_memory_bytes = 0;
  };
  // What the core reads of a trial that has ended without parsing its stored bytes: the
  // listing filters, the best-trial choice and the answers to late results.
  struct EndedTrial {
    uint64_t id = 0;
    int64_t number = 0;
    std::optional<double> objective_value;  // A single objective's; several are in the bytes.
    double constraint_violation = 0;
    int32_t attempt = 0;
    v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED;
    bool infeasible = false;
  };
  struct TrialEntry {
    // Set while the trial is live; once it has ended, `finished` holds its serialised message
    // and `ended` what is read of it without parsing.
    std::unique_ptr<LiveTrial> live = std::make_unique<LiveTrial>();
    EndedTrial ended;
    std::string finished;
    uint64_t id() const { return live ? live->message.id() : ended.id; }
    int64_t number() const { return live ? live->message.number() : ended.number; }
    v1::Trial::State state() const { return live ? live->message.state() : ended.state; }
    int32_t attempt() const { return live ? live->message.attempt() : ended.attempt; }
    std::optional<double> objective_value() const;
    bool infeasible() const { return live ? live->message.infeasible() : ended.infeasible; }
    // Its number, state, single objective and constraint violation as a message: what
    // study::IsBetterTrial compares and ValuesOnlyLocked answers.
    v1::Trial Summary() const;
    // The live message: only for a trial that has not ended.
    v1::Trial& trial() { return live->message; }
    const v1::Trial& trial() const { return live->message; }
    StudyEntry* study = nullptr;
    uint64_t session = 0;  // The session running it; 0 when none.
    // Its latest attempt's intermediate values, for early stopping (kept only when the study
    // has a rule).
    study::TrialCurve curve;
    // Its model kind, work units and steps (TrialSizeLocked, TrialStepsLocked), worked out from
    // its params at the first need and kept: they never change, placement and the end game
    // ask at every dispatch, and working them out builds a model and a map
    // (study::ModelForTrial), which at a study's end with 1,000 workers took half the
    // scheduler's CPU. size_kind -1: not yet worked out; size_steps -1: no steps.
    mutable int32_t size_kind = -1;
    mutable float size_units = 0;
    mutable float size_steps = -1;
    // The position of its latest change, for watchers resuming from an older one.
    uint64_t position = 0;
    // An earlier attempt that still runs on a slower worker while a duplicate (the current
    // attempt) runs on a faster one: the first to complete counts, the other is cancelled and
    // costs no attempt (DuplicateOntoLocked). 0 when none. Kept beside `session`, not in
    // LiveTrial: a late word from either is checked against a trial that may have ended.
    uint64_t superseded_session = 0;
    int superseded_attempt = 0;
  };
  struct WorkerEntry {
    std::string worker_id;
    v1::WorkerCapabilities capabilities;
    std::string placement_class;  // PlacementClass(capabilities)
    WorkerChannel* channel = nullptr;
    absl::flat_hash_set<uint64_t> running;
    absl::Time last_seen;
    // The last utilisation its heartbeats reported, and when (unset until one arrives).
    std::optional<v1::WorkerUtilisation> utilisation;
    absl::Time utilisation_time;
    bool utilisation_refusal_logged = false;  // One warning per stream, not one per heartbeat.
    bool draining = false;
    // Slots waiting for a study's suggestion at the study's turn (StudyEntry::turn_holder).
    int held_turns = 0;
    // Trials it named without running them, each answered with one Cancel.
    absl::flat_hash_set<uint64_t> refused_trials;
    std::string node_class;  // NodeClass(capabilities): what its speed is learnt under.
    // Trials whose earlier attempt it runs while a duplicate runs elsewhere: their slots stay
    // taken until the attempt ends or is cancelled.
    absl::flat_hash_set<uint64_t> superseded;
    int free_slots() const {
      return draining ? 0
                      : capabilities.slots() - static_cast<int>(running.size()) -
                            static_cast<int>(superseded.size()) - held_turns;
    }
  };

  // Whether `spec` may replace the study's (the UpdateStudy rules), and whether the study,
  // ended now, is to be reopened.
  absl::StatusOr<bool> CheckUpdateLocked(const StudyEntry& study, const v1::StudySpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // CreateStudy's work under the lock: the reply, and the write to wait for.
  absl::StatusOr<WriteSequence> CreateStudyLocked(v1::StudySpec spec, v1::Study& reply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether another study of this (normalised) spec fits: --max_studies, --max_spec_bytes_total,
  // and an answer of it within kMaxStudyAnswerBytes.
  absl::Status CheckRoomForStudyLocked(const v1::StudySpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The new study's entry: search space, rule, front and optimiser (no trials yet).
  absl::StatusOr<std::unique_ptr<StudyEntry>> NewStudyEntryLocked(const v1::StudySpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether the study could give a trial now to a worker that can run it.
  bool HasTrialToGive(const StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool Runnable(const StudyEntry& study, const WorkerEntry& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  enum class Assignment {
    kNone,      // Nothing it can run has a trial to give.
    kAssigned,  // A trial was started on the worker.
    kWaiting,   // It holds a study's turn until the study's suggestion comes.
  };
  // Starts one trial of the first eligible, runnable study in round-robin order on `worker`.
  Assignment AssignMatchingLocked(uint64_t session, WorkerEntry& worker,
                                  absl::FunctionRef<bool(const StudyEntry&)> eligible)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The next trial of the study for a worker with `memory_bytes` (pending ones it has enough
  // memory for first, then a new one).
  // With `speed` (the worker's OverallSpeed), a worker at least as fast as the cluster's median
  // takes the largest pending trial and a slower one the smallest (TrialWorkUnits).
  // With `worker`, a model-choice study's trials of kinds it does not run are passed over, and
  // a new one of such a kind joins the pending queue for a worker that runs it (nullopt).
  std::optional<uint64_t> TakeTrialLocked(StudyEntry& study,
                                          uint64_t memory_bytes = UINT64_MAX,
                                          std::optional<double> speed = std::nullopt,
                                          const v1::WorkerCapabilities* worker = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether the worker runs the trial's own kind (a model-choice study's trials differ).
  bool RunsTrialLocked(const TrialEntry& trial, const v1::WorkerCapabilities& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts the trial's next attempt on the worker and sends it the assignment.
  void StartOnWorkerLocked(uint64_t session, WorkerEntry& worker, TrialEntry& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A study with no trial left to suggest: the idle worker runs a duplicate of the trial a
  // slower worker would take longest to finish, if that beats it by options_.duplicate_margin.
  // `early`: instead a study that still has trials to give, and only a trial predicted to end
  // after the rest of its study (RestOfStudyLocked), which would otherwise be its tail; the
  // free worker runs the duplicate before any new trial; only with options_.early_duplicates,
  // onto a board faster than the cluster's median, and with at most kMaxEndgameSlots workers.
  bool DuplicateOntoLocked(uint64_t session, WorkerEntry& idle, bool early = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // How long the study's other trials (running, pending and not suggested yet) are predicted
  // to take the workers that can run it, were they all busy with them alone: their work in
  // seconds of the cluster's median board over the boards' summed speed. nullopt where a
  // board's speed or a running trial's time left is unknown.
  std::optional<absl::Duration> RestOfStudyLocked(const StudyEntry& study,
                                                  const TrialEntry& except, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The median size of the study's latest kEndgameSizeSample trials of `kind`: what its trials
  // not suggested yet are taken to be.
  double RecentMedianUnitsLocked(const StudyEntry& study, v1::Model::Kind kind) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Earliest finish time at a study's end, as HEFT places tasks: with at most as many trials
  // left as slots that can run them (at most kMaxEndgameSlots), the remaining trials are placed
  // in a simulation, largest first, each on the slot predicted to finish it first, counting
  // what each busy slot has left of its current trial. The free worker takes a trial (and the
  // study suggests one for it) only if the simulation gives it one; true: leave them to faster
  // workers. False when its speed is neither learnt nor has a prior, or speed placement is off.
  bool LeaveToFasterLocked(const StudyEntry& study, uint64_t session, const WorkerEntry& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // LeaveToFasterLocked's three steps: the trials left, the slots, and the simulation.
  struct EndgameTrial {
    v1::Model::Kind kind;
    double units;
    uint64_t min_memory_bytes;  // It ran out of memory on a smaller worker.
  };
  struct EndgameSlot {
    absl::Duration free_in;  // When it is predicted free, from now.
    const std::string* node_class;
    uint64_t memory_bytes;
    bool mine;  // The free slot of the worker asking.
  };
  // The study's trials left, largest first, when it is at its end: no more than the slots
  // that can run them, and at most kMaxEndgameSlots; empty when it is not. Pending trials
  // have their own sizes; those not suggested yet the median of the study's latest.
  std::vector<EndgameTrial> TrialsLeftAtEndLocked(const StudyEntry& study) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Every slot that can run the study, the asking worker's free slot first (a tie is its to
  // take). Busy slots whose trial overran its prediction without progress are left out:
  // nothing predicts when they are free.
  std::vector<EndgameSlot> EndgameSlotsLocked(const StudyEntry& study, uint64_t session,
                                              const WorkerEntry& worker, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The greedy list schedule: each trial, largest first, to the slot predicted to finish it
  // first. nullopt when it gives the asking slot a trial (or cannot predict that slot, or
  // places a trial nowhere); else the soonest a slot it counted on should be free, when the
  // study is looked at again.
  std::optional<absl::Duration> LeftToOthersUntil(const std::vector<EndgameTrial>& trials,
                                                  std::vector<EndgameSlot> slots) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The predicted time left of a trial running on a worker of `node_class`: projected from its
  // progress where it reports steps, else its prediction less the time it has run; nullopt
  // when its class's speed is not learnt or it overran its prediction without progress
  // (nothing says how much longer it needs).
  std::optional<absl::Duration> PredictedRemainingLocked(const TrialEntry& trial,
                                                         const std::string& node_class,
                                                         absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A running trial's seconds per step from its progress (dispatch.cc says how); nullopt
  // without a report past step 0 or once its last step is reached.
  std::optional<double> SecondsPerStep(const TrialEntry& trial, double steps,
                                       absl::Time now) const;
  // A running trial of a study at its end reported progress, which may show it a straggler:
  // the idle (set-aside) workers that can run it are offered a duplicate again.
  void ReconsiderDuplicatesLocked(const TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The periodic sweep's part of that: a trial whose board froze or whose link went slow sends
  // no report that would offer its duplicate. Idle workers that can run a study at its end
  // (at most kMaxEndgameSlots a sweep) are put back in line for a dispatch; true if any were.
  bool WakeForDuplicatesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the trial's superseded attempt's hold on its worker's slot; `cancel` tells the worker
  // to stop it (`reason`).
  void ForgetSupersededLocked(TrialEntry& trial, bool cancel, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The trial's current attempt is a duplicate that ended without a result (its worker lost,
  // the trial handed back, a failure) while the attempt it superseded still runs: that attempt
  // is the trial's again, as if there had been no duplicate (no requeue, no lost attempt, the
  // duplicate's attempt number taken back). False, changing nothing, when there is none.
  bool ResumeSupersededLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The trial's kind and size in work units (speed_model.h), as its worker runs it.
  std::pair<v1::Model::Kind, double> TrialSizeLocked(const TrialEntry& trial) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The steps its current attempt reports progress in up to its end (TrialSteps).
  std::optional<double> TrialStepsLocked(const TrialEntry& trial) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether a connected worker that can run the study has more than `memory_bytes`.
  bool LargerWorkerConnectedLocked(const StudyEntry& study, uint64_t memory_bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Creates the trial for a suggestion, or marks the study exhausted; returns the trial's id.
  std::optional<uint64_t> AcceptSuggestionLocked(
      StudyEntry& study, absl::StatusOr<std::optional<optimizer::Point>> suggestion)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Asks the suggestion threads for the study's next point; the trial joins the study's
  // pending queue when it arrives.
  void RequestSuggestionLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  Assignment AssignOneLocked(uint64_t session, WorkerEntry& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts a new attempt of a pending trial for a worker (`worker_id`) or a client
  // (`client_id`): its state, attempt record and the study's counts.
  void BeginAttemptLocked(TrialEntry& entry, const std::string& worker_id,
                          const std::string& client_id, absl::string_view device_label)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Creates trial number created() of the study at `point`, pending unless `origin` is ADDED.
  TrialEntry& CreateTrialLocked(StudyEntry& study, optimizer::Point point,
                                v1::Trial::Origin origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ask and tell: the study, if it is one clients evaluate; the trial by number.
  absl::StatusOr<StudyEntry*> FindExternalStudyLocked(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::StatusOr<TrialEntry*> FindTrialLocked(StudyEntry& study, int64_t number)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void LeaseLocked(TrialEntry& trial, const std::string& client_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A pending trial whose current attempt was the client's (a lease a restart ended) goes back
  // to it under the same attempt; false if the study's cap forbids it now. With a
  // `request_id`, only if that attempt was given to an ask with this id.
  bool ReclaimForClientLocked(TrialEntry& trial, const std::string& client_id,
                              absl::string_view request_id = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Records an ask-and-tell client's result on a trial that has not ended; returns its write.
  WriteSequence SettleClientTrialLocked(TrialEntry& trial, const v1::TrialResult& result,
                                        const std::string& client_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  int ExpireClientLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // SuggestTrials answers waiting for a commit that fails: answered UNAVAILABLE (each sweep).
  void RefuseUnstorableAnswersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Warm starts: results checked against a study's space, then added to it (a point it has
  // already is skipped).
  using CheckedTrials = std::vector<std::pair<optimizer::Point, v1::TrialResult>>;
  void AddCheckedLocked(StudyEntry& study, CheckedTrials checked, v1::AddTrialsResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The completed trials of spec.warm_start_study(), checked against `space`.
  absl::StatusOr<CheckedTrials> WarmStartLocked(const v1::StudySpec& spec,
                                                const optimizer::SearchSpace& space)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  struct SuggestWaiter;
  // Gives the study's waiting SuggestTrials calls their trials, in order, and answers each
  // that needs no further suggestion.
  void ServeSuggestWaitersLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void FinishSuggestWaiterLocked(const StudyEntry& study, SuggestWaiter& waiter)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A session whose free slots may have grown: dispatch tries it next time.
  void MaybeFreeLocked(uint64_t session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A session the last dispatch gave nothing: set aside with its placement class.
  void SetAsideLocked(uint64_t session, const WorkerEntry& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void LeaveSetAsideLocked(uint64_t session, const WorkerEntry& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Back to `maybe_free_`: every set-aside class that some study could give a trial now.
  void WakeSetAsideLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Back to pending; `lost` charges the attempt when the worker had started it. A trial whose
  // losses reach max_attempts fails, or, with `hold_until` ahead, waits out of the queue until
  // then for its worker to come back for it (its stream dropped; the lease is not over).
  void RequeueLocked(TrialEntry& trial, absl::string_view reason, bool lost,
                     absl::Time hold_until = absl::InfinitePast())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The worker of `session` claims `attempt` of a trial it reconnected with; true if it keeps it.
  bool ReclaimLocked(uint64_t session, WorkerEntry& worker, const v1::TrialAttempt& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The trial's current attempt runs on `session` (its result, progress and start count).
  bool RunsOnLocked(const TrialEntry& trial, uint64_t session, int attempt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The trial whose current attempt `attempt` (assigned under `epoch`) runs on `session` (the
  // worker is heard from); null, with the message refused as `what`, when there is none.
  TrialEntry* AttemptOfSessionLocked(uint64_t session, uint64_t trial_id, int attempt,
                                     uint64_t epoch, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Stores an intermediate value of the trial's current attempt (a worker's progress, a
  // client's ReportProgress) when it is one the rules judge, and judges it.
  void RecordProgressLocked(TrialEntry& trial, int64_t step, double value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Records a progress report on the trial's curve and stops the trial if the study's rule says
  // so (PRUNED: cancelled on its worker, not failed, no attempt charged).
  void ConsiderStoppingLocked(TrialEntry& trial, int64_t step, double value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Sends `message` once the store has committed write `sequence` (a ResultAck must not
  // outrun the result it acknowledges); dropped if the session is gone by then.
  void SendWhenStoredLocked(uint64_t session, WriteSequence sequence,
                            v1::SchedulerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The store's commit listener.
  void OnStored(WriteSequence sequence);
  // Answers a message about a trial this session does not run: one Cancel per trial, and the
  // session is cut off once it names too many.
  void RefuseTrialLocked(uint64_t session, WorkerEntry& worker, uint64_t trial_id, int attempt,
                         uint64_t epoch, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ReleaseLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // `may_return`: the stream dropped and the worker's lease is not over, so a trial on its last
  // allowed attempt is held for it (RequeueLocked); not after missed heartbeats or abuse.
  void DisconnectLocked(uint64_t session, absl::string_view reason, bool may_return = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // How long a worker is its trials' holder without a heartbeat.
  absl::Duration Lease() const { return options_.heartbeat_interval * options_.missed_heartbeats; }
  // Pending, out of the queue, until `until` (RequeueLocked's hold); `reason` for its failure.
  void HoldLocked(TrialEntry& trial, absl::Time until, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A held trial is the worker's again, or ends: out of held_.
  void ReleaseHoldLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Fails a trial whose losses reached max_attempts ("gave up after losing N ...; last: reason").
  void GiveUpLocked(TrialEntry& trial, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Fails the held trials whose worker did not come back in time; how many.
  int FailUnclaimedHeldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The line of the worker connects and disconnects not logged in an interval that has ended,
  // if any (before the line of a new one, and at the periodic sweep).
  // `flush`: also the counts of an interval that has not ended (at shutdown).
  void LogWorkersNotLoggedLocked(bool flush = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CheckStudyEndLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // An ended study leaves dispatch's walk.
  void ForgetDispatchableLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EndStudyLocked(StudyEntry& study, v1::Study::State state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RecordTrialEndLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Queues the trial's write; a finished trial is then compacted.
  WriteSequence SaveTrialLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CompactLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A pruned, failed or cancelled trial's curve cut to the points early stopping reads of it.
  void CompactCurveLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The whole trial, compacted or not.
  v1::Trial FullTrialLocked(const TrialEntry& trial) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The trial's whole message without a copy when it is live, else parsed into `parsed`.
  const v1::Trial& MessageLocked(const TrialEntry& trial, v1::Trial& parsed) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListTrials' values_only form of a trial.
  v1::Trial ValuesOnlyLocked(const TrialEntry& trial) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListTrials' plot_view form of a trial: a finished one's stored bytes filtered to the
  // fields plots draw, not parsed whole.
  v1::Trial PlotViewLocked(const TrialEntry& trial) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  WriteSequence SaveStudyLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  v1::Study BuildStudyLocked(const StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The same without the spec and, unless evicted, the best trial.
  v1::Study BuildSummaryLocked(const StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Published summaries (published_studies.h). A study is published once GetStudy or
  // GetBestTrial has read it under the lock (TrackSummaryLocked); from then on every change of it (PublishTrialLocked,
  // PublishStudyLocked) marks it, and the lock's release publishes the marked ones. Studies
  // nobody reads cost nothing.
  void TrackSummaryLocked(StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void MarkSummaryChangedLocked(StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void PublishSummariesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListStudies' page under the lock; with `track`, its studies and the order are published
  // from then on.
  absl::StatusOr<ListPage<v1::Study>> StudyPageLocked(int size, StudyListing listing,
                                                      bool track) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListStudies' page from the published order and summaries, without the core's lock (it
  // equals the one built under the lock); nullopt when one of them is not published or the page
  // must be cut to the reply budget: then it is built under the lock.
  absl::StatusOr<std::optional<ListPage<v1::Study>>> PublishedStudyPage(
      int size, StudyListing listing) const;
  // Null when the summary reads the connected workers or the memory cap (a study waiting for a
  // worker says what is connected): those change without the study, so GetStudy builds it
  // under the lock.
  std::shared_ptr<const PublishedStudy> PublishedLocked(StudyEntry& study)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // "RANDOM_FOREST" (or "A or B") when every pending trial of a model-choice study is of a kind
  // no connected worker runs; "" otherwise.
  std::string KindsNoWorkerRunsLocked(const StudyEntry& study) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Watch fan-out (watch.cc). A change of the trial (or the study's summary) takes the next
  // position; when the study is watched, its event is built and serialised once into the
  // study's journal, and the watchers waiting for events are told.
  void PublishTrialLocked(TrialEntry& trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // A study that waits for a worker says what is connected ("connected: 2 CPU workers; 0 of
  // them labelled board=pi4"): its watchers get a fresh summary when workers come and go.
  void PublishWaitingStudiesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void PublishStudyLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void AppendWatchEventLocked(StudyEntry& study, const v1::StudyEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  struct WatchState;
  // A watcher whose position the journal no longer covers: the trials changed since, once
  // each in their latest state and oldest change first, then the study's summary.
  void ResyncWatchLocked(StudyEntry& study, WatchState& watch, size_t max_bytes,
                         std::vector<WatchEventPtr>& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The study's summary now, published (a fresh position) for a watcher starting or catching up.
  WatchEventPtr SummaryEventLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ForgetWatchLocked(uint64_t watch_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ends the study's watches that have not read to its end (it is deleted).
  void EndWatchesLocked(StudyEntry& study, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void SendLocked(uint64_t session, v1::SchedulerMessage message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The study with its trials in memory: an evicted one is read back from the store first
  // (UNAVAILABLE when it cannot be), and an ended one becomes the most recently used.
  absl::StatusOr<const StudyEntry*> FindStudyLocked(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The study as it is, evicted or not: for what its summary answers (GetStudy, StopStudy,
  // DeleteStudy).
  absl::StatusOr<const StudyEntry*> FindSummaryLocked(absl::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Recovery and reading back: a stored trial joins its study (number order), and the stored
  // intermediate values of its trials' latest attempts become their curves.
  absl::Status RestoreTrialLocked(StudyEntry& study, const v1::Trial& stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void RestoreCurvesLocked(StudyEntry& study, const std::vector<StoredIntermediateValue>& values)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Ended studies in memory (ended_studies.cc). An ended study joins the cache; past
  // options_.ended_study_cache_bytes the least recently used that nothing holds (a watch, a
  // suggestion, an uncommitted write) are evicted: their trials leave memory and their summary
  // stays. LoadEvictedLocked reads one back.
  absl::Status LoadEvictedLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // What reading a study back takes from the store: its trials (or why they cannot be read)
  // and, with `with_curves`, their intermediate values. Store calls only: no lock needed.
  struct StoredStudy {
    absl::StatusOr<std::vector<v1::Trial>> trials;
    std::vector<StoredIntermediateValue> values;
  };
  StoredStudy ReadStoredStudy(const std::string& name, bool with_curves) const;
  // Puts what was read back into the evicted study (UNAVAILABLE if it could not be read).
  absl::Status RestoreReadLocked(StudyEntry& study, StoredStudy read)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // FindStudyLocked for the calls that need an ended study's trials, called first under their
  // `lock`: an evicted study is read from the store with `lock` released, so that dispatch,
  // results and other calls do not wait behind the read, and put back once it is taken again
  // unless it changed meanwhile (read back by another call, deleted, or evicted again:
  // StudyEntry::eviction); in that rare case FindStudyLocked reads it under the lock. Nothing
  // read under `lock` before this call holds after it.
  absl::StatusOr<const StudyEntry*> FindStudyReadingBack(absl::string_view name, CoreLock& lock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // ListTrials of an evicted study, from the store's rows of the page (read and built with
  // `lock` released, a chunk at a time), each trial's view built from its stored bytes as for a
  // study in memory; nullopt when the study changed meanwhile (read back, reopened, deleted), and
  // the caller goes on as for a study in memory.
  absl::StatusOr<std::optional<ListPage<v1::Trial>>> ListStoredTrialsLocked(
      absl::string_view name, v1::Trial::State only, int size, absl::string_view page_token,
      TrialView view, int sample_stride, CoreLock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `name` is still the evicted study `eviction` numbered: its stored rows have not
  // changed since (nothing writes an ended study that is not in memory).
  const StudyEntry* StillEvictedLocked(const std::string& name, uint64_t eviction) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // What GetParamImportances evaluates: the study's spec, the records of the trials it reads
  // (a seeded subsample past the evaluator's limit) and their numbers, and how many counted.
  struct ImportanceInput {
    v1::StudySpec spec;
    std::vector<optimizer::TrialRecord> records;
    std::vector<int64_t> numbers;
    int considered = 0;
  };
  // The same of an evicted study, from the store's rows (read with `lock` released); nullopt
  // when the study changed meanwhile (param_importances.cc).
  absl::StatusOr<std::optional<ImportanceInput>> StoredImportanceInputLocked(
      const std::string& name, absl::FunctionRef<bool(optimizer::TrialStatus)> eligible,
      int limit, uint64_t seed, CoreLock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The kept answer of ended study `name` to `asked` (a GetParamImportancesRequest without the
  // study's name, serialised) if it still answers it: the study has not changed since; nullptr
  // otherwise (param_importances.cc).
  const v1::GetParamImportancesResponse* KeptImportancesLocked(const StudyEntry& study,
                                                               const std::string& asked) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Keeps `response`, computed from the study created `order`-th as of its `changes`, if that
  // is still the study, unchanged and ended.
  void KeepImportancesLocked(const std::string& name, uint64_t order, uint64_t changes,
                             std::string asked, const v1::GetParamImportancesResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CacheEndedLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void ForgetCachedLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Evicts from the least recently used end until the cache holds at most `bound` bytes or
  // nothing more can go; `keep` stays.
  void TrimEndedCacheLocked(size_t bound, const StudyEntry* keep = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool EvictableLocked(const StudyEntry& study) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EvictLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // OK while the scheduler is under its memory cap (options_.max_memory_bytes), after
  // shedding the ended studies if it was not; RESOURCE_EXHAUSTED, saying what to do, if it
  // is still over. Read at most every options_.memory_check_interval while under
  // kMemoryRecheckShare of the cap, at every call past it.
  absl::Status CheckMemoryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Its trials leave memory (an eviction, or a read back that failed half way).
  void DropTrialsLocked(StudyEntry& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  StudyStore* const store_;
  const SchedulerOptions options_;
  SchedulerObserver* const observer_;
  const uint64_t epoch_;

  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::unique_ptr<StudyEntry>> studies_ ABSL_GUARDED_BY(mutex_);
  // Studies in creation order (ListStudies' pages).
  std::vector<StudyEntry*> study_order_ ABSL_GUARDED_BY(mutex_);
  // What dispatch walks, so that its cost does not grow with history: the studies not ended,
  // round-robin from `next_dispatchable_` for fairness, and the sessions that may have a free
  // slot (every session whose free slots grew is added; full or gone ones leave as met).
  std::vector<StudyEntry*> dispatchable_ ABSL_GUARDED_BY(mutex_);
  size_t next_dispatchable_ ABSL_GUARDED_BY(mutex_) = 0;
  std::set<uint64_t> maybe_free_ ABSL_GUARDED_BY(mutex_);
  // Each node class's speed per model kind, learnt from completed trials (not stored).
  SpeedModel speeds_ ABSL_GUARDED_BY(mutex_);
  // Sessions with a free slot that a dispatch could give nothing, by placement class. A
  // dispatch wakes a class only when some study could give its workers a trial, so idle
  // workers that no active study can use (CPU workers while only GPU studies run, a whole
  // cluster once its studies end) cost a dispatch one check per class, not one per worker.
  struct SetAsideClass {
    v1::WorkerCapabilities capabilities;  // One member's, for CanRun.
    std::set<uint64_t> sessions;
  };
  absl::flat_hash_map<std::string, SetAsideClass> set_aside_ ABSL_GUARDED_BY(mutex_);
  // When a worker left a study's end to faster ones, the earliest time one of those is predicted
  // free: if it has not freed by then (it overran), the periodic sweep dispatches again
  // (ExpireTrials), so that a slow worker does not wait on a prediction that failed.
  absl::Time endgame_recheck_ ABSL_GUARDED_BY(mutex_) = absl::InfiniteFuture();
  // Sessions dispatch has tried (a cost counter, for tests and benchmarks).
  uint64_t sessions_tried_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t next_study_order_ ABSL_GUARDED_BY(mutex_) = 1;
  // The bytes of the kept studies' specs (--max_spec_bytes_total).
  int64_t spec_bytes_total_ ABSL_GUARDED_BY(mutex_) = 0;
  // Tracked studies changed since the lock was taken: published as it is released.
  mutable std::vector<StudyEntry*> summaries_changed_ ABSL_GUARDED_BY(mutex_);
  // ListStudies reads the studies' order off the lock once a user has listed them: from then on
  // a study created, imported or deleted publishes the order as the lock is released.
  mutable bool study_order_tracked_ ABSL_GUARDED_BY(mutex_) = false;
  mutable bool study_order_changed_ ABSL_GUARDED_BY(mutex_) = false;
  PublishedStudies published_;  // Its own lock; GetStudy reads it without mutex_.
  mutable ReplyBudget reply_budget_;  // Its own lock; taken under mutex_ by the page builders.
  // Ended studies whose trials are in memory, most recently used first, and their estimated
  // bytes (ended_studies.cc).
  std::list<StudyEntry*> ended_cache_ ABSL_GUARDED_BY(mutex_);
  size_t ended_cache_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  size_t evicted_bytes_ ABSL_GUARDED_BY(mutex_) = 0;  // Since memory last went back.
  uint64_t evictions_ ABSL_GUARDED_BY(mutex_) = 0;  // Numbers each eviction (FindStudyReadingBack).
  // The memory cap's last check: when, and what it said.
  absl::Time memory_checked_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  absl::Status memory_status_ ABSL_GUARDED_BY(mutex_);
  int64_t memory_used_ ABSL_GUARDED_BY(mutex_) = 0;  // The last reading.
  // An evicted study's trials are being read back: their ends are not new (no metrics).
  bool reading_back_ ABSL_GUARDED_BY(mutex_) = false;
  // Deleted while a suggestion for them was being computed: freed when it returns.
  std::vector<std::unique_ptr<StudyEntry>> deleted_studies_ ABSL_GUARDED_BY(mutex_);
  absl::node_hash_map<uint64_t, TrialEntry> trials_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_trial_id_ ABSL_GUARDED_BY(mutex_) = 1;
  std::map<uint64_t, WorkerEntry> workers_ ABSL_GUARDED_BY(mutex_);
  // Connected workers per node class (WorkerEntry::node_class): a class's prior goes with its
  // last worker, without a walk over every worker at each disconnect.
  absl::flat_hash_map<std::string, int> workers_per_class_ ABSL_GUARDED_BY(mutex_);
  LogLimiter worker_log_ ABSL_GUARDED_BY(mutex_);
  // Trials leased to ask-and-tell clients, for the lease sweep.
  absl::flat_hash_set<uint64_t> leased_ ABSL_GUARDED_BY(mutex_);
  // Trials held for their lost worker's return (LiveTrial::held_until), for the same sweep.
  absl::flat_hash_set<uint64_t> held_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_session_ ABSL_GUARDED_BY(mutex_) = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<WatchState>> watchers_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_watch_ ABSL_GUARDED_BY(mutex_) = 1;
  // The next change's position: one sequence for every study, started at the wall clock's
  // microseconds so that positions keep growing across restarts (a watcher resuming with a
  // position of an earlier run gets every trial again, in its latest state).
  uint64_t next_position_ ABSL_GUARDED_BY(mutex_);
  bool shutting_down_ ABSL_GUARDED_BY(mutex_) = false;
  struct PendingSend {
    WriteSequence sequence;
    uint64_t session;
    v1::SchedulerMessage message;
  };
  std::deque<PendingSend> sends_after_store_ ABSL_GUARDED_BY(mutex_);
  // SuggestTrials answers, given once the leases they name are stored: a client is never
  // told of a trial that a crash could then make another point under the same number.
  struct PendingAnswer {
    WriteSequence sequence;
    SuggestDone done;
    v1::SuggestTrialsResponse response;
  };
  std::deque<PendingAnswer> answers_after_store_ ABSL_GUARDED_BY(mutex_);
  WriteSequence stored_through_ ABSL_GUARDED_BY(mutex_) = 0;
  // Declared last: destroyed first, so no suggestion job outlives the state it touches.
  std::unique_ptr<WorkQueue> suggestions_;
};

}  // namespace dhpt::scheduler
