#pragma once

// A real SQLite store in a fresh temporary directory, removed with it: what tests run the
// scheduler on.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "services/scheduler/sqlite_study_store.h"

namespace dhpt::testing {

class TempDatabase {
 public:
  explicit TempDatabase(scheduler::SqliteStoreOptions options = {}) : options_(std::move(options)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dhpt-db-XXXXXX").string();
    directory_ = mkdtemp(pattern.data());
    options_.path = directory_ + "/scheduler.db";
    Reopen();
  }
  ~TempDatabase() {
    store_.reset();
    std::filesystem::remove_all(directory_);
  }

  scheduler::SqliteStudyStore& store() { return *store_; }
  scheduler::SqliteStudyStore* get() { return store_.get(); }
  // Closes the file and opens it again, as a restarted scheduler would.
  void Reopen() {
    store_.reset();
    auto opened = scheduler::SqliteStudyStore::Open(options_);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
  }
  // Closes the store (after its last commit); Reopen opens it again.
  void Close() { store_.reset(); }
  const std::string& path() const { return options_.path; }
  const std::string& directory() const { return directory_; }
  scheduler::SqliteStoreOptions& options() { return options_; }

 private:
  scheduler::SqliteStoreOptions options_;
  std::string directory_;
  std::unique_ptr<scheduler::SqliteStudyStore> store_;
};

}  // namespace dhpt::testing
