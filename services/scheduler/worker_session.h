#pragma once

// One worker's bidirectional stream (WorkerService.Connect) on the scheduler side.
//
// Invariants:
// - At most one read in flight: StartRead is called in the constructor and from OnReadDone,
//   never once the session is closing.
// - Writes go through the bounded `outbox_`: at most one in flight. A worker that stops reading
//   until the outbox is full is cut off (RESOURCE_EXHAUSTED); its trials go back to pending.
// - Finish is called exactly once, and only when no write is in flight.
// - The core calls Send/Close only while the session is registered; OnDone unregisters it
//   (under the core's lock) before deleting `this`, so no call can arrive afterwards.
// - Reactions never block: they take `mutex_` briefly or call the core, never both at once.

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "services/rpc/stream_outbox.h"
#include "services/common/transport_security.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

class WorkerSession;

// Streams that have not said hello yet: the core does not know them, so they are closed from
// here when the scheduler shuts down (else the server would wait for them) and when they stay
// silent longer than a lease (else they would hold a call open for nothing).
class UnintroducedStreams {
 public:
  // False when the scheduler is shutting down (the caller ends the stream).
  bool Add(WorkerSession* session, absl::Time since);
  void Remove(WorkerSession* session);
  // Closes those waiting since before `cutoff`.
  void CloseSilentSince(absl::Time cutoff);
  // Closes all, and every stream added later.
  void CloseAll();

 private:
  absl::Mutex mutex_;
  absl::flat_hash_map<WorkerSession*, absl::Time> waiting_ ABSL_GUARDED_BY(mutex_);
  bool closed_ ABSL_GUARDED_BY(mutex_) = false;
};

class WorkerSession : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>,
                      public WorkerChannel {
 public:
  // `peer_names`: the names of the worker's verified TLS certificate (none without mutual TLS).
  // `priority_steps`: how far below the process's priority the threads that run this stream's
  // callbacks go (LowerCallingThreadPriority), so user calls are served before worker messages.
  WorkerSession(SchedulerCore* core, std::vector<std::string> peer_names,
                rpc::OutboxLimits limits, int priority_steps, UnintroducedStreams* unintroduced);

  // WorkerChannel
  void Send(v1::SchedulerMessage message) override;
  void Close(const absl::Status& status) override;

  // ServerBidiReactor
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void HandleMessage();
  void CloseLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Finishes the call with `status` when the outbox says it is time.
  void FinishIfDue(std::optional<absl::Status> status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Why the stream ended, for the log's "disconnected (...)" line: who ended it, and whether
  // the worker answered or its call was cut.
  std::string EndReasonLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  SchedulerCore* const core_;
  const std::vector<std::string> peer_names_;
  const int priority_steps_;
  UnintroducedStreams* const unintroduced_;
  v1::WorkerMessage inbound_;
  // Set once Hello was accepted; only the reaction thread (reads) touches it.
  uint64_t session_ = 0;

  absl::Mutex mutex_;
  // Also how the stream ends (End, TakeFinish).
  rpc::StreamOutbox<v1::SchedulerMessage> outbox_ ABSL_GUARDED_BY(mutex_);
  // The reason the scheduler ended the stream with (Close), if it did.
  std::optional<absl::Status> ended_by_scheduler_ ABSL_GUARDED_BY(mutex_);
  // The call was cancelled (OnCancel): the worker's connection dropped, or the server cut it.
  bool cut_ ABSL_GUARDED_BY(mutex_) = false;
};

// WorkerService: each Connect gets a WorkerSession.
class WorkerServiceImpl : public v1::WorkerService::CallbackService {
 public:
  // `tokens`: null when none are in use. `priority_steps`: WorkerSession's.
  WorkerServiceImpl(SchedulerCore* core, rpc::OutboxLimits limits, int priority_steps,
                    std::shared_ptr<const BearerTokens> tokens)
      : core_(core), limits_(limits), priority_steps_(priority_steps), tokens_(std::move(tokens)) {}
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  // Ends the streams that have not said hello since before `cutoff`.
  void CloseSilentSince(absl::Time cutoff) { unintroduced_.CloseSilentSince(cutoff); }
  // Ends every stream not yet known to the core, now and from now on (shutdown).
  void CloseUnintroduced() { unintroduced_.CloseAll(); }

 private:
  SchedulerCore* const core_;
  const rpc::OutboxLimits limits_;
  const int priority_steps_;
  const std::shared_ptr<const BearerTokens> tokens_;
  UnintroducedStreams unintroduced_;
};

}  // namespace dhpt::scheduler
