// Faults with real processes: workers killed or frozen mid-trial, broken streams.

#include <signal.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "services/cli/study_file.h"
#include "services/common/channel_options.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

// XGBoost trials of about half a second each on this machine, so a kill lands mid-trial.
v1::StudySpec SlowStudy(const std::string& name, int trials) {
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(R"(
model: {kind: XGBOOST, fixed: {num_boost_round: 300, max_depth: 6}}
dataset: {friedman1: {samples: 2000, features: 10, seed: 4}}
parameters:
  - {name: eta, double_range: {min: 0.01, max: 0.3, log: true}}
max_attempts: 3
)");
  spec->set_name(name);
  spec->set_max_trials(trials);
  return *spec;
}

// The running trial of `worker`, if any.
std::optional<v1::Trial> RunningOn(TestCluster& cluster, const std::string& study,
                                   const std::string& worker) {
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials(study);
  if (!trials.ok()) return std::nullopt;
  for (const v1::Trial& t : *trials) {
    if (t.state() == v1::Trial::RUNNING && t.worker_id() == worker) return t;
  }
  return std::nullopt;
}

void ExpectExactlyOnce(TestCluster& cluster, const std::string& study, int max_trials) {
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials(study);
  ASSERT_TRUE(trials.ok());
  EXPECT_EQ(static_cast<int>(trials->size()), max_trials);
  std::set<uint64_t> ids;
  std::set<int64_t> numbers;
  for (const v1::Trial& t : *trials) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.ShortDebugString();
    ids.insert(t.id());
    numbers.insert(t.number());
  }
  EXPECT_EQ(static_cast<int>(ids.size()), max_trials);
  EXPECT_EQ(static_cast<int>(numbers.size()), max_trials);
}

TEST(FaultsTest, WorkerKilledMidTrialHasItsTrialRequeuedAndTheStudyFinishesExactly) {
  TestCluster cluster(0);
  cli::ChildProcess& victim = cluster.SpawnWorkerProcess("victim");
  ASSERT_TRUE(cluster.client().CreateStudy(SlowStudy("killed", 4)).ok());
  std::optional<v1::Trial> doomed;
  ASSERT_TRUE(WaitFor([&] { return (doomed = RunningOn(cluster, "killed", "victim")).has_value(); }));
  // SIGKILL: no goodbye, no result. The stream breaks and the scheduler notices.
  victim.Signal(SIGKILL);
  ASSERT_TRUE(WaitFor([&] {
    auto trials = cluster.client().ListTrials("killed");
    for (const auto& t : *trials) {
      if (t.id() == doomed->id()) return t.state() == v1::Trial::PENDING;
    }
    return false;
  }));
  cluster.AddWorker("survivor");
  v1::Study study = cluster.WaitForEnd("killed");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 4);
  ExpectExactlyOnce(cluster, "killed", 4);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("killed");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& t : *trials) {
    if (t.id() == doomed->id()) {
      EXPECT_EQ(t.attempt(), 2);
      EXPECT_EQ(t.worker_id(), "survivor");
    }
  }
}

TEST(FaultsTest, FrozenWorkerLosesItsLeaseAndItsLateResultCountsOnce) {
  // A lease of 600 ms, so that the frozen worker loses it within the test's time.
  TestCluster cluster(0, 1, nullptr, kShortLeaseHeartbeats);
  cli::ChildProcess& frozen = cluster.SpawnWorkerProcess("frozen");
  ASSERT_TRUE(cluster.client().CreateStudy(SlowStudy("frozen-study", 3)).ok());
  std::optional<v1::Trial> held;
  ASSERT_TRUE(WaitFor([&] { return (held = RunningOn(cluster, "frozen-study", "frozen")).has_value(); }));
  frozen.Signal(SIGSTOP);  // Alive but silent: only the missing heartbeats tell.
  ASSERT_TRUE(WaitFor([&] { return cluster.core().connected_workers() == 0; }));
  cluster.AddWorker("helper");
  frozen.Signal(SIGCONT);  // It wakes, reconnects and reports what it finished.
  v1::Study study = cluster.WaitForEnd("frozen-study");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 3);
  ExpectExactlyOnce(cluster, "frozen-study", 3);
}

TEST(FaultsTest, StreamWithoutHelloIsRefusedAndTheSchedulerLivesOn) {
  TestCluster cluster(0);
  auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(cluster.address(),
                                                             grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub->Connect(&context);
  v1::WorkerMessage heartbeat;
  heartbeat.mutable_heartbeat();
  stream->Write(heartbeat);
  v1::SchedulerMessage reply;
  EXPECT_FALSE(stream->Read(&reply));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("hello"));

  // A hello with no slots is refused with the field named.
  grpc::ClientContext context2;
  auto stream2 = stub->Connect(&context2);
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id("w");
  stream2->Write(hello);
  EXPECT_FALSE(stream2->Read(&reply));
  grpc::Status status2 = stream2->Finish();
  EXPECT_EQ(status2.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status2.error_message(), ::testing::HasSubstr("slots"));
  EXPECT_TRUE(cluster.client().ListStudies().ok());
}

}  // namespace
}  // namespace dhpt::testing

namespace dhpt::testing {
namespace {

TEST(FaultsTest, WorkerReconnectsToARestartedSchedulerAndGetsWorkAgain) {
  TempDatabase first_store;
  scheduler::SchedulerServerOptions options;
  options.listen_address = "127.0.0.1:0";
  options.core.heartbeat_interval = absl::Milliseconds(200);
  options.core.missed_heartbeats = kTestMissedHeartbeats;
  auto first = std::move(*scheduler::SchedulerServer::Start(options, first_store.get()));
  const int port = first->port();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  InProcessWorker worker(address, "steady", 1);
  ASSERT_TRUE(WaitFor([&] { return worker.client().connected(); }));
  first->Shutdown(absl::Seconds(1));
  first.reset();
  ASSERT_TRUE(WaitFor([&] { return !worker.client().connected(); }));

  // Same address, fresh scheduler (and database): the worker's backoff loop finds it.
  TempDatabase second_store;
  options.listen_address = address;
  auto second = std::move(*scheduler::SchedulerServer::Start(options, second_store.get()));
  ASSERT_TRUE(WaitFor([&] { return second->core().connected_workers() == 1; }));
  EXPECT_GE(worker.client().connects(), 2);
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(
      "name: after-restart\nmodel: {kind: FUNCTION, function: ackley}\nmax_trials: 5\n"
      "parameters:\n  - {name: x1, double_range: {min: -5, max: 5}}");
  ASSERT_TRUE(second->core().CreateStudy(*spec).ok());
  EXPECT_TRUE(WaitFor([&] {
    return second->core().GetStudy("after-restart")->state() == v1::Study::COMPLETED;
  }));
  second->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace dhpt::testing
