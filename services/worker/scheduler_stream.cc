#include "services/worker/scheduler_stream.h"

namespace dhpt::worker {

void SchedulerStream::Begin(v1::WorkerService::Stub* stub) {
  stub->async()->Connect(&context_, this);
  AddHold();  // Removed by StopSendingLocked.
  StartRead(&inbound_);
  StartCall();
}

void SchedulerStream::Send(v1::WorkerMessage message) {
  absl::MutexLock lock(&mutex_);
  if (closing_) return;
  absl::StatusOr<const v1::WorkerMessage*> next = outbox_.Push(std::move(message));
  if (!next.ok()) {
    // The scheduler does not read: start over on a new stream rather than queue without end.
    StopSendingLocked();
    context_.TryCancel();
  } else if (*next != nullptr) {
    StartWrite(*next);
  }
}

void SchedulerStream::Close() {
  absl::MutexLock lock(&mutex_);
  // Closed before, or broken (the hold is gone): the call may have finished already, and an
  // operation started on a finished call runs on freed memory.
  if (closing_) return;
  closing_ = true;
  MaybeWritesDoneLocked();  // Still under our hold; else OnWriteDone starts it.
  StopSendingLocked();
}

void SchedulerStream::StopSendingLocked() {
  closing_ = true;
  if (!hold_removed_) {
    hold_removed_ = true;
    RemoveHold();
  }
}

void SchedulerStream::MaybeWritesDoneLocked() {
  if (closing_ && outbox_.idle() && !writes_done_) {
    writes_done_ = true;
    StartWritesDone();
  }
}

void SchedulerStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mutex_);
  if (!ok) {
    // The stream is broken; OnDone follows. Results stay in the core until acknowledged.
    outbox_.Abort();
    writes_done_ = true;
    StopSendingLocked();
    return;
  }
  const v1::WorkerMessage* next = outbox_.OnWriteDone();
  if (next != nullptr) {
    StartWrite(next);
  } else {
    MaybeWritesDoneLocked();
  }
}

void SchedulerStream::OnReadDone(bool ok) {
  if (!ok) {
    // The server ended the stream; OnDone brings the status once the hold is gone.
    absl::MutexLock lock(&mutex_);
    StopSendingLocked();
    return;
  }
  on_message_(inbound_);
  StartRead(&inbound_);
}

void SchedulerStream::OnDone(const grpc::Status& status) { on_done_(status); }

}  // namespace dhpt::worker
