#pragma once

// The one background sampling loop of a trial's telemetry (GPU load, power rails): calls `take`
// at once, so that even a trial shorter than the interval has a figure, then every `interval`
// until Stop. What a sample means and how samples add up belongs to the caller.

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace dhpt::worker {

class PeriodicSampler {
 public:
  PeriodicSampler(absl::Duration interval, std::function<void()> take);
  ~PeriodicSampler() { Stop(); }
  PeriodicSampler(const PeriodicSampler&) = delete;
  PeriodicSampler& operator=(const PeriodicSampler&) = delete;

  // Returns once the loop has ended: no `take` runs after it. Idempotent; from one thread.
  void Stop();

 private:
  const absl::Duration interval_;
  const std::function<void()> take_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace dhpt::worker
