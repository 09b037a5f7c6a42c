#include "services/worker/periodic_sampler.h"

#include <utility>

namespace dhpt::worker {

PeriodicSampler::PeriodicSampler(absl::Duration interval, std::function<void()> take)
    : interval_(interval), take_(std::move(take)), thread_([this] {
        do {
          take_();
        } while (!stop_.WaitForNotificationWithTimeout(interval_));
      }) {}

void PeriodicSampler::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dhpt::worker
