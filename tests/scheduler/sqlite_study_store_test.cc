#include "services/scheduler/sqlite_study_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

v1::Study Study(const std::string& name) {
  v1::Study study;
  study.mutable_spec()->set_name(name);
  study.mutable_spec()->set_max_trials(10);
  study.set_state(v1::Study::RUNNING);
  return study;
}

v1::Trial Trial(uint64_t id, const std::string& study, int64_t number, double value) {
  v1::Trial trial;
  trial.set_id(id);
  trial.set_study(study);
  trial.set_number(number);
  trial.set_state(v1::Trial::COMPLETED);
  trial.set_objective_value(value);
  v1::Trial::Attempt& attempt = *trial.add_attempts();
  attempt.set_worker_id("w");
  attempt.set_epoch(0xfeed);
  return trial;
}

// Runs SQL on the database file from outside the store, as another program would.
void ExecOutside(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

TEST(SqliteStudyStoreTest, WhatIsSyncedSurvivesReopening) {
  testing::TempDatabase db;
  db.store().PutStudy(Study("a"));
  db.store().PutTrial(Trial(7, "a", 0, 0.5));
  v1::Trial later = Trial(7, "a", 0, 0.25);  // The same trial again: the newest state wins.
  db.store().PutTrial(later);
  db.store().PutTrial(Trial(9, "a", 1, 0.75));
  const WriteSequence last = db.store().PutIntermediateValue("a", 9, 1, 3, 0.1);
  ASSERT_TRUE(db.store().Sync(last).ok());
  db.Reopen();
  absl::StatusOr<StoredState> state = db.store().Load();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->studies.size(), 1u);
  EXPECT_EQ(state->studies[0].spec().name(), "a");
  ASSERT_EQ(state->trials.size(), 2u);
  EXPECT_EQ(state->trials[0].id(), 7u);
  EXPECT_EQ(state->trials[0].objective_value(), 0.25);
  EXPECT_EQ(state->trials[0].attempts(0).epoch(), 0xfeedu);
  EXPECT_EQ(state->trials[1].id(), 9u);
  EXPECT_EQ(state->next_trial_id, 10u);
}

TEST(SqliteStudyStoreTest, ANanIntermediateValueIsNotKeptAndBlocksNothing) {
  testing::TempDatabase db;
  db.store().PutStudy(Study("a"));
  db.store().PutTrial(Trial(9, "a", 0, 0.5));
  db.store().PutIntermediateValue("a", 9, 1, 1, std::nan(""));
  db.store().PutIntermediateValue("a", 9, 1, 2, std::numeric_limits<double>::infinity());
  const WriteSequence last = db.store().PutIntermediateValue("a", 9, 1, 3, 0.5);
  ASSERT_TRUE(db.store().Sync(last).ok());
  EXPECT_TRUE(db.store().health().ok());
  db.Reopen();
  absl::StatusOr<std::vector<StoredIntermediateValue>> values = db.store().LoadIntermediateValues("a");
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), 2u);
  EXPECT_EQ((*values)[0].step, 2);
  EXPECT_EQ((*values)[0].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ((*values)[1].value, 0.5);
}

TEST(SqliteStudyStoreTest, CommitsAreReportedToTheListenerInOrder) {
  testing::TempDatabase db;
  absl::Mutex mutex;
  std::vector<WriteSequence> reported;
  db.store().SetCommitListener([&](WriteSequence sequence) {
    absl::MutexLock lock(&mutex);
    reported.push_back(sequence);
  });
  WriteSequence last = 0;
  for (int i = 0; i < 100; ++i) last = db.store().PutTrial(Trial(i + 1, "a", i, i));
  ASSERT_TRUE(db.store().Sync(last).ok());
  db.store().SetCommitListener(nullptr);
  absl::MutexLock lock(&mutex);
  ASSERT_FALSE(reported.empty());
  EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
  EXPECT_EQ(reported.back(), last);
}

