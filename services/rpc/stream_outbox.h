#pragma once

// The outbound queue of one gRPC stream reactor: the one mechanism every DHPT stream uses to
// write (the scheduler's worker sessions and WatchStudy streams, the worker's scheduler stream).
//
// The message being written lives in its own slot, apart from the pending ones, so dropping
// what waits can never free what gRPC is still writing (gRPC reads the message until
// OnWriteDone). The queue is bounded by messages and bytes: a reader that stops reading costs
// at most the bound, and the reactor decides what overflow means for its stream (end it, or
// let the peer reconnect and resynchronise). It also keeps how the stream ends: once, for the
// first reason given, and only with no write in flight (gRPC allows Finish only then).
//
// Not thread-safe: the owning reactor's mutex guards it. No gRPC here, so it is unit-tested
// without a network.

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace dhpt::rpc {

// How many bytes a message holds, for the byte bound: a protobuf message's serialised size.
struct SerializedSize {
  template <typename Message>
  size_t operator()(const Message& message) const {
    return message.ByteSizeLong();
  }
};

struct OutboxLimits {
  size_t max_messages = 4096;
  size_t max_bytes = 16 << 20;
};

// `SizeOf` measures a message (SerializedSize for protobuf messages; a raw stream's buffer
// type brings its own).
template <typename Message, typename SizeOf = SerializedSize>
class StreamOutbox {
 public:
  explicit StreamOutbox(OutboxLimits limits = {}) : limits_(limits) {}

  // Queues `message`. Returns the message to StartWrite now, or nullptr while a write is in
  // flight (it will come from OnWriteDone); RESOURCE_EXHAUSTED, queueing nothing, when the
  // messages waiting would pass a limit.
  absl::StatusOr<const Message*> Push(Message message) {
    const size_t bytes = SizeOf()(message);
    if (pending_.size() + 1 > limits_.max_messages || pending_bytes_ + bytes > limits_.max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the peer is not reading: ", pending_.size(), " messages (",
                       pending_bytes_, " bytes) wait already"));
    }
    pending_bytes_ += bytes;
    pending_.push_back(std::move(message));
    if (in_flight_) return nullptr;
    return TakeNext();
  }

  // The write of the in-flight message finished (well or not): frees its slot and returns the
  // next message to StartWrite, or nullptr when none waits.
  const Message* OnWriteDone() {
    in_flight_.reset();
    return TakeNext();
  }

  // The stream broke (a write finished with ok=false): nothing more will be written, so the
  // in-flight slot and every waiting message are forgotten, and the stream is idle for Finish.
  void Abort() {
    in_flight_.reset();
    DropPending();
  }

  // Forgets the waiting messages; never touches the one being written.
  void DropPending() {
    pending_.clear();
    pending_bytes_ = 0;
  }

  // Ends the stream with `status`, or keeps the reason given first. Returns the status to
  // Finish with when that may happen now; otherwise TakeFinish returns it once the write in
  // flight is done. Messages still waiting are written first.
  std::optional<absl::Status> End(absl::Status status) {
    if (!end_status_) end_status_ = std::move(status);
    return TakeFinish();
  }
  // The status to Finish with, once: when the stream is ending and no write is in flight.
  std::optional<absl::Status> TakeFinish() {
    if (!end_status_ || in_flight_ || finished_) return std::nullopt;
    finished_ = true;
    return end_status_;
  }
  // An end was asked for: the reactor queues and reads nothing more.
  bool ending() const { return end_status_.has_value(); }

  // No write in flight: Finish or WritesDone may be called now.
  bool idle() const { return !in_flight_.has_value(); }
  size_t pending_messages() const { return pending_.size(); }
  size_t pending_bytes() const { return pending_bytes_; }

 private:
  const Message* TakeNext() {
    if (pending_.empty()) return nullptr;
    pending_bytes_ -= SizeOf()(pending_.front());
    in_flight_.emplace(std::move(pending_.front()));
    pending_.pop_front();
    return &*in_flight_;
  }

  const OutboxLimits limits_;
  std::optional<Message> in_flight_;
  std::deque<Message> pending_;
  size_t pending_bytes_ = 0;
  std::optional<absl::Status> end_status_;
  bool finished_ = false;
};

}  // namespace dhpt::rpc
