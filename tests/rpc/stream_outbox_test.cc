#include "services/rpc/stream_outbox.h"

#include <gtest/gtest.h>

#include "dhpt/v1/study_service.pb.h"

namespace dhpt::rpc {
namespace {

v1::StudyEvent Event(const std::string& study) {
  v1::StudyEvent event;
  event.mutable_study()->mutable_spec()->set_name(study);
  return event;
}

TEST(StreamOutboxTest, OneWriteInFlightAndTheRestInOrder) {
  StreamOutbox<v1::StudyEvent> outbox;
  EXPECT_TRUE(outbox.idle());
  absl::StatusOr<const v1::StudyEvent*> first = outbox.Push(Event("a"));
  ASSERT_TRUE(first.ok());
  ASSERT_NE(*first, nullptr);
  EXPECT_EQ((*first)->study().spec().name(), "a");
  EXPECT_FALSE(outbox.idle());
  EXPECT_EQ(*outbox.Push(Event("b")), nullptr);  // Waits for the write in flight.
  EXPECT_EQ(*outbox.Push(Event("c")), nullptr);
  EXPECT_EQ(outbox.OnWriteDone()->study().spec().name(), "b");
  EXPECT_EQ(outbox.OnWriteDone()->study().spec().name(), "c");
  EXPECT_EQ(outbox.OnWriteDone(), nullptr);
  EXPECT_TRUE(outbox.idle());
}

// The Ctrl-C crash: a cancel dropped the queue, freeing the message gRPC was still writing.
TEST(StreamOutboxTest, DroppingPendingNeverTouchesTheMessageInFlight) {
  StreamOutbox<v1::StudyEvent> outbox;
  const v1::StudyEvent* writing = *outbox.Push(Event(std::string(1000, 'x')));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(outbox.Push(Event("later")).ok());
  outbox.DropPending();
  EXPECT_EQ(outbox.pending_messages(), 0u);
  EXPECT_EQ(outbox.pending_bytes(), 0u);
  EXPECT_EQ(writing->study().spec().name(), std::string(1000, 'x'));  // Still alive.
  EXPECT_FALSE(outbox.idle());
  EXPECT_EQ(outbox.OnWriteDone(), nullptr);  // The late OnWriteDone(false) finds nothing.
  EXPECT_TRUE(outbox.idle());
}

// A failed write with messages waiting: nothing more will be written, and the stream must be
// idle so that Finish (and so OnDone) can still happen.
TEST(StreamOutboxTest, AbortLeavesABrokenStreamIdle) {
  StreamOutbox<v1::StudyEvent> outbox;
  ASSERT_TRUE(outbox.Push(Event("in flight")).ok());
  ASSERT_TRUE(outbox.Push(Event("waits")).ok());
  outbox.Abort();
  EXPECT_TRUE(outbox.idle());
  EXPECT_EQ(outbox.pending_messages(), 0u);
}

// Ending: once, with the first reason, and never with a write in flight; what waits is
// written first.
TEST(StreamOutboxTest, EndsOnceWithTheFirstReasonAfterTheWritesInFlight) {
  StreamOutbox<v1::StudyEvent> outbox;
  ASSERT_TRUE(outbox.Push(Event("in flight")).ok());
  ASSERT_TRUE(outbox.Push(Event("waits")).ok());
  EXPECT_EQ(outbox.End(absl::CancelledError("first")), std::nullopt);  // A write is in flight.
  EXPECT_TRUE(outbox.ending());
  EXPECT_EQ(outbox.End(absl::UnavailableError("second")), std::nullopt);
  EXPECT_EQ(outbox.TakeFinish(), std::nullopt);
  ASSERT_NE(outbox.OnWriteDone(), nullptr);  // "waits" is written before the end.
  EXPECT_EQ(outbox.TakeFinish(), std::nullopt);
  EXPECT_EQ(outbox.OnWriteDone(), nullptr);
  EXPECT_EQ(outbox.TakeFinish(), absl::CancelledError("first"));
  EXPECT_EQ(outbox.TakeFinish(), std::nullopt);  // Finish is called once.
  EXPECT_EQ(outbox.End(absl::InternalError("late")), std::nullopt);
}

TEST(StreamOutboxTest, AnIdleOrBrokenStreamEndsAtOnce) {
  StreamOutbox<v1::StudyEvent> idle;
  EXPECT_FALSE(idle.ending());
  EXPECT_EQ(idle.End(absl::OkStatus()), absl::OkStatus());
  StreamOutbox<v1::StudyEvent> broken;
  ASSERT_TRUE(broken.Push(Event("in flight")).ok());
  EXPECT_EQ(broken.End(absl::OkStatus()), std::nullopt);
  broken.Abort();  // The write failed: nothing more will be written.
  EXPECT_EQ(broken.End(absl::UnavailableError("writing failed")), absl::OkStatus());
}

TEST(StreamOutboxTest, IsBoundedByMessagesAndBytes) {
  StreamOutbox<v1::StudyEvent> by_count({.max_messages = 3, .max_bytes = 1 << 20});
  ASSERT_TRUE(by_count.Push(Event("in flight")).ok());  // The slot being written is not counted.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(by_count.Push(Event("waits")).ok());
  absl::StatusOr<const v1::StudyEvent*> refused = by_count.Push(Event("one too many"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(by_count.pending_messages(), 3u);

  StreamOutbox<v1::StudyEvent> by_bytes({.max_messages = 1000, .max_bytes = 2500});
  ASSERT_TRUE(by_bytes.Push(Event("in flight")).ok());
  ASSERT_TRUE(by_bytes.Push(Event(std::string(1000, 'a'))).ok());
  ASSERT_TRUE(by_bytes.Push(Event(std::string(1000, 'b'))).ok());
  EXPECT_FALSE(by_bytes.Push(Event(std::string(1000, 'c'))).ok());
  by_bytes.OnWriteDone();  // 'a' moves to the slot and frees its bytes.
  EXPECT_TRUE(by_bytes.Push(Event(std::string(1000, 'c'))).ok());
}

}  // namespace
}  // namespace dhpt::rpc
