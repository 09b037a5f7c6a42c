#include "services/worker/worker_core.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/synchronization/notification.h"

namespace dhpt::worker {
namespace {

v1::SchedulerMessage Assign(uint64_t id, int attempt, uint64_t epoch = 0) {
  v1::SchedulerMessage message;
  v1::Assign& a = *message.mutable_assign();
  a.set_trial_id(id);
  a.set_attempt(attempt);
  a.set_epoch(epoch);
  a.mutable_model()->set_kind(v1::Model::FUNCTION);
  a.mutable_model()->set_function("ackley");
  (*a.mutable_params())["x1"].set_double_value(0);
  return message;
}

class Outbox {
 public:
  WorkerCore::Send Sender() {
    return [this](v1::WorkerMessage m) {
      absl::MutexLock lock(&mutex_);
      messages_.push_back(std::move(m));
    };
  }
  // Waits (with a deadline) until `n` results have arrived.
  std::vector<v1::WorkerMessage> WaitForResults(size_t n) {
    absl::MutexLock lock(&mutex_);
    auto enough = [&] {
      size_t count = 0;
      for (const auto& m : messages_) count += m.has_result();
      return count >= n;
    };
    mutex_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
    return messages_;
  }

 private:
  absl::Mutex mutex_;
  std::vector<v1::WorkerMessage> messages_;
};

TEST(WorkerCoreTest, RunsAssignmentsAndResendsUnacknowledgedResultsOnReattach) {
  TrialRunner runner;
  WorkerCore core({.slots = 2}, &runner);
  core.Start();
  Outbox first;
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w");
  core.Attach(hello, first.Sender());
  core.Handle(Assign(1, 1));
  core.Handle(Assign(2, 1));
  std::vector<v1::WorkerMessage> sent = first.WaitForResults(2);
  ASSERT_TRUE(sent[0].has_hello());
  EXPECT_EQ(core.unacknowledged_results(), 2u);

  v1::SchedulerMessage ack;
  ack.mutable_ack()->set_trial_id(1);
  ack.mutable_ack()->set_attempt(1);
  core.Handle(ack);
  EXPECT_EQ(core.unacknowledged_results(), 1u);

  // A new stream: hello first, then the result the scheduler never acknowledged.
  core.Detach();
  Outbox second;
  core.Attach(hello, second.Sender());
  std::vector<v1::WorkerMessage> resent = second.WaitForResults(1);
  ASSERT_EQ(resent.size(), 2u);
  EXPECT_TRUE(resent[0].has_hello());
  EXPECT_EQ(resent[1].result().trial_id(), 2u);
  core.Stop();
}

TEST(WorkerCoreTest, StopGivesBackQueuedTrials) {
  TrialRunner runner;
  WorkerCore core({.slots = 1}, &runner);  // Not started: assignments stay queued.
  Outbox outbox;
  core.Attach(v1::WorkerMessage(), outbox.Sender());
  core.Handle(Assign(5, 1));
  core.Stop();
  std::vector<v1::WorkerMessage> sent = outbox.WaitForResults(1);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].result().state(), v1::Trial::CANCELLED);
}

}  // namespace
}  // namespace dhpt::worker

namespace dhpt::worker {
namespace {

// A trainer that runs until it is cancelled: a stuck trial.
class RunsUntilCancelled : public ModelTrainer {
 public:
  std::string device() const override { return "cpu"; }
  absl::StatusOr<TrainerMetrics> Train(const SplitDataset&, const Hyperparameters&,
                                       const TrialContext& context) override {
    // A deadline, so that a worker that never cancels it fails the test rather than hang it.
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!context.cancelled->load()) {
      if (absl::Now() > deadline) return absl::DeadlineExceededError("never cancelled");
      absl::SleepFor(absl::Milliseconds(1));
    }
    return absl::CancelledError("cancelled");
  }
};

v1::SchedulerMessage StuckAssign(uint64_t id, int64_t timeout_ms) {
  v1::SchedulerMessage message;
  v1::Assign& a = *message.mutable_assign();
  a.set_trial_id(id);
  a.set_attempt(1);
  a.mutable_model()->set_kind(v1::Model::AUTOENCODER);
  a.mutable_dataset()->mutable_sensors()->set_samples(50);
  a.mutable_dataset()->set_validation_fraction(0.2);
  a.set_timeout_ms(timeout_ms);
  return message;
}

TEST(WorkerCoreTest, AnnouncesEachStartAndStopsATrialAtItsTimeout) {
  TrialRunner runner({.autoencoder = std::make_shared<RunsUntilCancelled>()});
  WorkerCore core({.slots = 1}, &runner);
  core.Start();
  Outbox outbox;
  core.Attach(v1::WorkerMessage(), outbox.Sender());
  const absl::Time start = absl::Now();
  core.Handle(StuckAssign(7, 300));
  std::vector<v1::WorkerMessage> sent = outbox.WaitForResults(1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].started().trial_id(), 7u);
  EXPECT_EQ(sent[1].started().attempt(), 1);
  EXPECT_EQ(sent[2].result().state(), v1::Trial::FAILED);
  EXPECT_NE(sent[2].result().error().find("trial_timeout of 300ms"), std::string::npos)
      << sent[2].result().error();
  core.Stop();
}

