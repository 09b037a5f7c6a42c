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
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
  // Progress of one trial goes out at most this often; the values between are dropped (the
  // scheduler needs the trend, not every step, and a chatty trainer must not flood it).
  absl::Duration progress_interval = absl::Milliseconds(100);
  // How often trial deadlines are checked.
  absl::Duration deadline_check_interval = absl::Milliseconds(100);
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
  // Tells the scheduler (now, and on every later stream) to assign nothing new.
  void Drain(absl::string_view reason);
  // Cancels queued and running trials (their CANCELLED results go out if a stream is
  // attached) and joins the slot threads.
  void Stop();

  // A new stream: sends `hello` with the attempts this worker still holds (so the scheduler
  // leaves them with it), then every unacknowledged result, then routes new messages to `send`
  // until Detach.
  void Attach(const v1::WorkerMessage& hello, Send send);
  void Detach();
  void Handle(const v1::SchedulerMessage& message);

  size_t unacknowledged_results() const;

 private:
  struct Running {
    std::shared_ptr<std::atomic<bool>> cancelled;
    int attempt = 0;
    uint64_t epoch = 0;  // Of the scheduler that assigned it.
    absl::Time deadline = absl::InfiniteFuture();
    bool timed_out = false;
  };

  void RunSlot();
  // Stops the trials past their deadline; runs until Stop.
  void WatchDeadlines();
  // Hands an assignment back unstarted (CANCELLED result): the scheduler requeues it at no cost.
  void GiveBackLocked(const v1::Assign& assign, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void SendLocked(v1::WorkerMessage message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerCoreOptions options_;
  TrialRunner* const runner_;

  mutable absl::Mutex mutex_;
  std::deque<v1::Assign> queue_ ABSL_GUARDED_BY(mutex_);
  std::multimap<uint64_t, Running> running_ ABSL_GUARDED_BY(mutex_);
  // Results the scheduler has not acknowledged, by (epoch, trial id, attempt).
  std::map<std::tuple<uint64_t, uint64_t, int>, v1::TrialResult> unacknowledged_
      ABSL_GUARDED_BY(mutex_);
  Send send_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<std::string> draining_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::thread> slots_;
  std::thread deadlines_;
};

}  // namespace dhpt::worker