TEST(SqliteStudyStoreTest, DeletingAStudyRemovesItsTrialsButNeverFreesTheirIds) {
  testing::TempDatabase db;
  db.store().PutStudy(Study("gone"));
  db.store().PutTrial(Trial(1, "gone", 0, 1));
  ASSERT_TRUE(db.store().Sync(db.store().PutTrial(Trial(2, "gone", 1, 2))).ok());
  db.store().PutTrial(Trial(3, "gone", 2, 3));  // Queued, not yet committed, when deleted.
  db.store().DeleteStudy("gone");
  db.store().PutStudy(Study("gone"));  // A new study of the same name.
  ASSERT_TRUE(db.store().Sync(db.store().PutTrial(Trial(4, "gone", 0, 4))).ok());
  db.Reopen();
  absl::StatusOr<StoredState> state = db.store().Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->trials.size(), 1u);
  EXPECT_EQ(state->trials[0].id(), 4u);
  db.store().DeleteStudy("gone");
  ASSERT_TRUE(db.store().Sync(db.store().last_sequence()).ok());
  db.Reopen();
  state = db.store().Load();
  EXPECT_TRUE(state->studies.empty());
  EXPECT_TRUE(state->trials.empty());
  EXPECT_EQ(state->next_trial_id, 5u);
}

TEST(SqliteStudyStoreTest, ASecondSchedulerCannotOpenTheSameDatabase) {
  testing::TempDatabase db;
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> second =
      SqliteStudyStore::Open({.path = db.path()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use by another scheduler"));
  // Nor under another name for the same file.
  const std::string symlink = db.directory() + "/symlink.db";
  const std::string hard_link = db.directory() + "/hard-link.db";
  std::filesystem::create_symlink(db.path(), symlink);
  std::filesystem::create_hard_link(db.path(), hard_link);
  for (const std::string& other : {symlink, hard_link}) {
    EXPECT_THAT(std::string(SqliteStudyStore::Open({.path = other}).status().message()),
                HasSubstr("in use by another scheduler"))
        << other;
  }
  db.Close();  // The lock goes with the store.
  // With the lock free, a file of two names is still refused: each name would keep a
  // write-ahead log of its own.
  for (const std::string& name : {db.path(), hard_link}) {
    absl::Status refused = SqliteStudyStore::Open({.path = name}).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("2 names (hard links)")) << name;
  }
  std::filesystem::remove(hard_link);
  EXPECT_TRUE(SqliteStudyStore::Open({.path = db.path()}).ok());
  EXPECT_TRUE(SqliteStudyStore::Open({.path = symlink}).ok());  // A symlink is one file, one log.
}

TEST(SqliteStudyStoreTest, AMissingTableIsDataLossAtStart) {
  testing::TempDatabase db;
  db.Close();
  ExecOutside(db.path(), "DROP TABLE intermediate_values");
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> opened =
      SqliteStudyStore::Open({.path = db.path()});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("intermediate_values"));
}

TEST(SqliteStudyStoreTest, UnderACapTheLogStaysSmallToo) {
  constexpr int64_t kCap = 256 << 10;
  testing::TempDatabase db({.max_bytes = kCap});
  v1::Trial trial = Trial(1, "s", 0, 1);
  trial.set_error(std::string(2048, 'e'));
  int64_t largest = 0;
  // The same trial, changed and committed 2,000 times: the file stays small, and the log,
  // which gets every version, must not grow past the cap either.
  for (int i = 0; i < 2000; ++i) {
    trial.set_objective_value(i);
    ASSERT_TRUE(db.store().Sync(db.store().PutTrial(trial)).ok());
    largest = std::max(largest, db.store().size_bytes());
  }
  EXPECT_LT(largest, kCap * 3 / 2);
}

TEST(SqliteStudyStoreTest, ACapBelowTheDatabasesSizeIsRefusedAtStart) {
  testing::TempDatabase db;
  const std::string padding(4096, 'p');
  for (uint64_t id = 1; id <= 100; ++id) {
    v1::Trial trial = Trial(id, "s", static_cast<int64_t>(id - 1), 1);
    trial.set_error(padding);
    db.store().PutTrial(trial);
  }
  ASSERT_TRUE(db.store().Sync(db.store().last_sequence()).ok());
  db.Close();
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> opened =
      SqliteStudyStore::Open({.path = db.path(), .max_bytes = 64 << 10});
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("more than --max_db_bytes"));
}

TEST(SqliteStudyStoreTest, ACorruptFileIsAClearErrorAtStart) {
  testing::TempDatabase db;
  db.Close();
  std::filesystem::remove(db.path() + "-wal");
  std::ofstream(db.path(), std::ios::trunc) << std::string(8192, 'x');
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> opened =
      SqliteStudyStore::Open({.path = db.path()});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(opened.status().message()),
              HasSubstr("not a DHPT database or is damaged"));
}

TEST(SqliteStudyStoreTest, AnotherProgramsDatabaseIsRefused) {
  testing::TempDatabase db;
  db.Close();
  const std::string other = db.directory() + "/other.db";
  ExecOutside(other, "CREATE TABLE photos (id INTEGER)");
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> opened = SqliteStudyStore::Open({.path = other});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("another program's SQLite"));
}

