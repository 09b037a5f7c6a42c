#pragma once

// The worker's logic, independent of gRPC: a queue of assigned trials run by `slots` threads,
// cancellation flags for running trials, and every finished result kept until the scheduler
// acknowledges it, across reconnects.
//
// Threading: one mutex guards the state; the outbound callback is called under it and must not
// block or call back into the core.

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/trial_runner.h"

namespace dhpt::worker {

// Told of every trial a slot starts and finishes (metrics). Called from the slot threads,
// outside the core's lock, possibly concurrently: implementations must be thread-safe.
class WorkerObserver {
 public:
  virtual ~WorkerObserver() = default;
  virtual void TrialStarted(const v1::Assign& assign) {}
  virtual void TrialFinished(const v1::Assign& assign, const v1::TrialResult& result) {}
};

struct WorkerCoreOptions {
  int slots = 1;
  // Threads each trial's trainer may use.
  int threads_per_trial = 1;
  WorkerObserver* observer = nullptr;  // May be null.
};

class WorkerCore {
 public:
  using Send = std::function<void(v1::WorkerMessage)>;

  WorkerCore(WorkerCoreOptions options, TrialRunner* runner);
  ~WorkerCore();
  WorkerCore(const WorkerCore&) = delete;
  WorkerCore& operator=(const WorkerCore&) = delete;

  // Starts the slot threads.
  void Start();
  // Cancels queued and running trials (their CANCELLED results go out if a stream is
  // attached) and joins the slot threads.
  void Stop();

  // A new stream: sends `hello`, then every unacknowledged result, then routes new messages to
  // `send` until Detach.
  void Attach(const v1::WorkerMessage& hello, Send send);
  void Detach();
  void Handle(const v1::SchedulerMessage& message);

  size_t unacknowledged_results() const;

 private:
  struct Running {
    std::shared_ptr<std::atomic<bool>> cancelled;
    int attempt = 0;
  };

  void RunSlot();
  void SendLocked(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerCoreOptions options_;
  TrialRunner* const runner_;

  mutable absl::Mutex mutex_;
  std::deque<v1::Assign> queue_ ABSL_GUARDED_BY(mutex_);
  std::multimap<uint64_t, Running> running_ ABSL_GUARDED_BY(mutex_);
  // Results the scheduler has not acknowledged, by (trial id, attempt).
  std::map<std::pair<uint64_t, int>, v1::TrialResult> unacknowledged_ ABSL_GUARDED_BY(mutex_);
  Send send_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> slots_;
};

}  // namespace dhpt::worker
