#pragma once

// A fixed set of threads running posted jobs in order. The destructor finishes the queued
// jobs' threads: it stops taking new jobs, drops those not started and joins.

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace dhpt {

class WorkQueue {
 public:
  explicit WorkQueue(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~WorkQueue() {
    {
      absl::MutexLock lock(&mutex_);
      stopping_ = true;
      jobs_.clear();
    }
    for (std::thread& thread : threads_) thread.join();
  }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Post(std::function<void()> job) {
    absl::MutexLock lock(&mutex_);
    if (!stopping_) jobs_.push_back(std::move(job));
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> job;
      {
        absl::MutexLock lock(&mutex_);
        mutex_.Await(absl::Condition(
            +[](WorkQueue* q) ABSL_NO_THREAD_SAFETY_ANALYSIS { return q->stopping_ || !q->jobs_.empty(); },
            this));
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  absl::Mutex mutex_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace dhpt
