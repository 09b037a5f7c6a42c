#pragma once

// What the scheduler core's tests share: a worker channel that records what the core sends (a
// fake behind the WorkerChannel interface), a worker's hello, and every trial of a study.

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "google/protobuf/text_format.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

// Records what the core sends to one worker (a fake behind the WorkerChannel interface).
// Acknowledgements arrive from the store's writer thread, hence the lock.
class RecordingChannel : public WorkerChannel {
 public:
  void Send(v1::SchedulerMessage message) override {
    absl::MutexLock lock(&mutex_);
    sent_.push_back(std::move(message));
  }
  void Close(const absl::Status& status) override {
    absl::MutexLock lock(&mutex_);
    closed_ = status;
  }

  std::vector<v1::Assign> Assigns() const {
    absl::MutexLock lock(&mutex_);
    std::vector<v1::Assign> out;
    for (const auto& m : sent_) if (m.has_assign()) out.push_back(m.assign());
    return out;
  }
  int Count(v1::SchedulerMessage::KindCase kind) const {
    absl::MutexLock lock(&mutex_);
    int n = 0;
    for (const auto& m : sent_) n += m.kind_case() == kind;
    return n;
  }
  std::vector<v1::SchedulerMessage> sent() const {
    absl::MutexLock lock(&mutex_);
    return sent_;
  }
  std::optional<absl::Status> closed() const {
    absl::MutexLock lock(&mutex_);
    return closed_;
  }

 private:
  mutable absl::Mutex mutex_;
  std::vector<v1::SchedulerMessage> sent_ ABSL_GUARDED_BY(mutex_);
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mutex_);
};

// A Branin FUNCTION study of `max_trials` trials.
inline v1::StudySpec FunctionStudy(const std::string& name, int max_trials) {
  v1::StudySpec spec;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } })pb", &spec);
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  return spec;
}

// Every trial of `study` in `state` (all pages).
inline std::vector<v1::Trial> AllTrials(SchedulerCore& core, const std::string& study,
                                 v1::Trial::State state = v1::Trial::STATE_UNSPECIFIED) {
  std::vector<v1::Trial> trials;
  for (std::string token;;) {
    absl::StatusOr<ListPage<v1::Trial>> page = core.ListTrials(study, state, 0, token);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) return trials;
    trials.insert(trials.end(), page->items.begin(), page->items.end());
    if ((token = page->next_page_token).empty()) return trials;
  }
}

inline v1::Hello Hello(const std::string& id, int slots,
                std::vector<v1::Model::Kind> models = {v1::Model::FUNCTION}) {
  v1::Hello hello;
  hello.set_worker_id(id);
  hello.mutable_capabilities()->set_slots(slots);
  hello.mutable_capabilities()->set_device_kind(v1::WorkerCapabilities::CPU);
  for (auto m : models) hello.mutable_capabilities()->add_models(m);
  return hello;
}

// A progress report of the attempt `assign`: `value` at `step`.
inline v1::TrialProgress Progress(const v1::Assign& assign, int64_t step, double value) {
  v1::TrialProgress progress;
  progress.set_trial_id(assign.trial_id());
  progress.set_attempt(assign.attempt());
  progress.set_epoch(assign.epoch());
  progress.set_step(step);
  progress.set_value(value);
  return progress;
}

// The attempt `assign` names, as a worker acknowledges, drops or hands it back.
inline v1::TrialAttempt Attempt(const v1::Assign& assign) {
  v1::TrialAttempt attempt;
  attempt.set_trial_id(assign.trial_id());
  attempt.set_attempt(assign.attempt());
  attempt.set_epoch(assign.epoch());
  return attempt;
}

}  // namespace dhpt::scheduler
