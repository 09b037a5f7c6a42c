// Watch fan-out: a study's changes reach its WatchStudy streams. Each change is built and
// serialised once into the study's journal; every watcher reads the journal from its own
// position at its own pace, and one that falls behind the journal, or resumes from a position
// it no longer holds, is brought up to date from the trials themselves (each once, in its
// latest state). Nothing here walks studies or watchers that a change does not concern.

#include <algorithm>
#include <utility>

#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core_internal.h"

namespace dhpt::scheduler {

absl::StatusOr<uint64_t> SchedulerCore::Watch(absl::string_view name, const WatchOptions& options,
                                              StudyWatcher* watcher) {
  CoreLock lock(this);
  ASSIGN_OR_RETURN(const StudyEntry* found, FindStudyReadingBack(name, lock));
  // After the lookup: it releases the lock while an evicted study is read back.
  if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
  StudyEntry& study = *const_cast<StudyEntry*>(found);
  if (!study.journal.has_value()) study.journal.emplace(options_.watch_journal);
  if (study.watch_ids.empty() || (!options.summaries_only && study.trial_watchers == 0)) {
    // Until now nobody read its trial events, so none were kept.
    study.journal->Reset(study.head);
  }
  const uint64_t id = next_watch_++;
  auto watch = std::make_unique<WatchState>();
  watch->study = &study;
  watch->watcher = watcher;
  watch->position = options.after_position;
  watch->summaries_only = options.summaries_only;
  watchers_[id] = std::move(watch);
  study.watch_ids.push_back(id);
  if (!options.summaries_only) ++study.trial_watchers;
  return id;
}

void SchedulerCore::Unwatch(uint64_t watch_id) {
  CoreLock lock(this);
  ForgetWatchLocked(watch_id);
}

void SchedulerCore::ForgetWatchLocked(uint64_t watch_id) {
  auto it = watchers_.find(watch_id);
  if (it == watchers_.end()) return;
  StudyEntry& study = *it->second->study;
  std::vector<uint64_t>& ids = study.watch_ids;
  ids.erase(std::remove(ids.begin(), ids.end(), watch_id), ids.end());
  if (!it->second->summaries_only) --study.trial_watchers;
  // Nobody reads it any more: its memory goes back (a watcher resuming later resynchronises).
  if (ids.empty()) study.journal.reset();
  watchers_.erase(it);
}

void SchedulerCore::EndWatchesLocked(StudyEntry& study, const absl::Status& status) {
  const std::vector<uint64_t> ids = study.watch_ids;
  for (uint64_t id : ids) {
    StudyWatcher* watcher = watchers_.at(id)->watcher;
    ForgetWatchLocked(id);
    watcher->OnEnd(status);
  }
}

absl::StatusOr<WatchRead> SchedulerCore::ReadWatch(uint64_t watch_id, size_t max_bytes) {
  CoreLock lock(this);
  auto it = watchers_.find(watch_id);
  if (it == watchers_.end()) return absl::NotFoundError("this watch has ended");
  WatchState& watch = *it->second;
  StudyEntry& study = *watch.study;
  WatchRead read;
  // A summary fell due while trials changed and nothing else made one.
  if (study.summary_stale && options_.clock() - study.last_summary >= kWatchSummaryInterval) {
    PublishStudyLocked(study);
  }
  if (watch.position == 0) {
    // A new watch (positions start at the wall clock's microseconds, so none is 0) starts from
    // the study as it is now.
    read.events.push_back(SummaryEventLocked(study));
    watch.position = study.head;
    watch.answered = true;
    return read;
  }
  if (watch.position <= study.head && study.journal->Covers(watch.position)) {
    watch.position = study.journal->Read(watch.position, watch.summaries_only, max_bytes, read.events);
  } else {
    ResyncWatchLocked(study, watch, max_bytes, read.events);
  }
  const bool first = !std::exchange(watch.answered, true);
  if (!read.events.empty()) return read;
  if (study.terminal()) {
    read.ended = true;
    ForgetWatchLocked(watch_id);
    return read;
  }
  if (study.summary_stale) {
    read.retry_after = std::max(absl::ZeroDuration(), study.last_summary + kWatchSummaryInterval -
                                                          options_.clock());
  } else {
    watch.waiting = true;
  }
  read.up_to_date = first;
  return read;
}

void SchedulerCore::ResyncWatchLocked(StudyEntry& study, WatchState& watch, size_t max_bytes,
                                      std::vector<WatchEventPtr>& out) {
  // A position the scheduler never gave (from another scheduler, or made up) gets everything.
  const uint64_t after = watch.position <= study.head ? watch.position : 0;
  if (!watch.summaries_only) {
    std::vector<std::pair<uint64_t, const TrialEntry*>> changed;
    for (uint64_t id : study.trial_ids) {
      const TrialEntry& trial = trials_.at(id);
      if (trial.position > after) changed.emplace_back(trial.position, &trial);
    }
    std::sort(changed.begin(), changed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    size_t bytes = 0;
    for (const auto& [position, trial] : changed) {
      if (bytes >= max_bytes) return;  // The rest in the next read, from this position.
      v1::StudyEvent event;
      *event.mutable_trial() = FullTrialLocked(*trial);
      event.set_position(position);
      out.push_back(FrameWatchEvent(event));
      bytes += out.back()->framed.size();
      watch.position = position;
    }
  }
  out.push_back(SummaryEventLocked(study));
  watch.position = study.head;
}

WatchEventPtr SchedulerCore::SummaryEventLocked(StudyEntry& study) {
  // A position of its own (the study's latest may be a trial's, already sent), and every
  // watcher of the study gets it too.
  PublishStudyLocked(study);
  return study.journal->latest();
}

void SchedulerCore::PublishTrialLocked(TrialEntry& trial) {
  StudyEntry& study = *trial.study;
  trial.position = study.head = next_position_++;
  study.summary_stale = true;
  MarkSummaryChangedLocked(study);
  if (study.trial_watchers > 0) {
    v1::StudyEvent event;
    *event.mutable_trial() = FullTrialLocked(trial);
    event.set_position(trial.position);
    AppendWatchEventLocked(study, event);
  }
  if (!study.watch_ids.empty() && options_.clock() - study.last_summary >= kWatchSummaryInterval) {
    PublishStudyLocked(study);
  }
}

void SchedulerCore::PublishWaitingStudiesLocked() {
  for (StudyEntry* study : dispatchable_) {
    if (!study->watch_ids.empty() && study->running == 0) PublishStudyLocked(*study);
  }
}

void SchedulerCore::PublishStudyLocked(StudyEntry& study) {
  study.head = next_position_++;
  study.summary_stale = false;
  study.last_summary = options_.clock();
  study.published_spec.reset();  // UpdateStudy's change of the spec comes this way.
  MarkSummaryChangedLocked(study);
  if (study.watch_ids.empty()) return;
  v1::StudyEvent event;
  *event.mutable_study() = BuildStudyLocked(study);
  event.set_position(study.head);
  AppendWatchEventLocked(study, event);
}

void SchedulerCore::AppendWatchEventLocked(StudyEntry& study, const v1::StudyEvent& event) {
  study.journal->Append(FrameWatchEvent(event));
  for (uint64_t id : study.watch_ids) {
    WatchState& watch = *watchers_.at(id);
    if (!watch.waiting || (watch.summaries_only && !event.has_study())) continue;
    watch.waiting = false;
    watch.watcher->OnEventsReady();
  }
}

}  // namespace dhpt::scheduler