TEST(WorkerCoreTest, ADrainingWorkerSaysSoOnEveryStreamAndGivesBackNewAssignments) {
  TrialRunner runner;
  WorkerCore core({.slots = 1}, &runner);
  core.Start();
  Outbox first;
  core.Attach(v1::WorkerMessage(), first.Sender());
  core.Drain("SIGTERM");
  core.Handle(Assign(9, 2));  // Crossed with the drain.
  std::vector<v1::WorkerMessage> sent = first.WaitForResults(1);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].draining().reason(), "SIGTERM");
  EXPECT_EQ(sent[2].result().trial_id(), 9u);
  EXPECT_EQ(sent[2].result().state(), v1::Trial::CANCELLED);
  core.Detach();
  Outbox second;
  core.Attach(v1::WorkerMessage(), second.Sender());
  sent = second.WaitForResults(0);  // Attach sends synchronously.
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_TRUE(sent[1].has_draining());
  core.Stop();
}

TEST(WorkerCoreTest, HelloListsTheAttemptsTheWorkerStillHolds) {
  TrialRunner runner({.autoencoder = std::make_shared<RunsUntilCancelled>()});
  WorkerCore core({.slots = 1}, &runner);
  core.Start();
  Outbox first;
  core.Attach(v1::WorkerMessage(), first.Sender());
  core.Handle(StuckAssign(11, 0));
  core.Handle(StuckAssign(12, 0));  // Queued behind it.
  core.Detach();
  Outbox second;
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w");
  core.Attach(hello, second.Sender());
  std::vector<v1::WorkerMessage> sent = second.WaitForResults(0);  // Attach sends synchronously.
  ASSERT_FALSE(sent.empty());
  std::set<uint64_t> held;
  for (const v1::TrialAttempt& a : sent[0].hello().running()) held.insert(a.trial_id());
  EXPECT_EQ(held, (std::set<uint64_t>{11, 12}));
  core.Stop();
}

TEST(WorkerCoreTest, EverythingAboutAnAttemptCarriesItsEpochAndACancelForgetsItsResult) {
  TrialRunner runner;
  WorkerCore core({.slots = 1}, &runner);
  core.Start();
  Outbox first;
  core.Attach(v1::WorkerMessage(), first.Sender());
  core.Handle(Assign(5, 1, /*epoch=*/0xabc));
  core.Handle(Assign(5, 2, /*epoch=*/0xdef));  // The same trial from another scheduler.
  std::vector<v1::WorkerMessage> sent = first.WaitForResults(2);
  std::set<std::pair<int, uint64_t>> results, starts;
  for (const v1::WorkerMessage& m : sent) {
    if (m.has_result()) results.insert({m.result().attempt(), m.result().epoch()});
    if (m.has_started()) starts.insert({m.started().attempt(), m.started().epoch()});
  }
  const std::set<std::pair<int, uint64_t>> expected = {{1, 0xabc}, {2, 0xdef}};
  EXPECT_EQ(results, expected);
  EXPECT_EQ(starts, expected);
  EXPECT_EQ(core.unacknowledged_results(), 2u);

  // An ack of another epoch acknowledges nothing; a Cancel of one attempt forgets its result
  // (the scheduler will never take it), and only that one.
  v1::SchedulerMessage ack;
  ack.mutable_ack()->set_trial_id(5);
  ack.mutable_ack()->set_attempt(1);
  ack.mutable_ack()->set_epoch(0xdef);
  core.Handle(ack);
  EXPECT_EQ(core.unacknowledged_results(), 2u);
  v1::SchedulerMessage cancel;
  cancel.mutable_cancel()->set_trial_id(5);
  cancel.mutable_cancel()->set_attempt(1);
  cancel.mutable_cancel()->set_epoch(0xabc);
  core.Handle(cancel);
  EXPECT_EQ(core.unacknowledged_results(), 1u);
  core.Detach();
  Outbox second;
  core.Attach(v1::WorkerMessage(), second.Sender());
  sent = second.WaitForResults(1);
  ASSERT_EQ(sent[0].hello().running_size(), 1);
  EXPECT_EQ(sent[0].hello().running(0).epoch(), 0xdefu);
  core.Stop();
}

}  // namespace
}  // namespace dhpt::worker
