#pragma once

// One thread running jobs at their times, earliest first. A job never runs on the thread that
// posts it, so posting under a lock the job itself takes is safe. The destructor drops the jobs
// not yet due and joins.

#include <functional>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dhpt {

class TimerQueue {
 public:
  TimerQueue() : thread_([this] { Work(); }) {}
  ~TimerQueue() {
    {
      absl::MutexLock lock(&mutex_);
      stopping_ = true;
    }
    thread_.join();
  }
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  void RunAt(absl::Time when, std::function<void()> job) {
    absl::MutexLock lock(&mutex_);
    jobs_.emplace(when, std::move(job));
    changed_ = true;
  }

 private:
  void Work() {
    absl::MutexLock lock(&mutex_);
    while (!stopping_) {
      if (jobs_.empty() || jobs_.begin()->first > absl::Now()) {
        changed_ = false;
        const absl::Time until = jobs_.empty() ? absl::InfiniteFuture() : jobs_.begin()->first;
        mutex_.AwaitWithDeadline(
            absl::Condition(
                +[](TimerQueue* q) ABSL_NO_THREAD_SAFETY_ANALYSIS { return q->stopping_ || q->changed_; },
                this),
            until);
        continue;
      }
      std::function<void()> job = std::move(jobs_.begin()->second);
      jobs_.erase(jobs_.begin());
      mutex_.Unlock();
      job();
      mutex_.Lock();
    }
  }

  absl::Mutex mutex_;
  std::multimap<absl::Time, std::function<void()>> jobs_ ABSL_GUARDED_BY(mutex_);
  bool changed_ ABSL_GUARDED_BY(mutex_) = false;  // A job was posted since the thread looked.
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;  // Last: starts once the rest is built.
};

}  // namespace dhpt
