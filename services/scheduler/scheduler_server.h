#pragma once

// Wiring of dhpt-scheduler: the gRPC server with StudyService, WorkerService, health and
// reflection on one port, and the thread that expires worker leases.

#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "services/common/channel_options.h"
#include "services/common/transport_security.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/study_service.h"
#include "services/scheduler/worker_session.h"

namespace dhpt::scheduler {

// --worker_stream_nice's default. The kernel weighs a thread about 1.25x per step: 5 steps give
// a user call three times a worker stream's share, which kept every user call's p99 under 20 ms
// in a saturating run on a quiet machine; 10 were no faster for users and dispatched less, the
// lowered threads losing their core more often to the rest of the machine (docs/benchmarks.md,
// "Scale").
inline constexpr int kDefaultWorkerStreamNice = 5;

struct SchedulerServerOptions {
  // HOST:PORT; port 0 picks a free port (see SchedulerServer::port()).
  std::string listen_address = "0.0.0.0:50051";
  SchedulerOptions core;
  KeepaliveOptions keepalive;
  // TLS and token checks (MakeServerCredentials); plaintext when unset.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // The bearer tokens each service checks the caller's role against; null when none are in use.
  std::shared_ptr<const BearerTokens> tokens;
  // The largest request the server reads; bigger ones are refused (RESOURCE_EXHAUSTED) before
  // any handler runs. Replies may be larger (ListTrials of a long study).
  int max_receive_message_bytes = 4 << 20;
  int max_send_message_bytes = kMaxReplyBytes;
  // What may wait unwritten for one worker before it is cut off. (A watcher reads the study's
  // shared journal at its own pace: SchedulerOptions.watch_journal.)
  rpc::OutboxLimits worker_outbox{.max_messages = 4096, .max_bytes = 16 << 20};
  // How many nice steps below the user calls' threads the threads that handle worker messages
  // run (LowerCallingThreadPriority): on a busy board the kernel then serves a user's call
  // before the next worker message. 0: all alike.
  int worker_stream_nice = kDefaultWorkerStreamNice;
};

class SchedulerServer {
 public:
  // Builds the core on `store` (recovering what it holds) and starts serving.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(SchedulerServerOptions options,
                                                                StudyStore* store);
  ~SchedulerServer();

  int port() const { return port_; }
  SchedulerCore& core() { return *core_; }
  // Drains workers, ends watches and stops serving; waits at most `grace` for calls to end.
  void Shutdown(absl::Duration grace = absl::Seconds(5));

 private:
  SchedulerServer() = default;
  void ExpireLeasesUntilShutdown();

  std::unique_ptr<SchedulerCore> core_;
  std::unique_ptr<StudyServiceImpl> study_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Notification stopping_;
  std::thread lease_thread_;
  bool shut_down_ = false;
};

}  // namespace dhpt::scheduler
