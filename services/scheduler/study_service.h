#pragma once

// StudyService: translates the user-facing RPCs into SchedulerCore calls.
//
// User calls never queue behind worker streams. gRPC 1.51 runs every callback method of the
// process (each worker stream's reads and writes) on two shared "nexting" threads, in arrival
// order; on a saturated cluster a GetStudy waited there 0.1-0.3 s behind thousands of worker
// messages while its handler took 0.3 ms (docs/benchmarks.md, "Scale"). So the unary methods
// are served the async way, on their own completion queue and kUserCallThreads threads of
// their own. WatchStudy stays a raw callback stream: its batches are written from events
// serialised once (watch_study_reactor.h) and it waits on nothing.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "services/common/timer_queue.h"
#include "services/common/transport_security.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

// Threads that serve the user calls' completion queue. A call's handler runs on one of them
// (and blocks it while it reads the store), so a few slow calls do not hold up the rest;
// SuggestTrials holds none while it waits for a suggestion.
inline constexpr int kUserCallThreads = 4;

// At the stop, how long no user call may arrive (and none be in a handler) before the server's
// Shutdown begins: a client answered "shutting down; retry" backs off for longer (the Python
// client 25-50 ms at first, growing), so its next try finds the port closed (UNAVAILABLE).
inline constexpr absl::Duration kShutdownQuiet = absl::Milliseconds(100);

class StudyServiceImpl
    : public v1::StudyService::WithRawCallbackMethod_WatchStudy<v1::StudyService::AsyncService> {
 public:
  // `tokens`: null when none are in use (every caller is a user).
  StudyServiceImpl(SchedulerCore* core, std::shared_ptr<const BearerTokens> tokens)
      : core_(core), tokens_(std::move(tokens)) {}
  ~StudyServiceImpl() override;

  // Serves the unary methods from `queue` (the builder's, added before BuildAndStart) on
  // kUserCallThreads threads. Call once, after the server started.
  void Start(std::unique_ptr<grpc::ServerCompletionQueue> queue);
  // Before the server's Shutdown. gRPC's Shutdown cancels (a bare CANCELLED) every call it has
  // received but not yet handed to a handler, and each method has one call waiting for the
  // next of its kind, so under load calls queue there. From now on every call that reaches a
  // handler is answered UNAVAILABLE "the scheduler is shutting down; retry" (the calls already
  // in a handler end as they would); returns once none is in a handler and none came for
  // kShutdownQuiet, or at `deadline`.
  void Refuse(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mutex_);
  // After the server's Shutdown: ends the queue and joins its threads.
  void Stop();

  // For each call that reaches its handler: false when it is to be refused (Refuse). A call
  // admitted calls Release when gRPC is done with its answer.
  bool Admit();
  void Release();
  // OK when the call carries the users' token (or none are in use); every method checks it.
  absl::Status CheckUser(const grpc::ServerContextBase& context) const {
    return CheckRole(tokens_.get(), context, kUserRole);
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchStudy(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request) override;

  // A call waiting on, or being answered from, the user calls' queue (study_service.cc).
  class Call {
   public:
    virtual ~Call() = default;
    virtual void Proceed(bool ok) = 0;
  };

 private:
  void ListenForEveryMethod();
  // False at `deadline` (Refuse).
  bool QueueFlushed(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mutex_);

  SchedulerCore* const core_;
  const std::shared_ptr<const BearerTokens> tokens_;
  // Paces the WatchStudy streams' batches.
  TimerQueue watch_timers_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::vector<std::thread> threads_;

  absl::Mutex mutex_;
  bool refusing_ ABSL_GUARDED_BY(mutex_) = false;
  int handling_ ABSL_GUARDED_BY(mutex_) = 0;  // Admitted calls not yet answered.
  absl::Time last_call_ ABSL_GUARDED_BY(mutex_);  // While refusing: the latest call's arrival.
};

}  // namespace dhpt::scheduler
