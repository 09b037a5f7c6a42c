#include "services/worker/worker_core.h"

#include "absl/strings/str_cat.h"
#include "services/common/logging.h"

namespace dhpt::worker {

WorkerCore::WorkerCore(WorkerCoreOptions options, TrialRunner* runner)
    : options_(options), runner_(runner) {}

WorkerCore::~WorkerCore() { Stop(); }

void WorkerCore::Start() {
  for (int i = 0; i < options_.slots; ++i) slots_.emplace_back([this] { RunSlot(); });
  deadlines_ = std::thread([this] { WatchDeadlines(); });
}

void WorkerCore::Drain(absl::string_view reason) {
  absl::MutexLock lock(&mutex_);
  if (draining_) return;
  draining_ = std::string(reason);
  v1::WorkerMessage message;
  message.mutable_draining()->set_reason(*draining_);
  SendLocked(std::move(message));
}

void WorkerCore::GiveBackLocked(const v1::Assign& assign, absl::string_view reason) {
  v1::WorkerMessage message;
  v1::TrialResult& result = *message.mutable_result();
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_epoch(assign.epoch());
  result.set_state(v1::Trial::CANCELLED);
  result.set_error(std::string(reason));
  SendLocked(std::move(message));
}

void WorkerCore::Stop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    // Queued trials were never started: give them back so the scheduler requeues them now.
    for (const v1::Assign& assign : queue_) GiveBackLocked(assign, "the worker is stopping");
    queue_.clear();
    for (auto& [id, running] : running_) running.cancelled->store(true);
  }
  for (std::thread& slot : slots_) slot.join();
  slots_.clear();
  if (deadlines_.joinable()) deadlines_.join();
}

void WorkerCore::WatchDeadlines() {
  absl::MutexLock lock(&mutex_);
  while (!mutex_.AwaitWithTimeout(absl::Condition(&stopping_), options_.deadline_check_interval)) {
    const absl::Time now = absl::Now();
    for (auto& [id, running] : running_) {
      if (!running.timed_out && running.deadline < now) {
        running.timed_out = true;
        running.cancelled->store(true);
      }
    }
  }
}

void WorkerCore::Attach(const v1::WorkerMessage& hello, Send send) {
  absl::MutexLock lock(&mutex_);
  v1::WorkerMessage introduction = hello;
  for (const auto& [id, running] : running_) {
    v1::TrialAttempt& held = *introduction.mutable_hello()->add_running();
    held.set_trial_id(id);
    held.set_attempt(running.attempt);
    held.set_epoch(running.epoch);
  }
  for (const v1::Assign& assign : queue_) {
    v1::TrialAttempt& held = *introduction.mutable_hello()->add_running();
    held.set_trial_id(assign.trial_id());
    held.set_attempt(assign.attempt());
    held.set_epoch(assign.epoch());
  }
  // Finished while no stream was up: held too, until their results (sent next) are stored.
  for (const auto& [key, result] : unacknowledged_) {
    v1::TrialAttempt& held = *introduction.mutable_hello()->add_running();
    held.set_trial_id(result.trial_id());
    held.set_attempt(result.attempt());
    held.set_epoch(result.epoch());
  }
  send(introduction);
  if (draining_) {
    v1::WorkerMessage message;
    message.mutable_draining()->set_reason(*draining_);
    send(std::move(message));
  }
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
      // Crossed with our Drain: hand it straight back rather than drop it.
      if (stopping_ || draining_) {
        GiveBackLocked(message.assign(), "the worker is stopping");
        break;
      }
      queue_.push_back(message.assign());
      break;
    case v1::SchedulerMessage::kCancel: {
      const v1::Cancel& cancel = message.cancel();
      const uint64_t id = cancel.trial_id();
      auto matches = [&cancel](int attempt, uint64_t epoch) {
        return cancel.attempt() == 0 || (attempt == cancel.attempt() && epoch == cancel.epoch());
      };
      auto range = running_.equal_range(id);
      for (auto it = range.first; it != range.second; ++it) {
        if (matches(it->second.attempt, it->second.epoch)) it->second.cancelled->store(true);
      }
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->trial_id() != id || !matches(it->attempt(), it->epoch())) {
          ++it;
          continue;
        }
        GiveBackLocked(*it, "cancelled before it started");  // Settled, never silently dropped.
        it = queue_.erase(it);
      }
      // A finished attempt the scheduler will not take (another scheduler's, or refused):
      // resending its result on every reconnect would only be refused again.
      std::erase_if(unacknowledged_, [&](const auto& entry) {
        const v1::TrialResult& result = entry.second;
        return result.trial_id() == id && matches(result.attempt(), result.epoch());
      });
      break;
    }
    case v1::SchedulerMessage::kAck:
      unacknowledged_.erase(
          {message.ack().epoch(), message.ack().trial_id(), message.ack().attempt()});
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
      Running running{cancelled, assign.attempt(), assign.epoch()};
      if (assign.timeout_ms() > 0) running.deadline = absl::Now() + absl::Milliseconds(assign.timeout_ms());
      running_.emplace(assign.trial_id(), running);
      // From here on, losing this attempt costs the trial one of its attempts.
      v1::WorkerMessage started;
      started.mutable_started()->set_trial_id(assign.trial_id());
      started.mutable_started()->set_attempt(assign.attempt());
      started.mutable_started()->set_epoch(assign.epoch());
      SendLocked(std::move(started));
    }
    TrialContext context;
    context.threads = options_.threads_per_trial;
    context.cancelled = cancelled.get();
    absl::Time last_progress = absl::InfinitePast();
    context.progress = [this, &assign, &last_progress](int64_t step, double value) {
      const absl::Time now = absl::Now();
      if (now - last_progress < options_.progress_interval) return;
      last_progress = now;
      v1::WorkerMessage message;
      v1::TrialProgress& progress = *message.mutable_progress();
      progress.set_trial_id(assign.trial_id());
      progress.set_attempt(assign.attempt());
      progress.set_epoch(assign.epoch());
      progress.set_step(step);
      progress.set_value(value);
      absl::MutexLock lock(&mutex_);
      SendLocked(std::move(message));
    };
    if (options_.observer != nullptr) options_.observer->TrialStarted(assign);
    v1::TrialResult result = runner_->Run(assign, context);
    result.set_epoch(assign.epoch());

    {
      absl::MutexLock lock(&mutex_);
      auto range = running_.equal_range(assign.trial_id());
      for (auto it = range.first; it != range.second; ++it) {
        if (it->second.cancelled != cancelled) continue;
        if (it->second.timed_out) {
          result.set_state(v1::Trial::FAILED);
          result.set_error(absl::StrCat(
              "stopped after the study's trial_timeout of ",
              absl::FormatDuration(absl::Milliseconds(assign.timeout_ms()))));
        }
        running_.erase(it);
        break;
      }
      // In the same critical section: a stream attached now lists the attempt either way.
      unacknowledged_[{result.epoch(), result.trial_id(), result.attempt()}] = result;
    }
    if (options_.observer != nullptr) options_.observer->TrialFinished(assign, result);
    absl::MutexLock lock(&mutex_);
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
