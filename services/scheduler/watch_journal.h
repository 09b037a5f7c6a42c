#pragma once

// What WatchStudy streams are made of: each change of a watched study is built and serialised
// once, as an entry of WatchStudyResponse.events, and shared by every watcher of the study.
// A watcher reads the study's journal from its own position at its own pace, so a slow one
// costs the scheduler nothing but its place in the journal, and a batch for the wire is the
// concatenation of the entries it takes.
//
// No gRPC and no locking here: the scheduler core owns the journals under its mutex.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "dhpt/v1/study_service.pb.h"

namespace dhpt::scheduler {

// One change of a study, ready for the wire.
struct WatchEvent {
  uint64_t position = 0;
  bool summary = false;  // The study's summary, rather than a trial.
  int64_t trial = -1;    // The trial's number, for a trial event.
  // The StudyEvent as one `events` entry of a WatchStudyResponse: field tag, length, bytes.
  std::string framed;
};
using WatchEventPtr = std::shared_ptr<const WatchEvent>;

// Serialises `event` (its position set) once, for every watcher.
WatchEventPtr FrameWatchEvent(const v1::StudyEvent& event);

// A study's latest events, in position order, within limits: the oldest are forgotten first.
// Everything that happened after `complete_after()` is held; a watcher whose position is older
// resynchronises from the study itself (SchedulerCore::ResyncWatchLocked).
struct WatchJournalLimits {
  size_t max_events = 16'384;
  size_t max_bytes = 8 << 20;
};

class WatchJournal {
 public:
  explicit WatchJournal(WatchJournalLimits limits = {}) : limits_(limits) {}

  // Forgets every event: the journal is complete after `position` (the study's latest).
  void Reset(uint64_t position);
  // Appends the study's newest event (its position above any held), forgetting the oldest
  // past the limits.
  void Append(WatchEventPtr event);

  // Whether every event after `position` is held (or nothing happened after it).
  bool Covers(uint64_t position) const { return position >= complete_after_; }
  // Appends to `out` the events after `position`, in order, only summaries when
  // `summaries_only`, until they hold `max_bytes` (at least one event); returns the position
  // read through, which is `position` when there is nothing newer. Needs Covers(position).
  // What is read together is coalesced: a trial that changed several times comes once, in
  // its latest state (at that state's position), and so does the study's summary, so a
  // watcher is sent at most one event per trial per batch however fast trials change.
  uint64_t Read(uint64_t position, bool summaries_only, size_t max_bytes,
                std::vector<WatchEventPtr>& out) const;

  // The newest event held (the journal holds at least the one just appended).
  const WatchEventPtr& latest() const { return events_.back(); }
  size_t events() const { return events_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t complete_after() const { return complete_after_; }

 private:
  const WatchJournalLimits limits_;
  std::deque<WatchEventPtr> events_;
  size_t bytes_ = 0;
  uint64_t complete_after_ = 0;
};

}  // namespace dhpt::scheduler
