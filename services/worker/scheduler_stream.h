#pragma once

// The worker's side of one WorkerService.Connect stream.
//
// Invariants:
// - At most one read in flight: StartRead in Begin and from OnReadDone.
// - Writes go through the bounded `outbox_`, at most one in flight. A scheduler that stops
//   reading until it is full gets the stream cancelled: results stay in the worker's core until
//   acknowledged and go out again on the next stream.
// - A hold (AddHold in Begin) keeps the call from finishing while Send may still write; it is
//   removed once, when the stream closes or breaks, and every Send after that is dropped. So
//   no write ever starts on a finished call.
// - WritesDone is started once, only when no write is in flight, and only under the hold or
//   from a reaction (OnWriteDone): Close after the stream broke or closed starts nothing.
// - OnDone is the last reaction and touches nothing of `this` after calling `on_done_`, so the
//   owner may destroy the stream as soon as it has been told.

#include <functional>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "services/rpc/stream_outbox.h"

namespace dhpt::worker {

class SchedulerStream
    : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  using OnMessage = std::function<void(const v1::SchedulerMessage&)>;
  using OnDoneCallback = std::function<void(const grpc::Status&)>;

  SchedulerStream(OnMessage on_message, OnDoneCallback on_done, rpc::OutboxLimits limits = {})
      : on_message_(std::move(on_message)), on_done_(std::move(on_done)), outbox_(limits) {}

  // Opens the stream on `stub`.
  void Begin(v1::WorkerService::Stub* stub);
  // Queues a message; never blocks. Dropped after Close.
  void Send(v1::WorkerMessage message);
  // Half-closes after the queued messages; the server then ends the stream. Callable from any
  // thread after Begin, any number of times, also once the stream has ended.
  void Close();
  // Ends the stream now.
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  void MaybeWritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // No Send writes from now on; lets the call finish once its operations have.
  void StopSendingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const OnMessage on_message_;
  const OnDoneCallback on_done_;
  grpc::ClientContext context_;
  v1::SchedulerMessage inbound_;

  absl::Mutex mutex_;
  rpc::StreamOutbox<v1::WorkerMessage> outbox_ ABSL_GUARDED_BY(mutex_);
  bool closing_ ABSL_GUARDED_BY(mutex_) = false;
  bool hold_removed_ ABSL_GUARDED_BY(mutex_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace dhpt::worker
