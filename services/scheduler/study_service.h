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

#include "dhpt/v1/study_service.grpc.pb.h"
#include "services/common/timer_queue.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

// Threads that serve the user calls' completion queue. A call's handler runs on one of them
// (and blocks it while it reads the store), so a few slow calls do not hold up the rest;
// SuggestTrials holds none while it waits for a suggestion.
inline constexpr int kUserCallThreads = 4;

class StudyServiceImpl
    : public v1::StudyService::WithRawCallbackMethod_WatchStudy<v1::StudyService::AsyncService> {
 public:
  explicit StudyServiceImpl(SchedulerCore* core) : core_(core) {}
  ~StudyServiceImpl() override;

  // Serves the unary methods from `queue` (the builder's, added before BuildAndStart) on
  // kUserCallThreads threads. Call once, after the server started.
  void Start(std::unique_ptr<grpc::ServerCompletionQueue> queue);
  // After the server's Shutdown: ends the queue and joins its threads.
  void Stop();

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

  SchedulerCore* const core_;
  // Paces the WatchStudy streams' batches.
  TimerQueue watch_timers_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::vector<std::thread> threads_;
};

}  // namespace dhpt::scheduler
