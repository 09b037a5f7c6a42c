#pragma once

// Wiring of a worker: the channel to the scheduler, the stream's reconnect loop (exponential
// backoff with jitter, reset after a Welcome), and heartbeats while connected.

#include <memory>
#include <random>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "services/common/channel_options.h"
#include "services/common/transport_security.h"
#include "services/worker/resource_meter.h"
#include "services/worker/scheduler_stream.h"
#include "services/worker/worker_core.h"

namespace dhpt::worker {

struct WorkerClientOptions {
  std::string scheduler_address;
  v1::Hello hello;
  KeepaliveOptions keepalive;
  ChannelSecurity security;  // Plaintext unless set (MakeChannelSecurity).
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(10);
  // Until the scheduler's Welcome says otherwise.
  absl::Duration heartbeat_interval = absl::Seconds(5);
  // The GPU whose busy share heartbeats report (not owned; null: none).
  GpuReader* gpu = nullptr;
};

class WorkerClient {
 public:
  WorkerClient(WorkerClientOptions options, WorkerCore* core);
  ~WorkerClient();

  // Connects, and reconnects whenever the stream ends, until Stop. Blocks.
  void Run();
  // Makes Run return after closing the current stream. Callable from any thread.
  void Stop();

  bool connected() const;
  int connects() const;

 private:
  void HandleMessage(const v1::SchedulerMessage& message);
  void StreamEnded(const grpc::Status& status);
  absl::Duration NextBackoff() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerClientOptions options_;
  WorkerCore* const core_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;

  mutable absl::Mutex mutex_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  bool stream_done_ ABSL_GUARDED_BY(mutex_) = false;
  bool welcomed_ ABSL_GUARDED_BY(mutex_) = false;
  int connects_ ABSL_GUARDED_BY(mutex_) = 0;
  SchedulerStream* stream_ ABSL_GUARDED_BY(mutex_) = nullptr;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mutex_);
  // Set when the Welcome changes the interval, so the heartbeat loop stops waiting out the old
  // one (the default can be longer than the scheduler's whole lease).
  bool interval_changed_ ABSL_GUARDED_BY(mutex_) = false;
  bool HeartbeatLoopShouldWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return stream_done_ || interval_changed_;
  }
  absl::Duration backoff_ ABSL_GUARDED_BY(mutex_);
  std::mt19937_64 jitter_ ABSL_GUARDED_BY(mutex_);
  // What each heartbeat reports (issue 31); used by Run's heartbeat loop only.
  WorkerUtilisationMeter utilisation_;
};

}  // namespace dhpt::worker
