#include "services/scheduler/watch_study_reactor.h"

#include <cstring>

#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"

namespace dhpt::scheduler {
namespace {

// The batch as one WatchStudyResponse: its `events` entries are framed already.
grpc::ByteBuffer Concatenate(const std::vector<WatchEventPtr>& events) {
  size_t size = 0;
  for (const WatchEventPtr& event : events) size += event->framed.size();
  grpc::Slice slice(size);
  uint8_t* out = const_cast<uint8_t*>(slice.begin());
  for (const WatchEventPtr& event : events) {
    std::memcpy(out, event->framed.data(), event->framed.size());
    out += event->framed.size();
  }
  return grpc::ByteBuffer(&slice, 1);
}

absl::StatusOr<v1::WatchStudyRequest> ParseRequest(const grpc::ByteBuffer& raw) {
  grpc::ByteBuffer copy(raw);
  v1::WatchStudyRequest request;
  grpc::Status parsed =
      grpc::SerializationTraits<v1::WatchStudyRequest>::Deserialize(&copy, &request);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a WatchStudyRequest: ", parsed.error_message()));
  }
  return request;
}

}  // namespace

WatchStudyReactor::WatchStudyReactor(SchedulerCore* core, TimerQueue* timers,
                                     const grpc::ByteBuffer& raw, const absl::Status& allowed)
    : core_(core), timers_(timers), outbox_(rpc::OutboxLimits{.max_messages = 1, .max_bytes = ~size_t{0}}) {
  absl::StatusOr<uint64_t> id = [&]() -> absl::StatusOr<uint64_t> {
    if (!allowed.ok()) return allowed;
    absl::StatusOr<v1::WatchStudyRequest> request = ParseRequest(raw);
    if (!request.ok()) return request.status();
    return core_->Watch(request->name(),
                        WatchOptions{.after_position = request->after_position(),
                                     .summaries_only = request->summaries_only()},
                        this);
  }();
  absl::MutexLock lock(&mutex_);
  if (!id.ok()) {
    EndLocked(id.status());
    return;
  }
  watch_id_ = *id;
  ScheduleLocked(absl::Now());
}

void WatchStudyReactor::OnEventsReady() {
  absl::MutexLock lock(&mutex_);
  if (!outbox_.ending()) ScheduleLocked(last_batch_ + kWatchBatchInterval);
}

void WatchStudyReactor::OnEnd(const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  watch_id_ = 0;  // The core has forgotten us already.
  EndLocked(status);
}

void WatchStudyReactor::ScheduleLocked(absl::Time at) {
  refs_.fetch_add(1);
  timers_->RunAt(at, [this] {
    Pump();
    Unref();
  });
}

void WatchStudyReactor::Pump() {
  uint64_t id;
  {
    absl::MutexLock lock(&mutex_);
    if (outbox_.ending()) return;
    id = watch_id_;
  }
  // Not under our lock: the core calls us under its own.
  absl::StatusOr<WatchRead> read = core_->ReadWatch(id, kWatchBatchBytes);
  absl::MutexLock lock(&mutex_);
  if (outbox_.ending()) return;
  if (!read.ok()) {
    EndLocked(read.status());
  } else if (!read->events.empty() || read->up_to_date) {
    last_batch_ = absl::Now();
    absl::StatusOr<const grpc::ByteBuffer*> next = outbox_.Push(Concatenate(read->events));
    if (next.ok() && *next != nullptr) StartWrite(*next);
  } else if (read->ended) {
    watch_id_ = 0;  // Forgotten by the core with its last read.
    EndLocked(absl::OkStatus());
  } else if (read->retry_after > absl::ZeroDuration()) {
    ScheduleLocked(absl::Now() + read->retry_after);
  }
  // Otherwise the core calls OnEventsReady when there is more.
}

void WatchStudyReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mutex_);
  if (!ok) {
    outbox_.Abort();
    EndLocked(absl::UnavailableError("writing to the watcher failed"));
    return;
  }
  outbox_.OnWriteDone();  // Nothing waits: a batch is pushed only with none in flight.
  if (outbox_.ending()) {
    FinishIfDue(outbox_.TakeFinish());
    return;
  }
  ScheduleLocked(last_batch_ + kWatchBatchInterval);
}

void WatchStudyReactor::OnCancel() {
  Forget();
  absl::MutexLock lock(&mutex_);
  EndLocked(absl::CancelledError("the watcher went away"));
}

void WatchStudyReactor::OnDone() {
  Forget();
  Unref();
}

void WatchStudyReactor::Forget() {
  uint64_t id;
  {
    absl::MutexLock lock(&mutex_);
    id = watch_id_;
    watch_id_ = 0;
  }
  if (id != 0) core_->Unwatch(id);
}

void WatchStudyReactor::EndLocked(const absl::Status& status) {
  // The first reason stands. Also when ending already: a write that failed after the end was
  // asked for leaves the outbox idle, and nothing else would finish the call.
  FinishIfDue(outbox_.End(status));
}

void WatchStudyReactor::FinishIfDue(std::optional<absl::Status> status) {
  if (status) Finish(ToGrpcStatus(*status));
}

void WatchStudyReactor::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

}  // namespace dhpt::scheduler
