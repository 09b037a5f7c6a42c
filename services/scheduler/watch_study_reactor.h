#pragma once

// One WatchStudy stream, written from the study's shared journal (watch.cc): each batch is
// what changed since the last one, concatenated from events serialised once for every watcher,
// so the method is served raw (ByteBuffer) and no event is serialised per watcher.
//
// Invariants:
// - At most one of these is outstanding: a read scheduled on the timer thread, a write in
//   flight (the outbox's one slot), or a wait for the core's OnEventsReady.
// - Batches start at most every kWatchBatchInterval: a busy study costs each watcher a
//   bounded number of writes a second however fast it changes, and what comes meanwhile joins
//   the next batch. A watcher that stops reading holds nothing but its place in the journal.
// - Finish is called once, with no write in flight. The core forgets the watch (Unwatch, or
//   before OnEnd) before OnDone; the object is freed when gRPC is done with it and no timer job
//   holds it.

#include <atomic>
#include <cstdint>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/common/timer_queue.h"
#include "services/rpc/stream_outbox.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

inline constexpr absl::Duration kWatchBatchInterval = absl::Milliseconds(50);
// A batch's events stop at about this size (one larger event still goes alone).
inline constexpr size_t kWatchBatchBytes = 1 << 20;

class WatchStudyReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer>, public StudyWatcher {
 public:
  // `allowed`: whether the caller may watch (CheckRole); if not, the stream ends with it.
  WatchStudyReactor(SchedulerCore* core, TimerQueue* timers, const grpc::ByteBuffer& request,
                    const absl::Status& allowed);

  // StudyWatcher (called under the core's lock).
  void OnEventsReady() override;
  void OnEnd(const absl::Status& status) override;

  // grpc::ServerWriteReactor.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct BufferSize {
    size_t operator()(const grpc::ByteBuffer& buffer) const { return buffer.Length(); }
  };

  // On the timer thread: the next batch from the core, written; or the end; or a wait.
  void Pump();
  void ScheduleLocked(absl::Time at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Forget();
  void EndLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Finishes the call with `status` when the outbox says it is time.
  void FinishIfDue(std::optional<absl::Status> status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Unref();

  SchedulerCore* const core_;
  TimerQueue* const timers_;
  // gRPC's reference (until OnDone) and one per scheduled timer job.
  std::atomic<int> refs_{1};
  absl::Mutex mutex_;
  uint64_t watch_id_ ABSL_GUARDED_BY(mutex_) = 0;
  // Also how the stream ends (End, TakeFinish).
  rpc::StreamOutbox<grpc::ByteBuffer, BufferSize> outbox_ ABSL_GUARDED_BY(mutex_);
  absl::Time last_batch_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
};

}  // namespace dhpt::scheduler
