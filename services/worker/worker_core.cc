#include "services/worker/worker_core.h"

#include "services/common/logging.h"

namespace dhpt::worker {

WorkerCore::WorkerCore(WorkerCoreOptions options, TrialRunner* runner)
    : options_(options), runner_(runner) {}

WorkerCore::~WorkerCore() { Stop(); }

void WorkerCore::Start() {
  for (int i = 0; i < options_.slots; ++i) slots_.emplace_back([this] { RunSlot(); });
}

void WorkerCore::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    // Queued trials were never started: give them back so the scheduler requeues them now.
    for (const v1::Assign& assign : queue_) {
      v1::WorkerMessage message;
      v1::TrialResult& result = *message.mutable_result();
      result.set_trial_id(assign.trial_id());
      result.set_attempt(assign.attempt());
      result.set_state(v1::Trial::CANCELLED);
      result.set_error("the worker is stopping");
      SendLocked(std::move(message));
    }
    queue_.clear();
    for (auto& [id, running] : running_) running.cancelled->store(true);
  }
  for (std::thread& slot : slots_) slot.join();
  slots_.clear();
}

void WorkerCore::Attach(const v1::WorkerMessage& hello, Send send) {
  absl::MutexLock lock(&mutex_);
  send(hello);
  for (const auto& [key, result] : unacknowledged_) {
    v1::WorkerMessage message;
    *message.mutable_result() = result;
    send(std::move(message));
  }
  send_ = std::move(send);
}

void WorkerCore::Detach() {
  absl::MutexLock lock(&mutex_);
  send_ = nullptr;
}

void WorkerCore::SendLocked(v1::WorkerMessage message) {
  if (send_) send_(std::move(message));
}

void WorkerCore::Handle(const v1::SchedulerMessage& message) {
  absl::MutexLock lock(&mutex_);
  switch (message.kind_case()) {
    case v1::SchedulerMessage::kAssign:
      if (stopping_) break;
      queue_.push_back(message.assign());
      break;
    case v1::SchedulerMessage::kCancel: {
      const uint64_t id = message.cancel().trial_id();
      auto range = running_.equal_range(id);
      for (auto it = range.first; it != range.second; ++it) it->second.cancelled->store(true);
      std::erase_if(queue_, [id](const v1::Assign& a) { return a.trial_id() == id; });
      break;
    }
    case v1::SchedulerMessage::kAck:
      unacknowledged_.erase({message.ack().trial_id(), message.ack().attempt()});
      break;
    case v1::SchedulerMessage::kDrain:
      DHPT_LOG_INFO("scheduler drains: %s", message.drain().reason());
      break;
    case v1::SchedulerMessage::kWelcome:
    case v1::SchedulerMessage::KIND_NOT_SET:
      break;
  }
}

void WorkerCore::RunSlot() {
  while (true) {
    v1::Assign assign;
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](WorkerCore* core) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return core->stopping_ || !core->queue_.empty();
          },
          this));
      if (stopping_) return;
      assign = std::move(queue_.front());
      queue_.pop_front();
      running_.emplace(assign.trial_id(), Running{cancelled, assign.attempt()});
    }
    TrialContext context;
    context.threads = options_.threads_per_trial;
    context.cancelled = cancelled.get();
    context.progress = [this, &assign](int64_t step, double value) {
      v1::WorkerMessage message;
      v1::TrialProgress& progress = *message.mutable_progress();
      progress.set_trial_id(assign.trial_id());
      progress.set_attempt(assign.attempt());
      progress.set_step(step);
      progress.set_value(value);
      absl::MutexLock lock(&mutex_);
      SendLocked(std::move(message));
    };
    if (options_.observer != nullptr) options_.observer->TrialStarted(assign);
    v1::TrialResult result = runner_->Run(assign, context);
    if (options_.observer != nullptr) options_.observer->TrialFinished(assign, result);

    absl::MutexLock lock(&mutex_);
    auto range = running_.equal_range(assign.trial_id());
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second.cancelled == cancelled) {
        running_.erase(it);
        break;
      }
    }
    unacknowledged_[{result.trial_id(), result.attempt()}] = result;
    v1::WorkerMessage message;
    *message.mutable_result() = std::move(result);
    SendLocked(std::move(message));
  }
}

size_t WorkerCore::unacknowledged_results() const {
  absl::MutexLock lock(&mutex_);
  return unacknowledged_.size();
}

}  // namespace dhpt::worker
