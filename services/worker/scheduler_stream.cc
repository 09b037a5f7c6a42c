#include "services/worker/scheduler_stream.h"

namespace dhpt::worker {

void SchedulerStream::Begin(v1::WorkerService::Stub* stub) {
  stub->async()->Connect(&context_, this);
  StartRead(&inbound_);
  StartCall();
}

void SchedulerStream::Send(v1::WorkerMessage message) {
  absl::MutexLock lock(&mutex_);
  if (closing_) return;
  outbox_.push_back(std::move(message));
  if (!writing_) {
    writing_ = true;
    StartWrite(&outbox_.front());
  }
}

void SchedulerStream::Close() {
  absl::MutexLock lock(&mutex_);
  closing_ = true;
  MaybeWritesDoneLocked();
}

void SchedulerStream::MaybeWritesDoneLocked() {
  if (closing_ && !writing_ && !writes_done_) {
    writes_done_ = true;
    StartWritesDone();
  }
}

void SchedulerStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mutex_);
  outbox_.pop_front();
  if (!ok) {
    // The stream is broken; OnDone follows. Results stay in the core until acknowledged.
    outbox_.clear();
    writing_ = false;
    closing_ = true;
    writes_done_ = true;
    return;
  }
  if (!outbox_.empty()) {
    StartWrite(&outbox_.front());
  } else {
    writing_ = false;
    MaybeWritesDoneLocked();
  }
}

void SchedulerStream::OnReadDone(bool ok) {
  if (!ok) return;  // The server ended the stream; OnDone brings the status.
  on_message_(inbound_);
  StartRead(&inbound_);
}

void SchedulerStream::OnDone(const grpc::Status& status) { on_done_(status); }

}  // namespace dhpt::worker