TEST(SqliteStudyStoreTest, ADatabaseOfANewerSchemaIsRefusedAndLeftAlone) {
  testing::TempDatabase db;
  db.Close();
  ExecOutside(db.path(), absl::StrCat("PRAGMA user_version = ", kStoreSchemaVersion + 1));
  absl::StatusOr<std::unique_ptr<SqliteStudyStore>> opened =
      SqliteStudyStore::Open({.path = db.path()});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(opened.status().message()), HasSubstr("newer DHPT"));
}

TEST(SqliteStudyStoreTest, AFullDiskFailsWritesLoudlyAndLosesNothingCommitted) {
  testing::TempDatabase db({.max_bytes = 256 << 10, .retry_delay = absl::Milliseconds(5),
                            .max_retry_delay = absl::Milliseconds(20)});
  db.store().PutStudy(Study("s"));
  const std::string padding(4096, 'p');
  uint64_t id = 1;
  absl::Status status;
  // Fill it: each trial carries 4 KiB, so the 256 KiB cap is reached within a few dozen.
  for (; id < 1000 && status.ok(); ++id) {
    v1::Trial trial = Trial(id, "s", static_cast<int64_t>(id - 1), 1);
    trial.set_error(padding);
    status = db.store().Sync(db.store().PutTrial(trial));
  }
  ASSERT_FALSE(status.ok()) << "the cap was never reached";
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("--max_db_bytes"));
  EXPECT_FALSE(db.store().health().ok());
  // Deleting a study makes room, even with writes of other studies still failing behind it.
  db.store().PutStudy(Study("next"));
  db.store().DeleteStudy("s");
  v1::Trial small = Trial(id + 1, "next", 0, 2);
  EXPECT_TRUE(db.store().Sync(db.store().PutTrial(small)).ok());
  EXPECT_TRUE(db.store().health().ok());
  db.store().PutStudy(Study("s"));  // Filled again, for what follows.
  std::vector<uint64_t> committed = {small.id()};
  status = absl::OkStatus();
  for (id = 1000; id < 2000 && status.ok(); ++id) {
    v1::Trial trial = Trial(id, "s", static_cast<int64_t>(id - 1000), 1);
    trial.set_error(padding);
    status = db.store().Sync(db.store().PutTrial(trial));
    if (status.ok()) committed.push_back(id);
  }
  ASSERT_FALSE(status.ok());

  // Room again (a bigger cap): everything acknowledged is there.
  db.options().max_bytes = 0;
  db.Reopen();
  absl::StatusOr<StoredState> state = db.store().Load();
  ASSERT_TRUE(state.ok());
  std::set<uint64_t> stored;
  for (const v1::Trial& trial : state->trials) stored.insert(trial.id());
  for (uint64_t acknowledged : committed) EXPECT_TRUE(stored.contains(acknowledged)) << acknowledged;
  EXPECT_TRUE(db.store().health().ok());
}

// What resumes held work when space returns (the core's dispatch) runs in the commit listener
// and asks health() first: the store must already say it is healthy there, or a study paused
// by a full disk stays paused until some other write comes.
TEST(SqliteStudyStoreTest, TheCommitListenerSeesTheStoreHealthyAgain) {
  testing::TempDatabase db({.max_bytes = 256 << 10, .retry_delay = absl::Milliseconds(5),
                            .max_retry_delay = absl::Milliseconds(20)});
  db.store().PutStudy(Study("s"));
  absl::Status status;
  for (uint64_t id = 1; id < 1000 && status.ok(); ++id) {
    v1::Trial trial = Trial(id, "s", static_cast<int64_t>(id - 1), 1);
    trial.set_error(std::string(4096, 'p'));
    status = db.store().Sync(db.store().PutTrial(trial));
  }
  ASSERT_FALSE(status.ok());
  absl::Mutex mutex;
  std::vector<bool> healthy_when_told;
  db.store().SetCommitListener([&](WriteSequence) {
    const bool healthy = db.store().health().ok();
    absl::MutexLock lock(&mutex);
    healthy_when_told.push_back(healthy);
  });
  db.store().DeleteStudy("s");
  ASSERT_TRUE(db.store().Sync(db.store().last_sequence()).ok());
  db.store().SetCommitListener(nullptr);
  absl::MutexLock lock(&mutex);
  ASSERT_FALSE(healthy_when_told.empty());
  EXPECT_TRUE(healthy_when_told.front());
}

}  // namespace
}  // namespace dhpt::scheduler
