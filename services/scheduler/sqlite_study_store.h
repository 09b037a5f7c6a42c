#pragma once

// The scheduler's durable StudyStore: one SQLite file in WAL mode, written by one thread that
// commits whatever has queued since its last commit in one transaction (group commit), so the
// core never waits for the disk and a busy scheduler pays one fsync for many writes.
//
// Studies and trials are stored as their API messages (protobuf bytes) beside the columns that
// index them; intermediate values as rows. The schema is versioned (PRAGMA user_version) and
// migrated forward on open; a database of a newer schema is refused. A lock file next to the
// database keeps a second scheduler from opening it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/scheduler/study_store.h"

struct sqlite3;

namespace dhpt::scheduler {

// The database a store is made of: path and limits.
struct SqliteStoreOptions {
  // ":memory:" keeps the database in this process only (nothing survives it).
  std::string path;
  // Caps the database file (SQLite's max_page_count); writes past it fail as "disk full".
  // 0: only the disk limits it.
  int64_t max_bytes = 0;
  // fsync every commit (survives power loss); false: survives the process being killed, and
  // may lose the last commits on power loss.
  bool sync_to_disk = true;
  // A failed commit is retried after this, doubling up to max_retry_delay.
  absl::Duration retry_delay = absl::Milliseconds(50);
  absl::Duration max_retry_delay = absl::Seconds(1);
  // A fault for tests: called with the study's name, on the calling thread, once
  // ReadStudyTrials or ReadTrialPage has read its rows and before it returns them (a slow
  // disk; what it returns is then older than the store). Unset outside tests.
  std::function<void(const std::string& study)> after_read_back;
};

// The schema this build writes; older ones are migrated, newer ones refused.
inline constexpr int kStoreSchemaVersion = 1;

class SqliteStudyStore : public StudyStore {
 public:
  // Opens (creating if needed) and checks the database; clear errors for a file that is
  // corrupt, read-only, in use by another scheduler or of a newer schema.
  static absl::StatusOr<std::unique_ptr<SqliteStudyStore>> Open(SqliteStoreOptions options);
  // Commits what is queued (one last try) and closes.
  ~SqliteStudyStore() override;

  absl::StatusOr<StoredState> Load() override;
  absl::StatusOr<StoredState> LoadActive() override;
  absl::StatusOr<std::vector<StoredIntermediateValue>> LoadIntermediateValues(
      const std::string& study) override;
  WriteSequence PutStudy(const v1::Study& study) override;
  WriteSequence PutTrial(const v1::Trial& trial) override;
  WriteSequence PutIntermediateValue(const std::string& study, uint64_t trial_id, int attempt,
                                     int64_t step, double value) override;
  WriteSequence PutImportedStudy(const v1::Study& study, const std::vector<v1::Trial>& trials,
                                 const std::vector<StoredIntermediateValue>& values) override;
  // Through a read-only connection of its own (WAL readers never wait for the writer); none
  // for ":memory:", which no other connection can see.
  absl::StatusOr<std::vector<StoredIntermediateValue>> ReadIntermediateValues(
      const std::vector<uint64_t>& trial_ids) const override;
  bool reads_back() const override { return options_.path != ":memory:"; }
  absl::StatusOr<std::vector<v1::Trial>> ReadStudyTrials(const std::string& study) const override;
  absl::StatusOr<std::vector<std::string>> ReadTrialPage(const std::string& study,
                                                         int64_t from_number,
                                                         int limit) const override;
  WriteSequence DeleteStudy(const std::string& study) override;
  WriteSequence last_sequence() const override;
  absl::Status Sync(WriteSequence sequence) override;
  void SetCommitListener(std::function<void(WriteSequence)> listener) override;
  absl::Status health() const override;
  // The database file and its write-ahead log.
  int64_t size_bytes() const override;

 private:
  // The writes queued since the last commit, newest state only.
  struct Batch {
    struct TrialRow {
      std::string study;
      int64_t number = 0;
      std::string bytes;
    };
    struct IntermediateRow {
      std::string study;
      uint64_t trial_id;
      int attempt;
      int64_t step;
      double value;
    };
    absl::flat_hash_set<std::string> deleted_studies;  // Applied before the rows below.
    std::map<std::string, std::string> studies;        // Name -> Study bytes.
    std::map<uint64_t, TrialRow> trials;
    std::vector<IntermediateRow> intermediate_values;
    uint64_t next_trial_id = 0;  // 0: unchanged.
    WriteSequence last = 0;      // The newest write it holds.

    bool empty() const;
    void Delete(const std::string& study);
    // Applies `newer`'s writes on top of these (a failed batch is retried with later writes).
    void Merge(Batch newer);
  };

  struct Statements;

  SqliteStudyStore(SqliteStoreOptions options, sqlite3* db, int lock_fd);
  // Load's work: every trial, or only the active studies' (`ended_trials` false).
  absl::StatusOr<StoredState> LoadState(bool ended_trials);
  // Journal mode, durability, size cap and an integrity check; then Migrate.
  absl::Status Configure();
  absl::Status Migrate();
  void WriteUntilStopped();
  // Commits the batch (its deletions first, in a transaction of their own).
  absl::Status Commit(Batch& batch);
  // Runs `body` (which returns an SQLite result code) in one transaction.
  absl::Status InTransaction(absl::FunctionRef<int()> body);
  int WriteRows(const Batch& batch);

  const SqliteStoreOptions options_;
  sqlite3* const db_;  // Used by Load (before writes start) and then by the writer thread only.
  const int lock_fd_;
  std::unique_ptr<Statements> statements_;  // The writer's prepared statements.

  mutable absl::Mutex mutex_;
  Batch queued_ ABSL_GUARDED_BY(mutex_);
  WriteSequence next_sequence_ ABSL_GUARDED_BY(mutex_) = 1;
  WriteSequence committed_ ABSL_GUARDED_BY(mutex_) = 0;
  // The newest write the last failed commit held, and why it failed.
  WriteSequence failed_through_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;

  absl::Mutex listener_mutex_;
  std::function<void(WriteSequence)> listener_ ABSL_GUARDED_BY(listener_mutex_);

  std::thread writer_;
};

}  // namespace dhpt::scheduler
