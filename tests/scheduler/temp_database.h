#pragma once

// A fresh temporary directory, and a real SQLite store in one: what tests run the scheduler on.

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "services/scheduler/sqlite_study_store.h"

namespace dhpt::testing {

// Removed, with everything in it, when it goes.
class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dhpt-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDirectory() { std::filesystem::remove_all(path_); }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class TempDatabase {
 public:
  explicit TempDatabase(scheduler::SqliteStoreOptions options = {}) : options_(std::move(options)) {
    options_.path = directory_.path() + "/scheduler.db";
    Reopen();
  }
  ~TempDatabase() { store_.reset(); }  // Before the directory goes.

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
  const std::string& directory() const { return directory_.path(); }
  scheduler::SqliteStoreOptions& options() { return options_; }

 private:
  TempDirectory directory_;
  scheduler::SqliteStoreOptions options_;
  std::unique_ptr<scheduler::SqliteStudyStore> store_;
};

}  // namespace dhpt::testing
