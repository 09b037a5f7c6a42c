#include "services/scheduler/study_store.h"

namespace dhpt::scheduler {

absl::Status InMemoryStudyStore::PutStudy(const v1::Study& study) {
  absl::MutexLock lock(&mutex_);
  studies_[study.spec().name()] = study;
  return absl::OkStatus();
}

absl::Status InMemoryStudyStore::PutTrial(const v1::Trial& trial) {
  absl::MutexLock lock(&mutex_);
  trials_[trial.id()] = trial;
  return absl::OkStatus();
}

absl::StatusOr<StoredState> InMemoryStudyStore::Load() const {
  absl::MutexLock lock(&mutex_);
  StoredState state;
  for (const auto& [name, study] : studies_) state.studies.push_back(study);
  for (const auto& [id, trial] : trials_) state.trials.push_back(trial);
  return state;
}

}  // namespace dhpt::scheduler
