#pragma once

// Where the scheduler records what it accepted. The core queues every accepted study, trial
// change and intermediate value here as it happens (never waiting, under its own lock) and
// acknowledges it only once the store reports it committed: a user's CreateStudy returns after
// Sync, a worker's ResultAck is sent from the commit listener. On start the core rebuilds
// itself from Load().

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

struct StoredState {
  // In creation order. An ended study's stored message is its summary (counts, best trial) as
  // of its last change; an active study's counts are derived from its trials.
  std::vector<v1::Study> studies;
  std::vector<v1::Trial> trials;  // In id order: every study's (Load) or active ones' (LoadActive).
  // Above every id ever handed out, including those of deleted studies: ids are never reused.
  uint64_t next_trial_id = 1;
};

struct StoredIntermediateValue {
  uint64_t trial_id = 0;
  int attempt = 0;
  int64_t step = 0;
  double value = 0;
};

// Writes are numbered; a write's sequence number says when it is durable.
using WriteSequence = uint64_t;

class StudyStore {
 public:
  virtual ~StudyStore() = default;

  // Everything committed. Called once, before any write.
  virtual absl::StatusOr<StoredState> Load() = 0;
  // The same, with the trials of the studies not ended only: an ended study is read back with
  // ReadStudyTrials when asked. Only for a store that reads_back().
  virtual absl::StatusOr<StoredState> LoadActive() { return Load(); }
  // The intermediate values of the study's trials, by trial, attempt and step. Like Load,
  // before any write (early stopping rebuilds its curves from them).
  virtual absl::StatusOr<std::vector<StoredIntermediateValue>> LoadIntermediateValues(
      const std::string& study) = 0;

  // Queue a write; never block on the disk. Later writes of the same study or trial replace
  // earlier ones that are not yet committed.
  virtual WriteSequence PutStudy(const v1::Study& study) = 0;
  virtual WriteSequence PutTrial(const v1::Trial& trial) = 0;
  // A NaN value is not kept (nothing was measured); ±infinity is.
  virtual WriteSequence PutIntermediateValue(const std::string& study, uint64_t trial_id,
                                             int attempt, int64_t step, double value) = 0;
  // A study restored from a backup (ImportStudy) with its trials and their intermediate
  // values, queued as one write: a commit holds all of it or none of it.
  virtual WriteSequence PutImportedStudy(const v1::Study& study,
                                         const std::vector<v1::Trial>& trials,
                                         const std::vector<StoredIntermediateValue>& values) = 0;
  // The committed intermediate values of these trials, by trial, attempt and step (an export
  // reads them). Any thread, while writes go on.
  virtual absl::StatusOr<std::vector<StoredIntermediateValue>> ReadIntermediateValues(
      const std::vector<uint64_t>& trial_ids) const = 0;
  // Whether ReadStudyTrials and ReadIntermediateValues see what was committed (a database
  // another connection can open): only then may the core forget an ended study's trials.
  virtual bool reads_back() const { return false; }
  // The committed trials of the study in number order. Any thread, while writes go on.
  virtual absl::StatusOr<std::vector<v1::Trial>> ReadStudyTrials(const std::string& study) const {
    return absl::UnimplementedError("this store cannot read a study back");
  }
  // Up to `limit` of the study's committed trials, numbered `from_number` on, in number order,
  // as they are stored (serialised v1::Trial): a page of an ended study answered without
  // reading the study back (SchedulerCore::ListTrials). Any thread, while writes go on.
  virtual absl::StatusOr<std::vector<std::string>> ReadTrialPage(const std::string& study,
                                                                 int64_t from_number,
                                                                 int limit) const {
    return absl::UnimplementedError("this store cannot read a study back");
  }
  // The study, its trials and their intermediate values.
  virtual WriteSequence DeleteStudy(const std::string& study) = 0;
  // The latest sequence handed out.
  virtual WriteSequence last_sequence() const = 0;

  // Waits until every write up to `sequence` is committed and the commit listener has been
  // told (so it must never Sync itself). UNAVAILABLE when the commit that
  // should hold it failed (disk full, read-only file): the writes stay queued and are retried,
  // but the caller must not tell anyone they are stored.
  virtual absl::Status Sync(WriteSequence sequence) = 0;
  // Called on the store's writer thread after each commit with the last sequence it covers,
  // outside the store's locks. Set it before writing; null stops the calls (and waits for one
  // in progress to return).
  virtual void SetCommitListener(std::function<void(WriteSequence)> listener) = 0;
  // OK while writes commit; the last error while they fail.
  virtual absl::Status health() const = 0;
  // Bytes the store takes on disk (0 when it keeps nothing there).
  virtual int64_t size_bytes() const = 0;
};

}  // namespace dhpt::scheduler
