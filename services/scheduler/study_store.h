#pragma once

// Where the scheduler records what it accepted. The core writes every accepted study and every
// trial change here before it acknowledges it, and rebuilds itself from Load() on start.
// In memory for now; the durable SQLite store implements the same interface.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

struct StoredState {
  std::vector<v1::Study> studies;  // Spec, state and timestamps; counts are derived.
  std::vector<v1::Trial> trials;   // In id order.
};

class StudyStore {
 public:
  virtual ~StudyStore() = default;
  virtual absl::Status PutStudy(const v1::Study& study) = 0;
  virtual absl::Status PutTrial(const v1::Trial& trial) = 0;
  virtual absl::StatusOr<StoredState> Load() const = 0;
};

class InMemoryStudyStore : public StudyStore {
 public:
  absl::Status PutStudy(const v1::Study& study) override;
  absl::Status PutTrial(const v1::Trial& trial) override;
  absl::StatusOr<StoredState> Load() const override;

 private:
  mutable absl::Mutex mutex_;
  std::map<std::string, v1::Study> studies_ ABSL_GUARDED_BY(mutex_);
  std::map<uint64_t, v1::Trial> trials_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::scheduler
