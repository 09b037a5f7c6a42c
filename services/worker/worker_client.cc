#include "services/worker/worker_client.h"

#include "services/common/grpc_status.h"
#include "services/common/logging.h"

namespace dhpt::worker {

WorkerClient::WorkerClient(WorkerClientOptions options, WorkerCore* core)
    : options_(std::move(options)),
      core_(core),
      heartbeat_interval_(options_.heartbeat_interval),
      backoff_(options_.initial_backoff),
      jitter_(std::random_device{}()),
      utilisation_(options_.gpu) {
  grpc::ChannelArguments arguments = ClientChannelArguments(options_.keepalive);
  options_.security.ApplyTo(arguments);
  channel_ = grpc::CreateCustomChannel(options_.scheduler_address, options_.security.credentials,
                                       arguments);
  stub_ = v1::WorkerService::NewStub(channel_);
}

WorkerClient::~WorkerClient() { Stop(); }

void WorkerClient::Run() {
  v1::WorkerMessage hello;
  *hello.mutable_hello() = options_.hello;
  while (true) {
    auto stream = std::make_unique<SchedulerStream>(
        [this](const v1::SchedulerMessage& m) { HandleMessage(m); },
        [this](const grpc::Status& s) { StreamEnded(s); });
    {
      absl::MutexLock lock(&mutex_);
      if (stopping_) return;
      stream_done_ = false;
      welcomed_ = false;
      ++connects_;
    }
    // Begun before Stop can see it: closing a stream whose call has not started dereferences
    // the call gRPC has not bound yet (the worker crashed when stopped while reconnecting).
    stream->Begin(stub_.get());
    core_->Attach(hello, [s = stream.get()](v1::WorkerMessage m) { s->Send(std::move(m)); });

    // Heartbeats until the stream ends; Stop closes it.
    bool closed = false;
    absl::MutexLock lock(&mutex_);
    stream_ = stream.get();
    if (stopping_) {
      // Stop came while the stream was opening and could not close it: close it here.
      closed = true;
      stream->Close();
    }
    while (!stream_done_) {
      const absl::Duration interval = stopping_ ? absl::Seconds(1) : heartbeat_interval_;
      mutex_.AwaitWithTimeout(absl::Condition(this, &WorkerClient::HeartbeatLoopShouldWake), interval);
      if (stream_done_) break;
      if (interval_changed_) {
        interval_changed_ = false;
        continue;
      }
      if (stopping_) {
        // Half-close first; a scheduler that does not answer within a second is cut off.
        if (closed) stream->Cancel();
        closed = true;
        stream->Close();
      } else {
        v1::WorkerMessage heartbeat;
        const WorkerUtilisationSample sample = utilisation_.Sample();
        v1::WorkerUtilisation& u = *heartbeat.mutable_heartbeat()->mutable_utilisation();
        u.set_cpu_cores(sample.cpu_cores);
        u.set_memory_bytes(static_cast<uint64_t>(sample.rss_bytes));
        if (sample.gpu_percent) u.set_gpu_percent(*sample.gpu_percent);
        u.set_interval_ms(std::max<int64_t>(1, sample.interval.count()));
        stream->Send(std::move(heartbeat));
      }
    }
    stream_ = nullptr;
    mutex_.Unlock();
    core_->Detach();
    stream.reset();
    mutex_.Lock();
    if (stopping_) return;
    const absl::Duration wait = NextBackoff();
    mutex_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
  }
}

absl::Duration WorkerClient::NextBackoff() {
  if (welcomed_) backoff_ = options_.initial_backoff;
  const absl::Duration base = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  // +-20% so that workers cut off together do not return together.
  const double jitter = 0.8 + 0.4 * std::uniform_real_distribution<double>(0, 1)(jitter_);
  return base * jitter;
}

void WorkerClient::HandleMessage(const v1::SchedulerMessage& message) {
  if (message.has_welcome()) {
    absl::MutexLock lock(&mutex_);
    welcomed_ = true;
    if (message.welcome().heartbeat_interval_ms() > 0) {
      heartbeat_interval_ = absl::Milliseconds(message.welcome().heartbeat_interval_ms());
      interval_changed_ = true;
    }
  }
  core_->Handle(message);
}

void WorkerClient::StreamEnded(const grpc::Status& status) {
  absl::MutexLock lock(&mutex_);
  if (!stopping_) {
    DHPT_LOG_INFO("stream to %s ended: %s", options_.scheduler_address,
                  FromGrpcStatus(status).ToString());
  }
  stream_done_ = true;
}

void WorkerClient::Stop() {
  absl::MutexLock lock(&mutex_);
  if (stopping_) return;
  stopping_ = true;
  if (stream_ != nullptr) stream_->Close();
}

bool WorkerClient::connected() const {
  absl::MutexLock lock(&mutex_);
  return stream_ != nullptr && welcomed_ && !stream_done_;
}

int WorkerClient::connects() const {
  absl::MutexLock lock(&mutex_);
  return connects_;
}

}  // namespace dhpt::worker
