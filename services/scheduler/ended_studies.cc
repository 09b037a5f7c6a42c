// Ended studies in memory: a study that has ended keeps its trials in memory while it is among
// the most recently used (a cache bounded in bytes, SchedulerOptions::ended_study_cache_bytes);
// past the bound it is evicted to its summary. ListTrials pages (so exports and the dashboard)
// and importances are answered from the store's rows, a page at a time, each trial's view built
// from its stored bytes as for a study in memory (issue 31: reading a 100,000-trial study back
// cost a second of CPU); any other call that needs its trials (GetParetoFront, GetBestTrial
// when no summary answers it, warm starts, extend) reads them back from the store first. The
// SQLite store holds every trial durably, so the scheduler's memory follows the work in
// progress, not the history. Reading back rebuilds the study exactly as a restart does
// (RestoreTrialLocked), so every answer is the same before and after eviction.
// Near the memory cap (--max_memory_bytes) this cache is shed first, then new work refused.

#include <malloc.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "services/common/logging.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_core_internal.h"
#include "services/scheduler/trial_sample.h"
#include "services/scheduler/trial_views.h"
#include "services/study/spec_translation.h"

namespace dhpt::scheduler {
namespace {

// What one finished trial holds beyond its bytes: its entry in the trial map's node (200), its
// history record (88) and point (80), its key and its slots (100), as heaptrack measured them
// (docs/benchmarks.md, "the compact form"; an estimate: the cache's bound is a budget, not an
// accounting).
constexpr size_t kTrialOverheadBytes = 470;

// A page of one state is read from the store at least this many rows at a time (a rare state
// would otherwise take a query per few trials).
constexpr int kStoredRowsAtLeast = 1'000;

// Evictions free many small blocks that malloc keeps for reuse: once this much has gone, the
// free pages go back to the system, so the scheduler's size falls with its cache.
constexpr size_t kReleaseMemoryAfterBytes = size_t{8} << 20;

// One page of an evicted study's ListTrials, built from its stored rows with no lock held.
struct StoredPageRead {
  const StudyStore* store;
  v1::StudySpec spec;
  v1::Trial::State only;
  int size;
  size_t max_bytes = 0;  // What the reply budget had left when the page was begun.
  SchedulerCore::TrialView view;
  std::string filter;
  TrialSample sample;
  uint64_t start;
};

// How often a stored page is built again because other pages took the reply budget meanwhile.
constexpr int kStoredPageBuilds = 3;

// A read of more rows than the largest page and the one after holds too much at once: a sparse
// sample's page takes several.
constexpr int kStoredRowsAtMost = kMaxTrialPageSize + 1;

// A page built off the lock, and its size, which it takes of the reply budget once built.
struct StoredPage {
  ListPage<v1::Trial> page;
  size_t bytes = 0;
};

absl::StatusOr<StoredPage> ReadStoredPage(const StoredPageRead& read) {
  using View = SchedulerCore::TrialView;
  const std::string& key = read.spec.name();
  TrialSample sample = read.sample;  // From where the page starts, each time it is built.
  StoredPage built;
  // A position past any trial number (a token a client made): an empty page, as in memory.
  if (read.start > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return built;
  ListPage<v1::Trial>& page = built.page;
  size_t& bytes = built.bytes;
  uint64_t number = read.start;
  while (true) {
    // The page's rows and one more, which says whether a next page starts there; a page of
    // one state or of a sample may need several such reads.
    const int64_t left = read.size - static_cast<int64_t>(page.items.size());
    const int wanted = static_cast<int>(std::clamp<int64_t>(
        left * sample.stride() + 1, kStoredRowsAtLeast, kStoredRowsAtMost));
    absl::StatusOr<std::vector<std::string>> rows =
        read.store->ReadTrialPage(key, static_cast<int64_t>(number), wanted);
    if (!rows.ok()) {
      return absl::UnavailableError(absl::StrCat("study \"", key, "\" has ended and its trials ",
                                                 "are in the store, which cannot read them now (",
                                                 rows.status().message(), "); try again"));
    }
    for (const std::string& row : *rows) {
      if (static_cast<int>(page.items.size()) >= read.size) {
        page.next_page_token = TrialPageToken(read.filter, sample, number);
        return built;
      }
      // Number, state and value: what says whether the trial is listed, without parsing it.
      const v1::Trial head = ValuesOnlyOf(row);
      if (head.number() != static_cast<int64_t>(number)) {
        return absl::DataLossError(absl::StrCat("a stored trial of study \"", key, "\" has number ",
                                                head.number(), ", expected ", number,
                                                "; restore a backup"));
      }
      const TrialSample before = sample;  // Where the next page starts if this trial does not fit.
      const bool listed =
          (read.only == v1::Trial::STATE_UNSPECIFIED || head.state() == read.only) &&
          sample.Keep(head);
      if (listed) {
        v1::Trial trial;
        switch (read.view) {
          case View::kValuesOnly: trial = head; break;
          case View::kPlot: trial = PlotViewOf(row, head.state(), read.spec); break;
          case View::kFull: trial.ParseFromString(row); break;
        }
        // The page stays within what the budget had (TakeIfFits takes it whole or not at all);
        // only a first trial may be larger.
        const size_t trial_bytes = trial.ByteSizeLong();
        if (!page.items.empty() && bytes + trial_bytes > read.max_bytes) {
          page.next_page_token = TrialPageToken(read.filter, before, number);
          return built;
        }
        bytes += trial_bytes;
        page.items.push_back(std::move(trial));
      }
      ++number;
      ++page.covered;
    }
    if (static_cast<int>(rows->size()) < wanted) break;  // The study's last trial.
  }
  return built;
}

}  // namespace

SchedulerCore::EndedStudiesInMemory SchedulerCore::ended_studies_in_memory() const {
  CoreLock lock(this);
  return {static_cast<int>(ended_cache_.size()), ended_cache_bytes_};
}

int SchedulerCore::ShedEndedStudies() {
  CoreLock lock(this);
  const size_t before = ended_cache_.size();
  TrimEndedCacheLocked(0);
  return static_cast<int>(before - ended_cache_.size());
}

absl::StatusOr<const SchedulerCore::StudyEntry*> SchedulerCore::FindStudyLocked(
    absl::string_view name) {
  ASSIGN_OR_RETURN(const StudyEntry* found, FindSummaryLocked(name));
  StudyEntry& study = *const_cast<StudyEntry*>(found);
  if (study.evicted) {
    RETURN_IF_ERROR(LoadEvictedLocked(study));
  } else if (study.cached) {
    ended_cache_.splice(ended_cache_.begin(), ended_cache_, *study.cached);  // Most recent.
  }
  return &study;
}

SchedulerCore::StoredStudy SchedulerCore::ReadStoredStudy(const std::string& name,
                                                          bool with_curves) const {
  StoredStudy read;
  read.trials = store_->ReadStudyTrials(name);
  if (read.trials.ok() && with_curves) {
    std::vector<uint64_t> ids;
    for (const v1::Trial& trial : *read.trials) ids.push_back(trial.id());
    absl::StatusOr<std::vector<StoredIntermediateValue>> values =
        store_->ReadIntermediateValues(ids);
    if (!values.ok()) read.trials = values.status();
    else read.values = *std::move(values);
  }
  return read;
}

absl::StatusOr<const SchedulerCore::StudyEntry*> SchedulerCore::FindStudyReadingBack(
    absl::string_view name, CoreLock& lock) {
  ASSIGN_OR_RETURN(const StudyEntry* found, FindSummaryLocked(name));
  if (!found->evicted) return FindStudyLocked(name);
  const std::string key = found->spec.name();
  const uint64_t eviction = found->eviction;
  const bool with_curves = !std::holds_alternative<std::monostate>(found->early_stopping);
  // Off the lock: a large study's rows take milliseconds to read and parse, which dispatch,
  // results and every other call would wait for. An evicted study's stored rows do not change
  // while it stays evicted (nothing writes an ended study that is not in memory).
  lock.Release();
  StoredStudy read = ReadStoredStudy(key, with_curves);
  lock.Reacquire();
  auto it = studies_.find(key);
  // Read back by another call meanwhile, deleted, or evicted again after a reopening: this
  // read is not what the study is now, and FindStudyLocked reads it again if it has to.
  if (it != studies_.end() && it->second->evicted && it->second->eviction == eviction) {
    RETURN_IF_ERROR(RestoreReadLocked(*it->second, std::move(read)));
  }
  return FindStudyLocked(name);
}

const SchedulerCore::StudyEntry* SchedulerCore::StillEvictedLocked(const std::string& name,
                                                                   uint64_t eviction) const {
  auto it = studies_.find(name);
  if (it == studies_.end() || !it->second->evicted || it->second->eviction != eviction) {
    return nullptr;
  }
  return it->second.get();
}

absl::StatusOr<std::optional<ListPage<v1::Trial>>> SchedulerCore::ListStoredTrialsLocked(
    absl::string_view name, v1::Trial::State only, int size, absl::string_view page_token,
    TrialView view, int sample_stride, CoreLock& lock) {
  ASSIGN_OR_RETURN(const StudyEntry* study, FindSummaryLocked(name));
  const std::string filter = TrialPageFilter(name, only, view, study->order);
  TrialSample sample(study->spec, sample_stride, std::nullopt);
  ASSIGN_OR_RETURN(const uint64_t start, TrialPageStart(page_token, filter, sample));
  StoredPageRead read{.store = store_,
                      .spec = study->spec,
                      .only = only,
                      .size = size,
                      .view = view,
                      .filter = filter,
                      .sample = sample,
                      .start = start};
  const uint64_t eviction = study->eviction;
  // Neither the disk nor building the page is waited for under the lock: the rows of an
  // evicted study do not change, which the check after says. Other pages may take the reply
  // budget meanwhile: one that no longer fits is built again to what is left (as ListStudies'
  // pages built off the lock), and when too little is left the caller is told to come back.
  for (int built = 0; built < kStoredPageBuilds; ++built) {
    ASSIGN_OR_RETURN(const size_t available, reply_budget_.Available());
    read.max_bytes = std::min(kMaxPageBytes, available);
    lock.Release();
    absl::StatusOr<StoredPage> page = ReadStoredPage(read);
    lock.Reacquire();
    if (StillEvictedLocked(read.spec.name(), eviction) == nullptr) return std::nullopt;
    if (!page.ok()) return page.status();
    ASSIGN_OR_RETURN(std::optional<ReplyBudget::Lease> lease, reply_budget_.TakeIfFits(page->bytes));
    if (lease) {
      page->page.lease = *std::move(lease);
      return std::move(page->page);
    }
  }
  return absl::ResourceExhaustedError(
      "the scheduler is sending many large pages to other callers now; ask for this page again "
      "shortly");
}

absl::Status SchedulerCore::LoadEvictedLocked(StudyEntry& study) {
  return RestoreReadLocked(
      study, ReadStoredStudy(study.spec.name(),
                             !std::holds_alternative<std::monostate>(study.early_stopping)));
}

absl::Status SchedulerCore::RestoreReadLocked(StudyEntry& study, StoredStudy read) {
  const std::string& name = study.spec.name();
  absl::StatusOr<std::vector<v1::Trial>>& trials = read.trials;
  std::vector<StoredIntermediateValue>& values = read.values;
  if (!trials.ok()) {
    return absl::UnavailableError(absl::StrCat("study \"", name, "\" has ended and its trials ",
                                               "are in the store, which cannot read them now (",
                                               trials.status().message(), "); try again"));
  }
  ASSIGN_OR_RETURN(study.optimizer,
                   options_.optimizer_factory(study.space, study::ToOptimizerConfig(study.spec)));
  study.front.emplace(study.spec);
  study.running = study.completed = study.failed = study.cancelled = study.pruned = 0;
  study.added = 0;
  study.first_errors.clear();
  study.progress_reported = false;
  reading_back_ = true;
  absl::Status restored;
  for (const v1::Trial& trial : *trials) {
    restored = RestoreTrialLocked(study, trial);
    if (!restored.ok()) break;
  }
  reading_back_ = false;
  if (!restored.ok()) {  // Back to its summary: nothing half read stays.
    DropTrialsLocked(study);
    return restored;
  }
  study.evicted = false;
  RestoreCurvesLocked(study, values);
  study.summary.Clear();
  CacheEndedLocked(study);
  return absl::OkStatus();
}

void SchedulerCore::CacheEndedLocked(StudyEntry& study) {
  ForgetCachedLocked(study);
  size_t bytes = sizeof(StudyEntry) + study.spec.ByteSizeLong();
  for (uint64_t id : study.trial_ids) {
    const TrialEntry& trial = trials_.at(id);
    bytes += kTrialOverheadBytes + trial.finished.capacity() +
             (trial.live ? sizeof(LiveTrial) + trial.live->message.SpaceUsedLong() : 0) +
             trial.curve.values.capacity() * sizeof(study::IntermediateValue);
  }
  study.cached = ended_cache_.insert(ended_cache_.begin(), &study);
  study.cached_bytes = bytes;
  ended_cache_bytes_ += bytes;
  TrimEndedCacheLocked(options_.ended_study_cache_bytes, &study);
}

void SchedulerCore::ForgetCachedLocked(StudyEntry& study) {
  if (!study.cached) return;
  ended_cache_.erase(*study.cached);
  study.cached.reset();
  ended_cache_bytes_ -= study.cached_bytes;
  study.cached_bytes = 0;
}

void SchedulerCore::TrimEndedCacheLocked(size_t bound, const StudyEntry* keep) {
  // A store that cannot read back keeps every study: no walk on each commit.
  if (!store_->reads_back()) return;
  auto it = ended_cache_.end();
  while (ended_cache_bytes_ > bound && it != ended_cache_.begin()) {
    StudyEntry& study = **std::prev(it);
    if (!study.terminal()) {
      ForgetCachedLocked(study);  // Reopened (UpdateStudy): in progress again.
    } else if (&study != keep && EvictableLocked(study)) {
      evicted_bytes_ += study.cached_bytes;
      EvictLocked(study);  // Erases std::prev(it) only: `it` stays valid.
    } else {
      --it;
    }
  }
  if (evicted_bytes_ >= kReleaseMemoryAfterBytes) {
    evicted_bytes_ = 0;
    malloc_trim(0);
  }
}

bool SchedulerCore::EvictableLocked(const StudyEntry& study) const {
  // Only what the store can give back, once it has everything; and nothing may point into
  // its trials: a watch reading them, a suggestion or a waiting call, a client's lease.
  return store_->reads_back() && study.terminal() && !study.evicted &&
         study.last_write <= stored_through_ && !study.suggesting && !study.serving_waiters &&
         study.turn_holder == 0 && study.watch_ids.empty() && study.suggest_waiters.empty() &&
         study.leased.empty() && study.pending.empty() && study.running == 0;
}

void SchedulerCore::EvictLocked(StudyEntry& study) {
  study.eviction = ++evictions_;
  v1::Study summary = BuildStudyLocked(study);
  // What a restart starts from is this same summary.
  study.last_write = store_->PutStudy(summary);
  summary.clear_spec();
  ForgetCachedLocked(study);
  DropTrialsLocked(study);
  study.summary = std::move(summary);
  study.evicted = true;
}

void SchedulerCore::DropTrialsLocked(StudyEntry& study) {
  for (uint64_t id : study.trial_ids) trials_.erase(id);
  // Swapped out, not cleared: a cleared container keeps its capacity.
  std::vector<uint64_t>().swap(study.trial_ids);
  std::vector<optimizer::TrialRecord>().swap(study.history);
  absl::flat_hash_set<std::string>().swap(study.keys);
  std::vector<FirstError>().swap(study.first_errors);
  study.front.reset();
  study.optimizer.reset();
  study.journal.reset();
  study.best.reset();
}

absl::Status SchedulerCore::CheckMemoryLocked() {
  if (options_.max_memory_bytes <= 0) return absl::OkStatus();
  // Real time, not the core's clock (a test's may stand still).
  const absl::Time now = absl::Now();
  const double cap = static_cast<double>(options_.max_memory_bytes);
  if (static_cast<double>(memory_used_) < cap * kMemoryRecheckShare &&
      now < memory_checked_ + options_.memory_check_interval) {
    return memory_status_;
  }
  memory_checked_ = now;
  // Refusing already, work is taken again only under the lower line (kMemoryResumeShare).
  const bool was_ok = memory_status_.ok();
  const int64_t limit = static_cast<int64_t>(cap * (was_ok ? kMemoryPressureShare : kMemoryResumeShare));
  int64_t used = options_.resident_bytes();
  if (used > limit) {
    TrimEndedCacheLocked(0);  // What can be read back from the store goes first.
    malloc_trim(0);
    used = options_.resident_bytes();
  }
  memory_used_ = used;
  if (used <= limit) {
    if (!was_ok) DHPT_LOG_INFO("memory: %d MiB in use, under the cap again: new work is accepted", used >> 20);
    memory_status_ = absl::OkStatus();
    return memory_status_;
  }
  memory_status_ = absl::ResourceExhaustedError(absl::StrCat(
      "the scheduler is near its memory cap: ", used >> 20, " MiB in use of ",
      options_.max_memory_bytes >> 20, " MiB (--max_memory_bytes, by default the container's "
      "limit), so it takes no new studies or trials until memory is freed; delete ended "
      "studies no longer needed (dhpt delete), or give it more memory"));
  if (was_ok) DHPT_LOG_WARNING("memory: %s", memory_status_.message());
  return memory_status_;
}

}  // namespace dhpt::scheduler
