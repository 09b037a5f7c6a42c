#include "services/scheduler/scheduler_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/text_format.h"
#include "services/study/early_stopping.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::testing_util {
// Polls `condition` for up to 10 s (for work finished on the suggestion threads).
template <typename F>
bool WaitUntil(F condition) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}
}  // namespace dhpt::testing_util

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::TrialResult Completed(const v1::Assign& assign, double value,
                          const std::string& metric = "value") {
  v1::TrialResult result;
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_epoch(assign.epoch());
  result.set_state(v1::Trial::COMPLETED);
  (*result.mutable_metrics())[metric] = value;
  return result;
}

class SchedulerCoreTest : public ::testing::Test {
 protected:
  SchedulerCoreTest() : core_(std::make_unique<SchedulerCore>(db_.get(), Options())) {}
  SchedulerOptions Options() {
    SchedulerOptions options;
    options.heartbeat_interval = absl::Seconds(1);
    options.missed_heartbeats = 3;
    options.clock = [this] { return now_; };
    return options;
  }
  uint64_t Connect(RecordingChannel& channel, const v1::Hello& hello) {
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(hello, {}, &channel);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // A worker's channel, kept until the core is gone: the store's writer thread may still
  // deliver a late acknowledgement to it after the test body ends.
  RecordingChannel& NewChannel() { return channels_.emplace_back(); }

  // The scheduler stops and starts again on the same database (its last writes committed).
  void Restart() {
    core_.reset();
    db_.Reopen();
    core_ = std::make_unique<SchedulerCore>(db_.get(), Options());
    ASSERT_TRUE(core_->Recover().ok());
  }

  // Worker "a" connects again, still running `assign`'s attempt. Returns its session.
  uint64_t ReconnectRunning(const v1::Assign& assign) {
    v1::Hello hello = Hello("a", 1);
    *hello.add_running() = Attempt(assign);
    return Connect(NewChannel(), hello);
  }

  // Study "s" of `max_trials` trials, whose first trial worker "a" started and then lost with
  // its stream (the loss charged). Returns the attempt's assignment.
  v1::Assign LoseAStartedTrial(int max_trials = 1, int max_attempts = 2, int parallel_trials = 0) {
    v1::StudySpec spec = FunctionStudy("s", max_trials);
    spec.set_max_attempts(max_attempts);
    spec.set_parallel_trials(parallel_trials);
    EXPECT_TRUE(core_->CreateStudy(spec).ok());
    RecordingChannel& first = NewChannel();
    const uint64_t session = Connect(first, Hello("a", 1));
    const v1::Assign assign = first.Assigns().back();
    core_->HandleStarted(session, Attempt(assign));
    core_->DisconnectWorker(session, "network break");
    return assign;
  }

  // The same with max_attempts 1: the trial is held for a's return, and keeps the study's one
  // slot (no other trial starts in it).
  v1::Assign HoldAStartedTrial(int max_trials) { return LoseAStartedTrial(max_trials, 1, 1); }

  std::deque<RecordingChannel> channels_;  // Declared first: destroyed after core_.
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(SchedulerCoreTest, CreateIsIdempotentByNameAndRejectsAChangedSpec) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  EXPECT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  EXPECT_EQ(core_->ListStudies(0, "")->items.size(), 1u);
  absl::StatusOr<v1::Study> changed = core_->CreateStudy(FunctionStudy("s", 6));
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(core_->CreateStudy(FunctionStudy("", 5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->GetStudy("missing").status().code(), absl::StatusCode::kNotFound);
}

v1::StudySpec AutoencoderStudy(const std::string& name, int max_trials, bool allow_cpu_fallback) {
  v1::StudySpec spec;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    model { kind: AUTOENCODER }
    dataset { sensors { samples: 200 } }
    parameters { name: "learning_rate" double_range { min: 0.0001 max: 0.01 log: true } })pb", &spec);
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  spec.set_allow_cpu_fallback(allow_cpu_fallback);
  return spec;
}

v1::Hello CudaHello(const std::string& id, int slots, std::vector<v1::Model::Kind> models) {
  v1::Hello hello = Hello(id, slots, std::move(models));
  hello.mutable_capabilities()->set_device_kind(v1::WorkerCapabilities::CUDA);
  return hello;
}

TEST_F(SchedulerCoreTest, AutoencoderStudiesWaitForACudaWorkerAndSayWhy) {
  ASSERT_TRUE(core_->CreateStudy(AutoencoderStudy("ae", 4, false)).ok());
  RecordingChannel& gpu_without_cuda = NewChannel();
  RecordingChannel& cuda = NewChannel();
  Connect(gpu_without_cuda, Hello("g0", 2, {v1::Model::AUTOENCODER}));
  EXPECT_EQ(gpu_without_cuda.Assigns().size(), 0u);
  EXPECT_THAT(core_->GetStudy("ae")->state_reason(),
              HasSubstr("waiting for a CUDA worker that runs AUTOENCODER (connected: 1 CPU worker;"));
  Connect(cuda, CudaHello("g1", 2, {v1::Model::AUTOENCODER}));
  EXPECT_EQ(cuda.Assigns().size(), 2u);
  EXPECT_EQ(gpu_without_cuda.Assigns().size(), 0u);
  EXPECT_EQ(core_->GetStudy("ae")->state_reason(), "");
}

// Model choice (issue 33): each trial is assigned as its own model_kind, without model_kind
// among its parameters, and only to a worker that runs that kind: a worker that runs XGBoost
// only takes the XGBoost trials, and the Random Forest ones wait for a worker that runs it.
TEST_F(SchedulerCoreTest, AModelChoiceTrialIsAssignedAsItsOwnKind) {
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "choice"
    model { kind: XGBOOST }
    dataset { friedman1 { samples: 200 features: 5 noise: 1 seed: 0 } }
    algorithm { name: RANDOM seed: 3 }
    parameters { name: "model_kind" categorical { values: "XGBOOST" values: "RANDOM_FOREST" } }
    parameters {
      name: "eta" double_range { min: 0.01 max: 0.3 }
      condition { parent: "model_kind" values { string_value: "XGBOOST" } }
    }
    parameters {
      name: "num_parallel_tree" int_range { min: 5 max: 50 }
      condition { parent: "model_kind" values { string_value: "RANDOM_FOREST" } }
    }
    max_trials: 8 parallel_trials: 8)pb", &spec));
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& xgboost_only = NewChannel();
  Connect(xgboost_only, Hello("x", 8, {v1::Model::XGBOOST}));
  const std::vector<v1::Assign> xgboost_assigns = xgboost_only.Assigns();
  ASSERT_GE(xgboost_assigns.size(), 1u);
  RecordingChannel& both = NewChannel();
  Connect(both, Hello("b", 8, {v1::Model::XGBOOST, v1::Model::RANDOM_FOREST}));
  std::vector<v1::Assign> assigns = both.Assigns();
  ASSERT_GE(assigns.size(), 1u);
  std::map<uint64_t, std::string> kind_of;
  for (const v1::Trial& trial : AllTrials(*core_, "choice")) {
    kind_of[trial.id()] = trial.params().at("model_kind").string_value();
  }
  for (const v1::Assign& assign : xgboost_assigns) {
    EXPECT_EQ(kind_of.at(assign.trial_id()), "XGBOOST");
  }
  assigns.insert(assigns.end(), xgboost_assigns.begin(), xgboost_assigns.end());
  ASSERT_EQ(assigns.size(), 8u);
  std::set<uint64_t> ids;
  for (const v1::Assign& assign : assigns) ids.insert(assign.trial_id());
  EXPECT_EQ(ids.size(), 8u);
  std::set<std::string> kinds;
  for (const v1::Assign& assign : assigns) {
    const std::string& kind = kind_of.at(assign.trial_id());
    kinds.insert(kind);
    EXPECT_EQ(v1::Model::Kind_Name(assign.model().kind()), kind);
    EXPECT_FALSE(assign.params().contains("model_kind"));
    EXPECT_EQ(assign.params().contains("eta"), kind == "XGBOOST");
    EXPECT_EQ(assign.params().contains("num_parallel_tree"), kind == "RANDOM_FOREST");
  }
  EXPECT_EQ(kinds.size(), 2u);
}

TEST_F(SchedulerCoreTest, CudaSlotsGoToGpuStudiesFirst) {
  // The function study comes first in round-robin order, yet the CUDA worker's slots go to the
  // AutoEncoder study, and only its spare slots to the function study.
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("f", 10)).ok());
  ASSERT_TRUE(core_->CreateStudy(AutoencoderStudy("ae", 2, false)).ok());
  RecordingChannel& cuda = NewChannel();
  Connect(cuda, CudaHello("g", 3, {v1::Model::AUTOENCODER, v1::Model::FUNCTION}));
  std::vector<v1::Assign> assigns = cuda.Assigns();
  ASSERT_EQ(assigns.size(), 3u);
  EXPECT_EQ(assigns[0].study(), "ae");
  EXPECT_EQ(assigns[1].study(), "ae");
  EXPECT_EQ(assigns[2].study(), "f");
}

// 200 CPU workers stay idle while only an AutoEncoder study runs, on one CUDA worker: each of
// its results costs dispatch a try of that worker, not a try of every idle one. A study they
// can run then reaches all of them.
TEST_F(SchedulerCoreTest, IdleWorkersThatNoStudyCanUseCostADispatchNothing) {
  ASSERT_TRUE(core_->CreateStudy(AutoencoderStudy("ae", 20, false)).ok());
  constexpr int kIdle = 200;
  for (int i = 0; i < kIdle; ++i) Connect(NewChannel(), Hello(absl::StrCat("cpu-", i), 1));
  RecordingChannel& cuda = NewChannel();
  const uint64_t gpu = Connect(cuda, CudaHello("g", 1, {v1::Model::AUTOENCODER}));
  const uint64_t tried_before = core_->sessions_tried();
  for (int i = 0; i < 19; ++i) {
    ASSERT_EQ(cuda.Assigns().size(), static_cast<size_t>(i + 1));
    const v1::Assign assign = cuda.Assigns().back();
    core_->HandleResult(gpu, Completed(assign, 0.5, assign.objective_metric()));
  }
  EXPECT_EQ(cuda.Assigns().size(), 20u);
  // Walking every idle worker would be 19 x 200 tries.
  EXPECT_LE(core_->sessions_tried() - tried_before, 19u * 2);

  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("f", kIdle)).ok());
  for (int i = 0; i < kIdle; ++i) EXPECT_EQ(channels_[i].Assigns().size(), 1u) << i;
}

// A worker set aside because nothing it could run had a trial to give gets one as soon as a
// trial appears: one taken back from a lost worker, one a result frees, a new study's.
TEST_F(SchedulerCoreTest, ASetAsideWorkerGetsTheNextTrialItCanRun) {
  v1::StudySpec spec = FunctionStudy("s", 3);
  spec.set_parallel_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& first = NewChannel();
  RecordingChannel& second = NewChannel();
  const uint64_t a = Connect(first, Hello("a", 1));
  const uint64_t b = Connect(second, Hello("b", 1));
  ASSERT_EQ(first.Assigns().size(), 1u);
  EXPECT_EQ(second.Assigns().size(), 0u);  // The study's one parallel trial is taken.

  core_->HandleStarted(a, Attempt(first.Assigns().back()));
  core_->DisconnectWorker(a, "killed");
  ASSERT_EQ(second.Assigns().size(), 1u);
  EXPECT_EQ(second.Assigns().back().trial_id(), first.Assigns().back().trial_id());

  RecordingChannel& third = NewChannel();
  Connect(third, Hello("c", 2));
  EXPECT_EQ(third.Assigns().size(), 0u);
  core_->HandleResult(b, Completed(second.Assigns().back(), 1));
  // The freed parallel slot goes to one of the two workers, the next study to the other.
  EXPECT_EQ(second.Assigns().size() + third.Assigns().size(), 2u);
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("t", 2)).ok());
  EXPECT_EQ(second.Assigns().size() + third.Assigns().size(), 4u);
  EXPECT_EQ(core_->GetStudy("t")->trials_running(), 2);
}

// Round robin stays fair to a model-based study: a worker that reaches its turn while its
// suggestion is being made (off the lock) waits for it rather than take the next study's
// trial, so one worker alternates between a RANDOM and a TPE study. Not for the first
// suggestion, whose cost is unknown (SlowSuggestionsDoNotHoldUpOtherStudies).
TEST_F(SchedulerCoreTest, AModelBasedStudyKeepsItsTurnWhileItsSuggestionIsMade) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("random", 6)).ok());
  v1::StudySpec tpe = FunctionStudy("tpe", 6);
  tpe.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  ASSERT_TRUE(core_->CreateStudy(tpe).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  std::vector<std::string> order;
  for (size_t n = 1; n <= 12; ++n) {
    ASSERT_TRUE(testing_util::WaitUntil([&] { return channel.Assigns().size() == n; }))
        << "after " << absl::StrJoin(order, ", ");
    const v1::Assign assign = channel.Assigns().back();
    order.push_back(assign.study());
    if (n == 2) {
      // TPE's first suggestion, asked for when the worker passed its turn, is made while the
      // second trial runs, as it would be while a real trial ran.
      ASSERT_TRUE(testing_util::WaitUntil([&] { return AllTrials(*core_, "tpe").size() == 1; }));
    }
    core_->HandleResult(session, Completed(assign, 1.0));
  }
  EXPECT_EQ(absl::StrJoin(order, ","),
            "random,random,tpe,random,tpe,random,tpe,random,tpe,random,tpe,tpe");
}

TEST_F(SchedulerCoreTest, AssignsUpToSlotsAndOnlyToCapableWorkers) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  RecordingChannel& xgb_only = NewChannel();
  RecordingChannel& functions = NewChannel();
  Connect(xgb_only, Hello("x", 4, {v1::Model::XGBOOST}));
  EXPECT_EQ(xgb_only.Assigns().size(), 0u);
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), HasSubstr("waiting for a worker that runs FUNCTION"));
  Connect(functions, Hello("f", 3));
  EXPECT_EQ(functions.Count(v1::SchedulerMessage::kWelcome), 1);
  EXPECT_EQ(functions.Assigns().size(), 3u);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::RUNNING);
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 3);
}

TEST_F(SchedulerCoreTest, ResultsAreAcknowledgedCountedOnceAndEndTheStudy) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 4)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 4; ++i) {
    const v1::Assign assign = channel.Assigns().back();
    core_->HandleResult(session, Completed(assign, 10.0 - i));
    core_->HandleResult(session, Completed(assign, -100));  // A duplicate changes nothing.
  }
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trials_completed(), 4);
  EXPECT_EQ(study->best_trial().objective_value(), 7.0);
  // Acknowledged once stored, from the store's writer thread.
  EXPECT_TRUE(testing_util::WaitUntil([&] { return channel.Count(v1::SchedulerMessage::kAck) == 8; }));
  EXPECT_EQ(channel.Assigns().size(), 4u);
}

TEST_F(SchedulerCoreTest, ResultWithoutObjectiveFailsTheTrial) {
  v1::StudySpec spec = FunctionStudy("s", 3);
  spec.set_max_failed_trials(0);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  v1::TrialResult result = Completed(channel.Assigns().back(), 1);
  result.mutable_metrics()->clear();
  core_->HandleResult(session, result);
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::FAILED);
  EXPECT_THAT(study->state_reason(), HasSubstr("more than max_failed_trials (0)"));
  EXPECT_THAT(AllTrials(*core_, "s", v1::Trial::FAILED).at(0).error(), HasSubstr("\"value\""));
}

TEST_F(SchedulerCoreTest, LostWorkerRequeuesItsTrialsAndTheAttemptCapFailsThem) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(2);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& first = NewChannel();
  RecordingChannel& second = NewChannel();
  RecordingChannel& third = NewChannel();
  const uint64_t s1 = Connect(first, Hello("a", 1));
  const uint64_t trial_id = first.Assigns().back().trial_id();
  core_->HandleStarted(s1, Attempt(first.Assigns().back()));
  core_->DisconnectWorker(s1, "killed");
  auto trials = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED);
  EXPECT_EQ(trials.at(0).state(), v1::Trial::PENDING);
  EXPECT_EQ(trials.at(0).attempt(), 1);

  const uint64_t s2 = Connect(second, Hello("b", 1));
  ASSERT_EQ(second.Assigns().size(), 1u);
  EXPECT_EQ(second.Assigns()[0].trial_id(), trial_id);
  EXPECT_EQ(second.Assigns()[0].attempt(), 2);
  core_->HandleStarted(s2, Attempt(second.Assigns()[0]));
  core_->DisconnectWorker(s2, "killed again");
  // Its last allowed attempt: held for worker b's return until b's lease (3 s) is over, given
  // to nobody else meanwhile.
  trials = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED);
  EXPECT_EQ(trials.at(0).state(), v1::Trial::PENDING);
  EXPECT_THAT(trials.at(0).error(), HasSubstr("it fails unless its worker comes back for it by"));
  EXPECT_EQ(core_->GetStudy("s")->trials_pending(), 1);
  const uint64_t s3 = Connect(third, Hello("c", 1));
  EXPECT_EQ(third.Assigns().size(), 0u);
  now_ += absl::Seconds(2);
  core_->ExpireLeases();  // c's lease is fresh; b's not over yet.
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0).state(),
            v1::Trial::PENDING);
  now_ += absl::Seconds(2);
  core_->HandleHeartbeat(s3);  // c stays.
  core_->ExpireLeases();
  trials = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED);
  EXPECT_EQ(trials.at(0).state(), v1::Trial::FAILED);
  EXPECT_EQ(trials.at(0).lost_attempts(), 2);
  EXPECT_THAT(trials.at(0).error(), HasSubstr("gave up after losing 2 started attempts; last: "
                                              "worker b was lost: killed again (its worker did "
                                              "not come back for it in time)"));
  EXPECT_EQ(third.Assigns().size(), 0u);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::FAILED);
}

// A worker back for an earlier attempt while nobody runs the trial takes it back as that
// attempt: here attempt 2 was lost too, and the trial, held on it, failed at the end of the
// hold though attempt 1 ran on (hostile review). Attempt 2 stays lost; its worker, back, is
// refused it.
TEST_F(SchedulerCoreTest, AWorkerBackForAnEarlierAttemptTakesBackTheTrialNobodyRuns) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(2);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  const v1::Assign first = [&] {
    RecordingChannel& channel = NewChannel();
    const uint64_t session = Connect(channel, Hello("a", 1));
    core_->HandleStarted(session, Attempt(channel.Assigns().back()));
    core_->DisconnectWorker(session, "link down");
    return channel.Assigns().back();
  }();
  RecordingChannel& second = NewChannel();
  const uint64_t b = Connect(second, Hello("b", 1));
  ASSERT_EQ(second.Assigns().size(), 1u);
  const v1::Assign again = second.Assigns().back();
  EXPECT_EQ(again.attempt(), 2);
  core_->HandleStarted(b, Attempt(again));
  core_->DisconnectWorker(b, "link down");  // Held: its last allowed attempt.

  const uint64_t a = ReconnectRunning(first);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(trial.lost_attempts(), 1);
  EXPECT_FALSE(trial.attempts(0).lost());
  EXPECT_TRUE(trial.attempts(1).lost());
  RecordingChannel& b_back = NewChannel();
  v1::Hello hello = Hello("b", 1);
  *hello.add_running() = Attempt(again);
  Connect(b_back, hello);
  now_ += absl::Seconds(10);  // Past the hold.
  core_->HandleHeartbeat(a);
  core_->ExpireLeases();
  core_->HandleResult(a, Completed(first, 2.0));
  trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(trial.worker_id(), "a");
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

// A held trial whose worker does not come back fails at the end of the lease, and the slot it
// kept goes to the next trial at once (an idle worker waited for a result that never came).
TEST_F(SchedulerCoreTest, AHeldTrialsSlotGoesToTheNextTrialWhenItsWorkerDoesNotReturn) {
  const v1::Assign held = HoldAStartedTrial(2);
  RecordingChannel& idle = NewChannel();
  const uint64_t s2 = Connect(idle, Hello("b", 1));
  EXPECT_TRUE(idle.Assigns().empty());
  now_ += absl::Seconds(4);
  core_->HandleHeartbeat(s2);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::FAILED).size(), 1u);
  ASSERT_EQ(idle.Assigns().size(), 1u);
  EXPECT_NE(idle.Assigns()[0].trial_id(), held.trial_id());
}

// A link that blinks during a trial's last allowed attempt does not fail it: its worker,
// reconnecting within its lease with the attempt in hand, takes it back uncharged (found by a
// hostile review: with max_attempts 1, a 100 ms drop failed the trial at once, though the
// worker was back 130 ms later with its command still running). After a restart too.
TEST_F(SchedulerCoreTest, ALastAttemptIsHeldForItsWorkersReturnWithinTheLease) {
  const v1::Assign assign = HoldAStartedTrial(2);
  now_ += absl::Milliseconds(130);
  Restart();  // And the scheduler restarts meanwhile.
  EXPECT_EQ(core_->ExpireLeases(), 0);
  RecordingChannel& other = NewChannel();
  Connect(other, Hello("b", 1));
  EXPECT_TRUE(other.Assigns().empty());  // Held for a, not given to b; nor is trial 1.

  const uint64_t s2 = ReconnectRunning(assign);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.lost_attempts(), 0);
  now_ += absl::Seconds(10);  // Past the hold: nothing fails it now.
  core_->HandleHeartbeat(s2);
  core_->ExpireLeases();
  core_->HandleResult(s2, Completed(assign, 2.0));
  trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 1);  // Trial 1, in the slot freed now.
}

// A user who changes the study while a trial is held (left open by a hostile review): more
// slots start new trials, never the held one; a budget lowered to what was made waits for the
// held trial instead of ending the study around it; the trial fails once, at the lease's end.
TEST_F(SchedulerCoreTest, AnUpdateDuringAHoldNeitherGivesAwayNorEndsAroundTheHeldTrial) {
  const v1::Assign held = HoldAStartedTrial(3);
  RecordingChannel& other = NewChannel();
  const uint64_t s2 = Connect(other, Hello("b", 1));
  ASSERT_TRUE(other.Assigns().empty());

  v1::UpdateStudyRequest update;
  update.set_name("s");
  update.mutable_spec()->set_parallel_trials(2);
  update.mutable_update_mask()->add_paths("parallel_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  ASSERT_EQ(other.Assigns().size(), 1u);
  const v1::Assign next = other.Assigns().back();
  EXPECT_NE(next.trial_id(), held.trial_id());

  update.mutable_spec()->set_max_trials(2);  // What was made: the held trial and b's.
  update.mutable_update_mask()->Clear();
  update.mutable_update_mask()->add_paths("max_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  core_->HandleStarted(s2, Attempt(next));
  core_->HandleResult(s2, Completed(next, 1.0));
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::RUNNING);  // The held trial may return.
  EXPECT_EQ(other.Assigns().size(), 1u);                       // Nothing past the budget.

  now_ += absl::Seconds(4);  // Past a's lease.
  core_->HandleHeartbeat(s2);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state(), v1::Trial::FAILED);
  EXPECT_EQ(trials[0].lost_attempts(), 1);
  EXPECT_EQ(trials[1].state(), v1::Trial::COMPLETED);
  const absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trials_failed(), 1);
  EXPECT_EQ(study->trials_completed(), 1);
  EXPECT_EQ(other.Assigns().size(), 1u);
}

// Found by a hostile review: with parallel_trials lowered while two trials ran, the worker back
// from a link blink was refused its held trial (the study "at its cap"), the trial failed at
// the lease's end as if it had not come back, and its result was thrown away. A held trial
// kept its slot, as a running one keeps running under a lowered cap.
TEST_F(SchedulerCoreTest, AWorkerBackForItsHeldTrialTakesItBackUnderALoweredCap) {
  v1::StudySpec spec = FunctionStudy("s", 2);
  spec.set_max_attempts(1);
  spec.set_parallel_trials(2);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& a = NewChannel();
  RecordingChannel& b = NewChannel();
  const uint64_t sa = Connect(a, Hello("a", 1));
  const uint64_t sb = Connect(b, Hello("b", 1));
  const v1::Assign held = a.Assigns().back();
  core_->HandleStarted(sa, Attempt(held));
  core_->HandleStarted(sb, Attempt(b.Assigns().back()));
  v1::UpdateStudyRequest update;
  update.set_name("s");
  update.mutable_spec()->set_parallel_trials(1);
  update.mutable_update_mask()->add_paths("parallel_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  core_->DisconnectWorker(sa, "stream closed by the worker");

  const uint64_t s2 = ReconnectRunning(held);
  EXPECT_EQ(channels_.back().Count(v1::SchedulerMessage::kCancel), 0);
  now_ += absl::Seconds(10);  // Past a's old lease: nothing fails it.
  core_->HandleHeartbeat(s2);
  core_->HandleHeartbeat(sb);
  core_->ExpireLeases();
  core_->HandleResult(s2, Completed(held, 42.0));
  const v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.metrics().at("value"), 42.0);
  EXPECT_EQ(trial.lost_attempts(), 0);
}

// Found by a hostile review, max_attempts 2: attempt 1 (a) lost, attempt 2 (b) lost, a back for
// attempt 1 and lost again; then b came back for attempt 2 and was refused, as "later than the
// current attempt", the trial failed at the end of a's lease and b's result was thrown away.
TEST_F(SchedulerCoreTest, AWorkerBackForAnyOfItsAttemptsTakesBackTheTrialNobodyRuns) {
  const v1::Assign first = LoseAStartedTrial();
  RecordingChannel& b = NewChannel();
  const uint64_t sb = Connect(b, Hello("b", 1));
  const v1::Assign second = b.Assigns().back();
  ASSERT_EQ(second.attempt(), 2);
  core_->HandleStarted(sb, Attempt(second));
  core_->DisconnectWorker(sb, "network break");  // Held: the second loss.
  const uint64_t sa2 = ReconnectRunning(first);  // a takes attempt 1 back...
  core_->DisconnectWorker(sa2, "network break");  // ...and loses it again: held on a's lease.

  v1::Hello hello = Hello("b", 1);
  *hello.add_running() = Attempt(second);
  RecordingChannel& b_back = NewChannel();
  const uint64_t sb2 = Connect(b_back, hello);
  EXPECT_EQ(b_back.Count(v1::SchedulerMessage::kCancel), 0);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.attempt(), 2);
  EXPECT_EQ(trial.lost_attempts(), 1);  // Attempt 1's, lost twice over.
  now_ += absl::Seconds(10);  // Past a's lease.
  core_->HandleHeartbeat(sb2);
  core_->ExpireLeases();
  core_->HandleResult(sb2, Completed(second, 3.0));
  trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.worker_id(), "b");
  EXPECT_TRUE(trial.attempts(0).lost());
  EXPECT_FALSE(trial.attempts(1).lost());
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

// Attempts are numbered by their place in the list. Found by a hostile review: after a worker
// took back attempt 1 while attempt 2's record stood, the next attempt was sent as "attempt 2"
// but recorded third, so every word of its worker was refused as another attempt's and the
// trial stayed RUNNING for as long as that worker stayed connected.
TEST_F(SchedulerCoreTest, TheAttemptAfterAnEarlierOneTakenBackIsNumberedByItsPlace) {
  const v1::Assign first = LoseAStartedTrial(1, /*max_attempts=*/3);
  RecordingChannel& b = NewChannel();
  const uint64_t sb = Connect(b, Hello("b", 1));
  core_->HandleStarted(sb, Attempt(b.Assigns().back()));
  core_->DisconnectWorker(sb, "network break");  // Attempt 2 lost.
  const uint64_t sa = ReconnectRunning(first);   // a takes attempt 1 back...
  core_->DisconnectWorker(sa, "network break");  // ...and loses it again.
  RecordingChannel& c = NewChannel();
  const uint64_t sc = Connect(c, Hello("c", 1));
  const v1::Assign third = c.Assigns().back();
  EXPECT_EQ(third.attempt(), 3);
  core_->HandleStarted(sc, Attempt(third));
  core_->HandleResult(sc, Completed(third, 7.0));
  const v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.worker_id(), "c");
  ASSERT_EQ(trial.attempts_size(), 3);
  EXPECT_EQ(trial.attempts(2).worker_id(), "c");
  EXPECT_EQ(trial.lost_attempts(), 2);
}

// After a restart nothing says whether a reclaimed attempt had begun: its worker holds it, so
// it is taken as begun (found by a hostile review: a loss after it was not charged, and
// max_attempts 1 gave the trial a second attempt; its trial_timeout backstop never ran).
TEST_F(SchedulerCoreTest, AnAttemptTakenBackAfterARestartIsTimedAsBegun) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.mutable_trial_timeout()->set_seconds(10);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& first = NewChannel();
  const uint64_t s1 = Connect(first, Hello("a", 1));
  const v1::Assign stuck = first.Assigns().back();
  core_->HandleStarted(s1, Attempt(stuck));
  Restart();
  const uint64_t s2 = ReconnectRunning(stuck);
  ASSERT_EQ(core_->GetStudy("s")->trials_running(), 1);
  now_ += absl::Seconds(14);  // Past trial_timeout and its grace.
  core_->HandleHeartbeat(s2);
  EXPECT_EQ(core_->ExpireTrials(), 1);
  const v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::FAILED);
  EXPECT_THAT(trial.error(), HasSubstr("trial_timeout of 10s"));
}

TEST_F(SchedulerCoreTest, AnAttemptTakenBackAfterARestartIsChargedWhenLostAgain) {
  const v1::Assign assign = HoldAStartedTrial(2);
  Restart();
  ReconnectRunning(assign);
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0).lost_attempts(), 0);
  Restart();  // Begun again in the eyes of a fresh core, then lost for good.
  const uint64_t s3 = ReconnectRunning(assign);
  core_->DisconnectWorker(s3, "network break");
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.lost_attempts(), 1);  // Charged: held for a's return, never given to b.
  RecordingChannel& other = NewChannel();
  Connect(other, Hello("b", 1));
  for (const v1::Assign& given : other.Assigns()) EXPECT_NE(given.trial_id(), assign.trial_id());
}

// A worker back with an attempt it may not finish (its trial ended meanwhile) is told to drop
// it: it ran on, and the slot it filled was given a new trial that waited behind it (a
// 0.2 ms trial measured at 13 s, which placement learnt as the board's speed; hostile review).
TEST_F(SchedulerCoreTest, AWorkerBackWithAnAttemptThatEndedIsToldToDropIt) {
  const v1::Assign ended = HoldAStartedTrial(2);
  now_ += absl::Seconds(4);
  EXPECT_EQ(core_->ExpireLeases(), 1);  // Its hold ran out: FAILED.

  const uint64_t s2 = ReconnectRunning(ended);
  const std::vector<v1::SchedulerMessage> sent = channels_.back().sent();
  const auto cancel = std::find_if(sent.begin(), sent.end(), [](const auto& message) {
    return message.has_cancel();
  });
  ASSERT_NE(cancel, sent.end());
  EXPECT_EQ(cancel->cancel().trial_id(), ended.trial_id());
  EXPECT_EQ(cancel->cancel().attempt(), ended.attempt());
  EXPECT_EQ(cancel->cancel().epoch(), ended.epoch());
  core_->HandleResult(s2, Completed(ended, 1.0));  // Too late: not counted.
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::FAILED).size(), 1u);
}

// One whose trial runs elsewhere meanwhile is told to drop it too (left running, it held a
// slot counted free and was cancelled at its first progress report; hostile review); a result
// it finished while away, sent after its Hello, still counts if it comes first.
TEST_F(SchedulerCoreTest, AWorkerBackWithAnAttemptRunningElsewhereDropsItButItsResultCounts) {
  const v1::Assign old = LoseAStartedTrial();
  RecordingChannel& other = NewChannel();
  Connect(other, Hello("b", 1));
  const v1::Assign rerun = other.Assigns().back();
  ASSERT_EQ(rerun.trial_id(), old.trial_id());
  const uint64_t s2 = ReconnectRunning(old);
  EXPECT_EQ(channels_.back().Count(v1::SchedulerMessage::kCancel), 1);
  core_->HandleResult(s2, Completed(old, 5.0));
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::COMPLETED).at(0).metrics().at("value"), 5.0);
  EXPECT_EQ(other.Count(v1::SchedulerMessage::kCancel), 1);  // The rerun, not needed now.
}

// An export taken while a trial was held (its last attempt's worker lost, the hold not over)
// imports, and the trial is held again, never handed out past max_attempts; one cancelled by
// a stop during the hold imports too (found by a hostile review: both exports were refused,
// so export, delete, import lost the study).
TEST_F(SchedulerCoreTest, AnExportTakenDuringAHoldImports) {
  HoldAStartedTrial(3);
  v1::StudyExport exported;
  *exported.mutable_study() = *core_->GetStudy("s");
  for (const v1::Trial& trial : AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED)) {
    *exported.add_trials() = trial;
  }
  ASSERT_EQ(exported.trials(0).lost_attempts(), 1);
  testing::TempDatabase target;
  SchedulerOptions options = Options();
  SchedulerCore imported(target.get(), options);
  ASSERT_TRUE(imported.Recover().ok());
  absl::StatusOr<v1::Study> study = imported.ImportStudy(exported);
  ASSERT_TRUE(study.ok()) << study.status();
  RecordingChannel& idle = NewChannel();
  const absl::StatusOr<uint64_t> c = imported.ConnectWorker(Hello("c", 1), {}, &idle);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(idle.Assigns().empty());  // One slot, kept by the held trial.
  now_ += absl::Seconds(4);
  imported.HandleHeartbeat(*c);
  EXPECT_EQ(imported.ExpireLeases(), 1);
  const v1::Trial trial = AllTrials(imported, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::FAILED);
  EXPECT_EQ(trial.lost_attempts(), 1);
  EXPECT_THAT(trial.error(), HasSubstr("before the study was exported"));
  ASSERT_EQ(idle.Assigns().size(), 1u);
  EXPECT_NE(idle.Assigns()[0].trial_id(), trial.id());

  ASSERT_TRUE(core_->StopStudy("s").ok());  // Cancels the held trial.
  exported.Clear();
  *exported.mutable_study() = *core_->GetStudy("s");
  for (const v1::Trial& t : AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED)) {
    *exported.add_trials() = t;
  }
  ASSERT_EQ(exported.trials(0).state(), v1::Trial::CANCELLED);
  exported.mutable_study()->mutable_spec()->set_name("stopped");
  for (v1::Trial& t : *exported.mutable_trials()) t.set_study("stopped");
  study = imported.ImportStudy(exported);
  EXPECT_TRUE(study.ok()) << study.status();
}

// What a study waits for is worked out from the workers connected now, never stored as its
// reason: stored by an update made while no worker was connected, it was read back after a
// restart and shown for the whole run ("no worker is connected"; hostile review).
TEST_F(SchedulerCoreTest, AWaitingReasonIsNotKeptAcrossARestart) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  v1::UpdateStudyRequest update;
  update.set_name("s");
  update.mutable_spec()->set_max_trials(6);
  update.mutable_update_mask()->add_paths("max_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), HasSubstr("no worker is connected"));
  Restart();
  Connect(NewChannel(), Hello("a", 1));
  EXPECT_EQ(core_->GetStudy("s")->state_reason(), "");
}

v1::Hello WithMemory(v1::Hello hello, uint64_t mib) {
  hello.mutable_capabilities()->set_memory_bytes(mib << 20);
  return hello;
}

v1::TrialResult OutOfMemory(const v1::Assign& assign) {
  v1::TrialResult result;
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_epoch(assign.epoch());
  result.set_state(v1::Trial::FAILED);
  result.set_error("command f was killed by the kernel's OOM killer: out of memory on node pi");
  result.set_out_of_memory(true);
  return result;
}

TEST_F(SchedulerCoreTest, ATrialOutOfMemoryIsRetriedOnlyOnALargerWorker) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& small = NewChannel();
  RecordingChannel& same = NewChannel();
  RecordingChannel& large = NewChannel();
  const uint64_t s1 = Connect(small, WithMemory(Hello("pi", 1), 100));
  ASSERT_EQ(small.Assigns().size(), 1u);
  const v1::Assign first = small.Assigns().back();
  core_->HandleStarted(s1, Attempt(first));
  Connect(same, WithMemory(Hello("pi-2", 1), 100));
  Connect(large, WithMemory(Hello("orin", 1), 1024));

  core_->HandleResult(s1, OutOfMemory(first));
  // Not failed: back in the queue, for the 1 GiB worker only (the other 100 MiB one is free).
  ASSERT_EQ(large.Assigns().size(), 1u);
  EXPECT_EQ(large.Assigns()[0].trial_id(), first.trial_id());
  EXPECT_EQ(large.Assigns()[0].attempt(), 2);
  EXPECT_EQ(small.Assigns().size(), 1u);
  EXPECT_EQ(same.Assigns().size(), 0u);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.lost_attempts(), 1);
  EXPECT_THAT(trial.error(), HasSubstr("out of memory on node pi; retried on a worker with more "
                                       "than 100 MiB"));
}

TEST_F(SchedulerCoreTest, ATrialOutOfMemoryFailsWhenNoLargerWorkerIsConnected) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& small = NewChannel();
  RecordingChannel& same = NewChannel();
  const uint64_t s1 = Connect(small, WithMemory(Hello("pi", 1), 100));
  const v1::Assign first = small.Assigns().back();
  core_->HandleStarted(s1, Attempt(first));
  Connect(same, WithMemory(Hello("pi-2", 1), 100));
  core_->HandleResult(s1, OutOfMemory(first));
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::FAILED);
  EXPECT_THAT(trial.error(), HasSubstr("out of memory on node pi"));
  EXPECT_EQ(same.Assigns().size(), 0u);
}

// A Pi that ran out of memory missed its heartbeats, the trial went to a larger board, and the
// Pi, back, reported its attempt's failure: that ended the trial the board was running (the
// edge cluster's test failed so). A lost attempt's failure now ends only that attempt.
TEST_F(SchedulerCoreTest, ALostAttemptsFailureLeavesTheTrialToTheAttemptRunningNow) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& pi = NewChannel();
  const uint64_t s1 = Connect(pi, WithMemory(Hello("pi", 1), 100));
  const v1::Assign lost = pi.Assigns().back();
  core_->HandleStarted(s1, Attempt(lost));
  core_->DisconnectWorker(s1, "missed heartbeats");
  RecordingChannel& orin = NewChannel();
  const uint64_t s2 = Connect(orin, WithMemory(Hello("orin", 1), 1024));
  ASSERT_EQ(orin.Assigns().size(), 1u);
  const v1::Assign rerun = orin.Assigns().back();
  core_->HandleStarted(s2, Attempt(rerun));

  RecordingChannel& back = NewChannel();
  const uint64_t s3 = Connect(back, WithMemory(Hello("pi", 1), 100));
  core_->HandleResult(s3, OutOfMemory(lost));
  v1::TrialResult failed = OutOfMemory(lost);
  failed.set_out_of_memory(false);
  failed.set_error("its own failure");
  core_->HandleResult(s3, failed);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.attempt(), 2);
  EXPECT_EQ(orin.Count(v1::SchedulerMessage::kCancel), 0);

  // Its out of memory still counts: lost again, the trial does not go to the Pi.
  core_->DisconnectWorker(s2, "link down");
  EXPECT_EQ(back.Assigns().size(), 0u);
  RecordingChannel& orin_again = NewChannel();
  const uint64_t s4 = Connect(orin_again, WithMemory(Hello("orin", 1), 1024));
  ASSERT_EQ(orin_again.Assigns().size(), 1u);
  core_->HandleResult(s4, Completed(orin_again.Assigns().back(), 2.0));
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trials_completed(), 1);
  EXPECT_EQ(study->trials_failed(), 0);
}

TEST_F(SchedulerCoreTest, LateResultOfAnEarlierAttemptIsAcceptedOnceAndTheRerunCancelled) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& first = NewChannel();
  RecordingChannel& second = NewChannel();
  const uint64_t s1 = Connect(first, Hello("a", 1));
  const v1::Assign attempt1 = first.Assigns().back();
  core_->DisconnectWorker(s1, "network blip");
  const uint64_t s2 = Connect(second, Hello("b", 1));
  ASSERT_EQ(second.Assigns().size(), 1u);
  // Worker a comes back and delivers attempt 1.
  RecordingChannel& again = NewChannel();
  const uint64_t s3 = Connect(again, Hello("a", 1));
  core_->HandleResult(s3, Completed(attempt1, 3.0));
  EXPECT_EQ(second.Count(v1::SchedulerMessage::kCancel), 1);
  core_->HandleResult(s2, Completed(second.Assigns()[0], 9.0));  // Too late: ignored.
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->trials_completed(), 1);
  EXPECT_EQ(study->best_trial().objective_value(), 3.0);
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
}

// The late result counts as the attempt that produced it: its number, worker, node and start
// (so its duration, and the speed learnt from it), not those of the re-run it cancelled. Its
// worker was not lost after all, so only the second attempt stays charged; the cancelled third
// was not lost either. Its export imports as it is.
TEST_F(SchedulerCoreTest, ALateResultIsRecordedAsTheAttemptThatProducedIt) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(4);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  v1::Hello pi = Hello("a", 1);
  pi.mutable_capabilities()->set_node_name("pi-1");
  v1::Hello orin = Hello("b", 1);
  orin.mutable_capabilities()->set_node_name("orin-1");
  const absl::Time first_start = now_;
  RecordingChannel& first = NewChannel();
  const uint64_t s1 = Connect(first, pi);
  const v1::Assign lost = first.Assigns().back();
  core_->HandleStarted(s1, Attempt(lost));
  now_ += absl::Seconds(30);
  core_->DisconnectWorker(s1, "missed heartbeats");
  for (int rerun = 0; rerun < 2; ++rerun) {  // Lost again, then running a third time.
    RecordingChannel& channel = NewChannel();
    const uint64_t session = Connect(channel, orin);
    ASSERT_EQ(channel.Assigns().size(), 1u);
    core_->HandleStarted(session, Attempt(channel.Assigns().back()));
    now_ += absl::Seconds(5);
    if (rerun == 0) core_->DisconnectWorker(session, "link down");
  }

  RecordingChannel& back = NewChannel();
  core_->HandleResult(Connect(back, pi), Completed(lost, 3.0));
  const v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(trial.attempts_size(), 3);
  EXPECT_EQ(trial.lost_attempts(), 1);
  EXPECT_FALSE(trial.attempts(0).lost());
  EXPECT_TRUE(trial.attempts(1).lost());
  EXPECT_FALSE(trial.attempts(2).lost());
  EXPECT_EQ(trial.worker_id(), "a");
  EXPECT_EQ(trial.node_name(), "pi-1");
  EXPECT_EQ(trial.start_time().seconds(), absl::ToUnixSeconds(first_start));
  EXPECT_EQ(trial.end_time().seconds() - trial.start_time().seconds(), 40);
  // Each attempt keeps its own start, the cancelled third's too.
  ASSERT_TRUE(trial.attempts(2).has_start_time());
  EXPECT_EQ(trial.attempts(2).start_time().seconds(),
            absl::ToUnixSeconds(first_start + absl::Seconds(35)));

  v1::StudyExport exported;
  *exported.mutable_study() = *core_->GetStudy("s");
  *exported.add_trials() = trial;
  testing::TempDatabase target;
  SchedulerCore imported(target.get(), Options());  // The same clock.
  ASSERT_TRUE(imported.Recover().ok());
  ASSERT_TRUE(imported.ImportStudy(exported).ok());
  const v1::Trial again = AllTrials(imported, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(again.attempt(), 1);
  EXPECT_EQ(again.lost_attempts(), 1);
  EXPECT_TRUE(again.attempts(1).lost());
  EXPECT_EQ(again.start_time().seconds(), trial.start_time().seconds());
}

// A worker's NaN or infinite measurement is not kept: stored, it made the study's export one
// that import refused (hostile review). A NaN objective fails the trial as a missing one.
TEST_F(SchedulerCoreTest, AWorkersNonFiniteMeasurementsAreNotKept) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 2)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 2));
  ASSERT_EQ(channel.Assigns().size(), 2u);
  v1::TrialResult measured = Completed(channel.Assigns()[0], 1.0);
  (*measured.mutable_metrics())["wall_seconds"] = std::numeric_limits<double>::quiet_NaN();
  (*measured.mutable_metrics())["cpu_seconds"] = -std::numeric_limits<double>::infinity();
  (*measured.mutable_metrics())["peak_rss_bytes"] = 1e6;
  core_->HandleResult(session, measured);
  core_->HandleResult(session, Completed(channel.Assigns()[1],
                                         std::numeric_limits<double>::quiet_NaN()));
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state(), v1::Trial::COMPLETED);
  EXPECT_FALSE(trials[0].metrics().contains("wall_seconds"));
  EXPECT_FALSE(trials[0].metrics().contains("cpu_seconds"));
  EXPECT_EQ(trials[0].metrics().at("peak_rss_bytes"), 1e6);
  EXPECT_EQ(trials[1].state(), v1::Trial::FAILED);
  EXPECT_THAT(trials[1].error(), HasSubstr("no finite value was reported for the objective"));

  v1::StudyExport exported;
  *exported.mutable_study() = *core_->GetStudy("s");
  for (const v1::Trial& trial : trials) *exported.add_trials() = trial;
  testing::TempDatabase target;
  SchedulerCore imported(target.get(), Options());  // The same clock.
  ASSERT_TRUE(imported.Recover().ok());
  absl::StatusOr<v1::Study> study = imported.ImportStudy(exported);
  EXPECT_TRUE(study.ok()) << study.status();
}

TEST_F(SchedulerCoreTest, UnknownTrialsAreAnsweredNotFatal) {
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  v1::TrialResult result;
  result.set_trial_id(424242);
  result.set_state(v1::Trial::COMPLETED);
  core_->HandleResult(session, result);
  v1::TrialProgress progress;
  progress.set_trial_id(424242);
  core_->HandleProgress(session, progress);
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kAck), 1);
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kCancel), 1);
  EXPECT_EQ(core_->connected_workers(), 1);
}

TEST_F(SchedulerCoreTest, SilentWorkersLoseTheirLeases) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  RecordingChannel& quiet = NewChannel();
  RecordingChannel& chatty = NewChannel();
  Connect(quiet, Hello("quiet", 1));
  const uint64_t talking = Connect(chatty, Hello("chatty", 1));
  now_ += absl::Seconds(2);
  core_->HandleHeartbeat(talking);
  now_ += absl::Seconds(2);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  ASSERT_TRUE(quiet.closed().has_value());
  EXPECT_EQ(quiet.closed()->code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(chatty.closed().has_value());
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 1);
}

TEST_F(SchedulerCoreTest, HeartbeatUtilisationReachesListWorkersAndGarbageIsRefused) {
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 2));
  ASSERT_EQ(core_->ListWorkers().size(), 1u);
  EXPECT_FALSE(core_->ListWorkers()[0].has_utilisation());  // Nothing measured yet.

  v1::Heartbeat beat;
  beat.mutable_utilisation()->set_cpu_cores(1.5);
  beat.mutable_utilisation()->set_memory_bytes(uint64_t{300} << 20);
  beat.mutable_utilisation()->set_gpu_percent(42);
  beat.mutable_utilisation()->set_interval_ms(5000);
  now_ += absl::Seconds(1);
  core_->HandleHeartbeat(session, beat);
  v1::Worker worker = core_->ListWorkers()[0];
  EXPECT_EQ(worker.utilisation().cpu_cores(), 1.5);
  EXPECT_EQ(worker.utilisation().memory_bytes(), uint64_t{300} << 20);
  EXPECT_EQ(worker.utilisation().gpu_percent(), 42);
  EXPECT_EQ(worker.utilisation_time().seconds(), absl::ToUnixSeconds(now_));

  // Each lie is refused whole; the last good value and its time stay.
  const absl::Time good_time = now_;
  std::vector<v1::Heartbeat> lies(5, beat);
  lies[0].mutable_utilisation()->set_cpu_cores(std::nan(""));
  lies[1].mutable_utilisation()->set_cpu_cores(1e9);
  lies[2].mutable_utilisation()->set_gpu_percent(250);
  lies[3].mutable_utilisation()->set_memory_bytes(~uint64_t{0});
  lies[4].mutable_utilisation()->set_interval_ms(-1);
  ::testing::internal::CaptureStderr();
  for (const v1::Heartbeat& lie : lies) {
    now_ += absl::Seconds(1);
    core_->HandleHeartbeat(session, lie);
    worker = core_->ListWorkers()[0];
    EXPECT_EQ(worker.utilisation().cpu_cores(), 1.5) << lie.ShortDebugString();
    EXPECT_EQ(worker.utilisation().gpu_percent(), 42) << lie.ShortDebugString();
    EXPECT_EQ(worker.utilisation().memory_bytes(), uint64_t{300} << 20);
    EXPECT_EQ(worker.utilisation_time().seconds(), absl::ToUnixSeconds(good_time));
  }
  // One warning for the five: a worker sending bad figures thousands of times a second must
  // not flood the log (the hostile review's wrote 20,000 lines in 1.5 s).
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(logged.begin(), logged.end(), '\n'), 1) << logged;
  EXPECT_EQ(core_->connected_workers(), 1);  // A refused figure is no reason to cut it off.
}

TEST_F(SchedulerCoreTest, StudiesShareAWorkerFairly) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("a", 50)).ok());
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("b", 50)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 20; ++i) core_->HandleResult(session, Completed(channel.Assigns().back(), 1));
  std::map<std::string, int> per_study;
  for (const v1::Assign& a : channel.Assigns()) per_study[a.study()]++;
  EXPECT_EQ(per_study["a"], 11);
  EXPECT_EQ(per_study["b"], 10);
}

TEST_F(SchedulerCoreTest, ParallelTrialsCapsRunningTrials) {
  v1::StudySpec spec = FunctionStudy("s", 10);
  spec.set_parallel_trials(2);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  Connect(channel, Hello("w", 8));
  EXPECT_EQ(channel.Assigns().size(), 2u);
}

TEST_F(SchedulerCoreTest, StopCancelsRunningAndPendingTrials) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 2));
  absl::StatusOr<v1::Study> stopped = core_->StopStudy("s");
  EXPECT_EQ(stopped->state(), v1::Study::STOPPED);
  EXPECT_EQ(stopped->trials_cancelled(), 2);
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kCancel), 2);
  core_->HandleResult(session, Completed(channel.Assigns()[0], 1));  // Arrives after the stop.
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 0);
  EXPECT_EQ(core_->StopStudy("s")->state(), v1::Study::STOPPED);  // Stopping again: no-op.
}

TEST_F(SchedulerCoreTest, GridStudyEndsWhenExhausted) {
  v1::StudySpec spec = FunctionStudy("g", 0);
  spec.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  spec.mutable_algorithm()->set_grid_points(3);
  spec.set_max_trials(100);  // More than the 9 grid points.
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 2));
  while (core_->GetStudy("g")->trials_running() > 0) {
    const auto assigns = channel.Assigns();
    for (const auto& a : assigns) core_->HandleResult(session, Completed(a, 1));
  }
  absl::StatusOr<v1::Study> study = core_->GetStudy("g");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trials_completed(), 9);
  EXPECT_THAT(study->state_reason(), HasSubstr("exhausted"));
}

TEST_F(SchedulerCoreTest, RecoveryRebuildsStudiesAndContinuesTheSameSuggestions) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 6)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 3; ++i) core_->HandleResult(session, Completed(channel.Assigns().back(), i));
  // Trial 3 is running when the scheduler "restarts".
  const v1::Assign running = channel.Assigns().back();

  // What an uninterrupted scheduler would have suggested next.
  testing::TempDatabase reference_db;
  SchedulerCore reference(reference_db.get(), Options());
  ASSERT_TRUE(reference.CreateStudy(FunctionStudy("s", 6)).ok());
  RecordingChannel& reference_channel = NewChannel();
  const uint64_t reference_session = *reference.ConnectWorker(Hello("w", 1), {}, &reference_channel);
  for (int i = 0; i < 5; ++i) {
    reference.HandleResult(reference_session, Completed(reference_channel.Assigns().back(), i));
  }

  Restart();
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->trials_completed(), 3);
  EXPECT_EQ(study->trials_running(), 0);
  RecordingChannel& after = NewChannel();
  const uint64_t again = Connect(after, Hello("w", 1));
  ASSERT_EQ(after.Assigns().size(), 1u);
  EXPECT_EQ(after.Assigns()[0].trial_id(), running.trial_id());
  EXPECT_EQ(after.Assigns()[0].attempt(), 2);
  core_->HandleResult(again, Completed(after.Assigns()[0], 3));
  ASSERT_EQ(after.Assigns().size(), 2u);
  EXPECT_EQ(after.Assigns()[1].params().at("x1").double_value(),
            reference_channel.Assigns()[4].params().at("x1").double_value());
}

TEST_F(SchedulerCoreTest, BadHellosAreRefused) {
  RecordingChannel& channel = NewChannel();
  EXPECT_EQ(core_->ConnectWorker(Hello("", 1), {}, &channel).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ConnectWorker(Hello("w", 0), {}, &channel).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ConnectWorker(Hello("w", 1, {}), {}, &channel).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// --- Trust: only the worker an attempt was given to settles it; nobody burns attempts. ---

TEST_F(SchedulerCoreTest, AResultFromAWorkerNotGivenTheAttemptIsRefused) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& honest = NewChannel();
  RecordingChannel& forger = NewChannel();
  Connect(honest, Hello("honest", 1));
  const v1::Assign assign = honest.Assigns().back();
  // A worker that runs only other models, never assigned anything, claims the trial.
  const uint64_t forging = Connect(forger, Hello("forger", 1, {v1::Model::RANDOM_FOREST}));
  core_->HandleResult(forging, Completed(assign, -1e9));
  EXPECT_EQ(forger.Count(v1::SchedulerMessage::kAck), 0);
  EXPECT_EQ(forger.Count(v1::SchedulerMessage::kCancel), 1);
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->trials_completed(), 0);
  EXPECT_EQ(study->trials_running(), 1);
  EXPECT_FALSE(study->has_best_trial());
}

TEST_F(SchedulerCoreTest, ASecondConnectionCannotPushOutAWorkerThatIsStillHeardFrom) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& real = NewChannel();
  const uint64_t session = Connect(real, Hello("a", 1));
  core_->HandleStarted(session, Attempt(real.Assigns().back()));
  for (int i = 0; i < 3; ++i) {
    RecordingChannel& impostor = NewChannel();
    EXPECT_EQ(core_->ConnectWorker(Hello("a", 1), {}, &impostor).status().code(),
              absl::StatusCode::kAlreadyExists);
  }
  EXPECT_FALSE(real.closed().has_value());
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 1);
  // With a certificate naming it, the worker itself may take over at once.
  RecordingChannel& certified = NewChannel();
  ASSERT_TRUE(core_->ConnectWorker(Hello("a", 1), {"a"}, &certified).ok());
  RecordingChannel& wrong_name = NewChannel();
  EXPECT_EQ(core_->ConnectWorker(Hello("b", 1), {"a"}, &wrong_name).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(SchedulerCoreTest, AReconnectingWorkerKeepsTheAttemptsItListsWithoutLosingOne) {
  const v1::Assign assign = LoseAStartedTrial();  // Charged: one more loss would fail it...
  RecordingChannel& second = NewChannel();
  v1::Hello hello = Hello("a", 1);
  *hello.add_running() = Attempt(assign);
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0).lost_attempts(), 1);
  const uint64_t s2 = Connect(second, hello);  // ...but the worker still runs it: refunded.
  EXPECT_EQ(second.Assigns().size(), 0u);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.attempt(), 1);
  EXPECT_EQ(trial.lost_attempts(), 0);
  core_->HandleResult(s2, Completed(assign, 2.0));
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 1);
}

// An attempt given up for lost whose result still comes is not a lost attempt: the charge is
// taken back from that attempt's record (before, a flag of the live trial held it, so such a
// trial said "1 lost" beside the attempt that counted).
TEST_F(SchedulerCoreTest, AnAttemptWhoseResultCameAfterAllIsNotCountedLost) {
  const v1::Assign assign = LoseAStartedTrial();
  v1::Trial pending = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  ASSERT_EQ(pending.state(), v1::Trial::PENDING);
  EXPECT_EQ(pending.lost_attempts(), 1);
  EXPECT_TRUE(pending.attempts(0).lost());

  RecordingChannel& back = NewChannel();  // Back, without listing it: its result alone.
  core_->HandleResult(Connect(back, Hello("a", 1)), Completed(assign, 2.0));
  const v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.lost_attempts(), 0);
  EXPECT_FALSE(trial.attempts(0).lost());
}

// The charge is kept with the trial, so a worker that comes back for its attempt after a
// scheduler restart gets it back uncharged (before, the flag that held it was not stored: the
// trial ran on with "1 lost", one loss from failing under max_attempts 2).
TEST_F(SchedulerCoreTest, AWorkerBackForItsAttemptAfterARestartTakesBackTheCharge) {
  const v1::Assign assign = LoseAStartedTrial();
  Restart();
  EXPECT_EQ(AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0).lost_attempts(), 1);

  const uint64_t s2 = ReconnectRunning(assign);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.lost_attempts(), 0);
  EXPECT_FALSE(trial.attempts(0).lost());
  core_->HandleResult(s2, Completed(assign, 2.0));
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 1);
}

TEST_F(SchedulerCoreTest, AFlappingWorkerThatNeverStartsATrialCostsItNoAttempt) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  for (int i = 0; i < 50; ++i) {
    RecordingChannel& flapping = NewChannel();
    const uint64_t session = Connect(flapping, Hello(absl::StrCat("flap-", i), 1));
    ASSERT_EQ(flapping.Assigns().size(), 1u);
    core_->DisconnectWorker(session, "dropped within 20 ms");
  }
  RecordingChannel& steady = NewChannel();
  const uint64_t session = Connect(steady, Hello("steady", 1));
  ASSERT_EQ(steady.Assigns().size(), 1u);
  EXPECT_EQ(steady.Assigns()[0].attempt(), 51);
  core_->HandleResult(session, Completed(steady.Assigns()[0], 1.0));
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

TEST_F(SchedulerCoreTest, ADrainingWorkerGetsNothingNewAndItsHandBackCostsNoAttempt) {
  v1::StudySpec spec = FunctionStudy("s", 2);
  spec.set_max_attempts(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& stopping = NewChannel();
  RecordingChannel& idle = NewChannel();
  const uint64_t s1 = Connect(stopping, Hello("stopping", 1));
  const v1::Assign assign = stopping.Assigns().back();
  core_->HandleStarted(s1, Attempt(assign));
  core_->HandleDraining(s1, v1::Draining());
  v1::TrialResult handed_back = Completed(assign, 0);
  handed_back.set_state(v1::Trial::CANCELLED);
  core_->HandleResult(s1, handed_back);
  EXPECT_EQ(stopping.Assigns().size(), 1u);  // Not given the trial again.
  EXPECT_TRUE(
      testing_util::WaitUntil([&] { return stopping.Count(v1::SchedulerMessage::kAck) == 1; }));
  const uint64_t s2 = Connect(idle, Hello("idle", 1));
  ASSERT_EQ(idle.Assigns().size(), 1u);
  EXPECT_EQ(idle.Assigns()[0].trial_id(), assign.trial_id());
  core_->DisconnectWorker(s1, "stopped");
  core_->HandleResult(s2, Completed(idle.Assigns()[0], 1.0));
  v1::Trial trial = *core_->GetBestTrial("s");
  EXPECT_EQ(trial.id(), assign.trial_id());
  EXPECT_EQ(trial.lost_attempts(), 0);
}

TEST_F(SchedulerCoreTest, AProgressFloodIsAnsweredOncePerTrialAndThenCutOff) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  v1::TrialProgress progress;
  progress.set_trial_id(999'999);
  for (int i = 0; i < 100'000; ++i) core_->HandleProgress(session, progress);
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kCancel), 1);
  EXPECT_FALSE(channel.closed().has_value());
  for (uint64_t id = 1'000'000; id < 1'000'000 + kMaxUnknownTrialsPerSession; ++id) {
    progress.set_trial_id(id);
    core_->HandleProgress(session, progress);
  }
  ASSERT_TRUE(channel.closed().has_value());
  EXPECT_EQ(channel.closed()->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(core_->connected_workers(), 0);
  EXPECT_EQ(core_->GetStudy("s")->trials_pending(), 1);  // Its trial went back, uncharged.
}

TEST_F(SchedulerCoreTest, ATrialPastItsTimeoutFailsAndFreesTheSlot) {
  v1::StudySpec spec = FunctionStudy("s", 2);
  spec.mutable_trial_timeout()->set_seconds(10);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  ASSERT_EQ(channel.Assigns().size(), 1u);
  EXPECT_EQ(channel.Assigns()[0].timeout_ms(), 10'000);
  core_->HandleStarted(session, Attempt(channel.Assigns()[0]));
  now_ += absl::Seconds(12);  // Past the timeout, within the lease's grace.
  EXPECT_EQ(core_->ExpireTrials(), 0);
  now_ += absl::Seconds(2);
  EXPECT_EQ(core_->ExpireTrials(), 1);
  v1::Trial failed = AllTrials(*core_, "s", v1::Trial::FAILED).at(0);
  EXPECT_THAT(failed.error(), HasSubstr("trial_timeout of 10s"));
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kCancel), 1);
  EXPECT_EQ(channel.Assigns().size(), 2u);  // The slot went to the next trial.
}

TEST_F(SchedulerCoreTest, ATimeoutNeverFailsATrialTheWorkerHadNotStarted) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.mutable_trial_timeout()->set_seconds(10);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  Connect(channel, Hello("w", 1));
  now_ += absl::Seconds(20);  // Queued on the worker behind a trial it was still stopping.
  EXPECT_EQ(core_->ExpireTrials(), 1);
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_NE(trial.state(), v1::Trial::FAILED);
  EXPECT_EQ(trial.lost_attempts(), 0);
}

TEST_F(SchedulerCoreTest, TrialsTimingOutTogetherAreCountedOnce) {
  v1::StudySpec spec = FunctionStudy("s", 3);
  spec.mutable_trial_timeout()->set_seconds(10);
  spec.set_max_failed_trials(0);  // The first failure ends the study and cancels the rest.
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 3));
  ASSERT_EQ(channel.Assigns().size(), 3u);
  for (const v1::Assign& a : channel.Assigns()) core_->HandleStarted(session, Attempt(a));
  now_ += absl::Seconds(20);
  core_->ExpireTrials();
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::FAILED);
  EXPECT_EQ(study->trials_failed() + study->trials_cancelled(), 3);
}

TEST_F(SchedulerCoreTest, ASchedulerShuttingDownChargesNoAttempt) {
  v1::StudySpec spec = FunctionStudy("s", 1);
  spec.set_max_attempts(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  core_->HandleStarted(session, Attempt(channel.Assigns()[0]));
  core_->Shutdown("restart");
  core_->DisconnectWorker(session, "stream ended");  // What the session's OnDone does.
  v1::Trial trial = AllTrials(*core_, "s", v1::Trial::STATE_UNSPECIFIED).at(0);
  EXPECT_EQ(trial.state(), v1::Trial::PENDING);
  EXPECT_EQ(trial.lost_attempts(), 0);
}

TEST_F(SchedulerCoreTest, AStudyWhoseTrialsAllFailedEndsFailed) {
  v1::StudySpec spec = FunctionStudy("s", 2);
  spec.set_max_failed_trials(5);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 2; ++i) {
    v1::TrialResult result = Completed(channel.Assigns().back(), 0);
    result.set_state(v1::Trial::FAILED);
    result.set_error(std::string(1'000'000, 'e'));  // Cut to the limit.
    core_->HandleResult(session, result);
  }
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::FAILED);
  EXPECT_THAT(study->state_reason(), HasSubstr("every one failed"));
  EXPECT_LE(AllTrials(*core_, "s", v1::Trial::FAILED).at(0).error().size(),
            kMaxWorkerErrorBytes + 3);
}

TEST_F(SchedulerCoreTest, WorkerTextAndMetricsAreBounded) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& channel = NewChannel();
  v1::Hello long_id = Hello(std::string(kMaxWorkerIdBytes + 1, 'w'), 1);
  EXPECT_EQ(core_->ConnectWorker(long_id, {}, &channel).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Text every user is shown, and a speed prior (found by a hostile review: kept as sent).
  std::vector<v1::Hello> refused = {Hello("w\x1b[2Jx", 1), Hello("w\xc2\x9b" "31m", 1),
                                    Hello("w\xe2\x80\xaex", 1), Hello("w", 1), Hello("w", 1),
                                    Hello("w", 1)};
  refused[3].mutable_capabilities()->set_node_name("pi\rforged");
  refused[4].mutable_capabilities()->set_trial_cpu_cores(std::nan(""));
  refused[5].mutable_capabilities()->set_trial_cpu_cores(-1);
  for (const v1::Hello& hello : refused) {
    EXPECT_EQ(core_->ConnectWorker(hello, {}, &channel).status().code(),
              absl::StatusCode::kInvalidArgument)
        << hello.ShortDebugString();
  }
  EXPECT_EQ(core_->connected_workers(), 0);
  const uint64_t session = Connect(channel, Hello("w", 1));
  v1::TrialResult result = Completed(channel.Assigns().back(), 1.5);
  for (int i = 0; i < 1000; ++i) (*result.mutable_metrics())[absl::StrCat("m", i)] = i;
  (*result.mutable_metrics())["\x1b[31mred"] = 1;
  result.set_device("gpu\xc2\x9b" "31m\xe2\x80\xae" + std::string(100'000, 'x'));
  core_->HandleResult(session, result);
  v1::Trial trial = *core_->GetBestTrial("s");
  EXPECT_EQ(trial.objective_value(), 1.5);
  EXPECT_FALSE(trial.metrics().contains("\x1b[31mred"));
  EXPECT_LE(trial.metrics_size(), kMaxResultMetrics);
  EXPECT_LE(trial.device().size(), kMaxWorkerTextBytes + 3);
  EXPECT_EQ(trial.device().substr(0, 10), "gpu 31m xx");  // C1's CSI, a direction override.
}

TEST_F(SchedulerCoreTest, StudiesBeyondTheLimitAreRefused) {
  SchedulerOptions options = Options();
  options.max_studies = 2;
  SchedulerCore core(db_.get(), options);
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("a", 1)).ok());
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("b", 1)).ok());
  EXPECT_EQ(core.CreateStudy(FunctionStudy("c", 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(core.CreateStudy(FunctionStudy("a", 1)).ok());  // Idempotent creates still work.
}

}  // namespace
}  // namespace dhpt::scheduler

namespace dhpt::scheduler {
namespace {

// An optimiser that holds its first suggestion until released: a stand-in for a slow GP fit.
// A store whose commits are reported only when the test says so (a slow disk), and whose
// health the test may set (a full disk), behind the StudyStore interface; the writes
// themselves go to a real database. Like the real store, it calls the listener under a lock of
// its own, never under the one health() takes.
class HeldStore : public StudyStore {
 public:
  explicit HeldStore(StudyStore* real) : real_(real) {
    real_->SetCommitListener([this](WriteSequence sequence) {
      {
        absl::MutexLock lock(&mutex_);
        committed_ = sequence;
      }
      Report();
    });
  }
  ~HeldStore() override { real_->SetCommitListener(nullptr); }
  absl::StatusOr<StoredState> Load() override { return real_->Load(); }
  absl::StatusOr<std::vector<StoredIntermediateValue>> LoadIntermediateValues(
      const std::string& study) override {
    return real_->LoadIntermediateValues(study);
  }
  WriteSequence PutStudy(const v1::Study& study) override { return real_->PutStudy(study); }
  WriteSequence PutTrial(const v1::Trial& trial) override { return real_->PutTrial(trial); }
  WriteSequence PutIntermediateValue(const std::string& study, uint64_t trial_id, int attempt,
                                     int64_t step, double value) override {
    return real_->PutIntermediateValue(study, trial_id, attempt, step, value);
  }
  WriteSequence PutImportedStudy(const v1::Study& study, const std::vector<v1::Trial>& trials,
                                 const std::vector<StoredIntermediateValue>& values) override {
    return real_->PutImportedStudy(study, trials, values);
  }
  absl::StatusOr<std::vector<StoredIntermediateValue>> ReadIntermediateValues(
      const std::vector<uint64_t>& trial_ids) const override {
    return real_->ReadIntermediateValues(trial_ids);
  }
  WriteSequence DeleteStudy(const std::string& study) override { return real_->DeleteStudy(study); }
  WriteSequence last_sequence() const override { return real_->last_sequence(); }
  absl::Status Sync(WriteSequence sequence) override { return real_->Sync(sequence); }
  void SetCommitListener(std::function<void(WriteSequence)> listener) override {
    absl::MutexLock lock(&listener_mutex_);
    listener_ = std::move(listener);
  }
  absl::Status health() const override {
    absl::MutexLock lock(&mutex_);
    return health_.ok() ? real_->health() : health_;
  }
  int64_t size_bytes() const override { return real_->size_bytes(); }

  void Hold() {
    absl::MutexLock lock(&mutex_);
    held_ = true;
  }
  void Release() {
    {
      absl::MutexLock lock(&mutex_);
      held_ = false;
    }
    Report();
  }
  void SetHealth(absl::Status health) {
    absl::MutexLock lock(&mutex_);
    health_ = std::move(health);
  }

 private:
  void Report() {
    WriteSequence committed;
    {
      absl::MutexLock lock(&mutex_);
      if (held_ || committed_ == 0) return;
      committed = committed_;
    }
    absl::MutexLock lock(&listener_mutex_);
    if (listener_) listener_(committed);
  }

  StudyStore* const real_;
  mutable absl::Mutex mutex_;
  bool held_ ABSL_GUARDED_BY(mutex_) = false;
  WriteSequence committed_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status health_ ABSL_GUARDED_BY(mutex_);
  absl::Mutex listener_mutex_;
  std::function<void(WriteSequence)> listener_ ABSL_GUARDED_BY(listener_mutex_);
};

TEST(SchedulerCoreDurabilityTest, AResultIsAcknowledgedOnlyOnceItIsStored) {
  testing::TempDatabase db;
  HeldStore store(db.get());
  RecordingChannel channel;  // Before the core: it must outlive what the core sends it.
  SchedulerCore core(&store, SchedulerOptions());
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("s", 2)).ok());
  const uint64_t session = *core.ConnectWorker(Hello("w", 1), {}, &channel);
  store.Hold();
  core.HandleResult(session, Completed(channel.Assigns().back(), 1));
  EXPECT_EQ(core.GetStudy("s")->trials_completed(), 1);  // Counted at once...
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kAck), 0);  // ...acknowledged only when stored.
  store.Release();
  EXPECT_TRUE(testing_util::WaitUntil([&] { return channel.Count(v1::SchedulerMessage::kAck) == 1; }));
}

TEST(SchedulerCoreDurabilityTest, NothingNewStartsWhileTheStoreCannotWrite) {
  testing::TempDatabase db;
  HeldStore store(db.get());
  RecordingChannel channel;  // Before the core: it must outlive what the core sends it.
  SchedulerCore core(&store, SchedulerOptions());
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("s", 5)).ok());
  const uint64_t session = *core.ConnectWorker(Hello("w", 1), {}, &channel);
  ASSERT_EQ(channel.Assigns().size(), 1u);
  store.Hold();
  store.SetHealth(absl::UnavailableError("database or disk is full"));
  core.HandleResult(session, Completed(channel.Assigns().back(), 1));
  EXPECT_EQ(channel.Assigns().size(), 1u);  // Its result could not be acknowledged.
  EXPECT_EQ(core.CreateStudy(FunctionStudy("t", 5)).status().code(),
            absl::StatusCode::kUnavailable);
  store.SetHealth(absl::OkStatus());
  store.Release();  // The next commit: dispatch resumes.
  EXPECT_TRUE(testing_util::WaitUntil([&] { return channel.Assigns().size() == 2; }));
  EXPECT_TRUE(testing_util::WaitUntil([&] { return channel.Count(v1::SchedulerMessage::kAck) == 1; }));
}

// A client told of a trial that a crash then forgets could complete, after the restart, the
// different point that takes its number: SuggestTrials answers once its leases are stored.
TEST(SchedulerCoreDurabilityTest, AskAndTellLeasesAreAnsweredOnlyOnceStored) {
  testing::TempDatabase db;
  HeldStore store(db.get());
  SchedulerCore core(&store, SchedulerOptions());
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    name: "ext" model { kind: EXTERNAL } objective { metric: "loss" goal: MINIMIZE }
    parameters { name: "lr" double_range { min: 0.001 max: 0.1 } } max_trials: 5)pb", &spec));
  ASSERT_TRUE(core.CreateStudy(spec).ok());
  store.Hold();
  absl::Notification answered;
  absl::StatusOr<v1::SuggestTrialsResponse> answer;
  core.SuggestTrials("ext", 1, "a", "", [&](absl::StatusOr<v1::SuggestTrialsResponse> response) {
    answer = std::move(response);
    answered.Notify();
  });
  EXPECT_FALSE(answered.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  store.Release();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->trials_size(), 1);
  // Asking again for what it holds starts no lease: answered at once, stored or not.
  store.Hold();
  absl::StatusOr<v1::SuggestTrialsResponse> again = core.SuggestTrials("ext", 1, "a");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->trials(0).number(), answer->trials(0).number());
  store.Release();

  // The disk fills while a new lease is being stored: the caller hears UNAVAILABLE at the next
  // sweep (not at its deadline), and gets the trial once writes succeed.
  store.Hold();
  absl::Notification refused;
  absl::StatusOr<v1::SuggestTrialsResponse> unstored;
  core.SuggestTrials("ext", 1, "b", "", [&](absl::StatusOr<v1::SuggestTrialsResponse> response) {
    unstored = std::move(response);
    refused.Notify();
  });
  store.SetHealth(absl::UnavailableError("database or disk is full"));
  core.ExpireLeases();
  ASSERT_TRUE(refused.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(unstored.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(unstored.status().message()), HasSubstr("same client_id"));
  store.SetHealth(absl::OkStatus());
  store.Release();
  absl::StatusOr<v1::SuggestTrialsResponse> held = core.SuggestTrials("ext", 1, "b");
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->trials_size(), 1);
  EXPECT_NE(held->trials(0).number(), answer->trials(0).number());
}

TEST_F(SchedulerCoreTest, AWorkerHoldingManyUnacknowledgedResultsMayReconnect) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  v1::Hello hello = Hello("w", 1);
  for (int i = 0; i < 1000; ++i) {  // After a long disk-full spell.
    v1::TrialAttempt& held = *hello.add_running();
    held.set_trial_id(100'000 + i);
    held.set_attempt(1);
  }
  RecordingChannel& channel = NewChannel();
  EXPECT_TRUE(core_->ConnectWorker(hello, {}, &channel).ok());
  for (int i = 0; i < kMaxHeldAttempts; ++i) hello.add_running()->set_trial_id(1);
  RecordingChannel& other = NewChannel();
  EXPECT_EQ(core_->ConnectWorker(hello, {}, &other).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerCoreTest, AResultMeantForAnotherSchedulersTrialIsRefused) {
  // The first scheduler lost its state (it kept none): the worker still runs trial 1 of it.
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("old", 1)).ok());
  RecordingChannel& first = NewChannel();
  Connect(first, Hello("w", 2));
  const v1::Assign old = first.Assigns().back();
  testing::TempDatabase fresh;
  core_ = std::make_unique<SchedulerCore>(fresh.get(), Options());
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("new", 1)).ok());

  // The worker comes back holding the old attempt, is given the new trial of the same id...
  RecordingChannel& second = NewChannel();
  v1::Hello hello = Hello("w", 2);
  *hello.add_running() = Attempt(old);
  const uint64_t session = Connect(second, hello);
  ASSERT_EQ(second.Assigns().size(), 1u);
  const v1::Assign current = second.Assigns()[0];
  ASSERT_EQ(current.trial_id(), old.trial_id());  // The id is reused: the state was lost.
  ASSERT_NE(current.epoch(), old.epoch());
  // ...and then delivers the old result: refused, for that attempt only, and not counted.
  core_->HandleResult(session, Completed(old, -1e9));
  EXPECT_EQ(core_->GetStudy("new")->trials_completed(), 0);
  // Told to drop the old attempt as it came back with it, and again as its result came.
  ASSERT_EQ(second.Count(v1::SchedulerMessage::kCancel), 2);
  for (const v1::SchedulerMessage& message : second.sent()) {
    if (!message.has_cancel()) continue;
    EXPECT_EQ(message.cancel().epoch(), old.epoch());
  }
  core_->HandleResult(session, Completed(current, 3));
  EXPECT_EQ(core_->GetBestTrial("new")->objective_value(), 3);
  core_.reset();  // Before `fresh`, its store.
}

TEST_F(SchedulerCoreTest, ARestartKeepsTrialIdsAndTakesBackWhatWorkersStillHold) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 4)).ok());
  RecordingChannel& before = NewChannel();
  const uint64_t session = Connect(before, Hello("w", 2));
  ASSERT_EQ(before.Assigns().size(), 2u);
  core_->HandleStarted(session, Attempt(before.Assigns()[0]));
  core_->HandleStarted(session, Attempt(before.Assigns()[1]));
  const v1::Assign finished = before.Assigns()[0];
  const v1::Assign running = before.Assigns()[1];
  ASSERT_TRUE(core_->DeleteStudy("s", /*force=*/false).code() == absl::StatusCode::kFailedPrecondition);
  // The scheduler dies (its last writes were committed; the worker's results never came).
  Restart();
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 0);

  RecordingChannel& after = NewChannel();
  v1::Hello hello = Hello("w", 2);
  *hello.add_running() = Attempt(finished);
  *hello.add_running() = Attempt(running);
  const uint64_t again = Connect(after, hello);
  EXPECT_EQ(core_->GetStudy("s")->trials_running(), 2);  // Both taken back, neither re-sent.
  EXPECT_TRUE(after.Assigns().empty());
  core_->HandleResult(again, Completed(finished, 5));
  core_->HandleResult(again, Completed(finished, 6));  // Resent: counted once.
  core_->HandleResult(again, Completed(running, 4));
  std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].objective_value(), 5);
  EXPECT_EQ(trials[0].attempt(), 1);  // Nothing was charged or re-run.
  EXPECT_EQ(trials[1].attempt(), 1);
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 2);
  // New trials get new ids, above every id the first life handed out.
  EXPECT_GT(trials[2].id(), running.trial_id());
  std::set<uint64_t> ids;
  for (const v1::Trial& trial : trials) ids.insert(trial.id());
  EXPECT_EQ(ids.size(), 4u);
}

TEST_F(SchedulerCoreTest, DeletedStudiesAreGoneAndTheirIdsAreNotReused) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 2)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  const v1::Assign first = channel.Assigns().back();
  EXPECT_EQ(core_->DeleteStudy("s", false).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(core_->DeleteStudy("s", /*force=*/true).ok());
  EXPECT_EQ(core_->GetStudy("s").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(core_->DeleteStudy("s", true).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(channel.Count(v1::SchedulerMessage::kCancel), 1);  // Its running trial stops.
  core_->HandleResult(session, Completed(first, 1));  // Late: acknowledged, counted nowhere.
  Restart();
  EXPECT_TRUE(core_->ListStudies(0, "")->items.empty());
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 1)).ok());
  RecordingChannel& again = NewChannel();
  Connect(again, Hello("w", 1));
  EXPECT_GT(again.Assigns().back().trial_id(), first.trial_id());
}

TEST_F(SchedulerCoreTest, ListsComeInPagesThatFollowOnExactly) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(core_->CreateStudy(FunctionStudy(absl::StrCat("s", i), 25)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 60; ++i) core_->HandleResult(session, Completed(channel.Assigns().back(), i));
  std::vector<std::string> names;
  std::string token;
  do {
    absl::StatusOr<ListPage<v1::Study>> page = core_->ListStudies(2, token);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->items.size(), 2u);
    for (const v1::Study& study : page->items) names.push_back(study.spec().name());
    token = page->next_page_token;
  } while (!token.empty());
  EXPECT_EQ(names, (std::vector<std::string>{"s0", "s1", "s2", "s3", "s4"}));

  std::vector<int64_t> numbers;
  do {
    absl::StatusOr<ListPage<v1::Trial>> page = core_->ListTrials("s0", v1::Trial::COMPLETED, 5, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const v1::Trial& trial : page->items) numbers.push_back(trial.number());
    token = page->next_page_token;
  } while (!token.empty());
  ASSERT_EQ(numbers.size(), static_cast<size_t>(core_->GetStudy("s0")->trials_completed()));
  for (size_t i = 0; i < numbers.size(); ++i) EXPECT_EQ(numbers[i], static_cast<int64_t>(i));

  // A token is good only for the request that returned it.
  const std::string other = core_->ListTrials("s0", v1::Trial::STATE_UNSPECIFIED, 1, "")->next_page_token;
  EXPECT_EQ(core_->ListTrials("s1", v1::Trial::STATE_UNSPECIFIED, 1, other).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ListStudies(1, other).status().code(), absl::StatusCode::kInvalidArgument);
  // Nor for another view of the same trials (values_only, then full trials).
  using View = SchedulerCore::TrialView;
  const std::string values_only =
      core_->ListTrials("s0", v1::Trial::STATE_UNSPECIFIED, 1, "", View::kValuesOnly)
          ->next_page_token;
  EXPECT_TRUE(core_->ListTrials("s0", v1::Trial::STATE_UNSPECIFIED, 1, values_only,
                                View::kValuesOnly).ok());
  EXPECT_EQ(core_->ListTrials("s0", v1::Trial::STATE_UNSPECIFIED, 1, values_only).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ListTrials("s0", v1::Trial::STATE_UNSPECIFIED, 1, other, View::kPlot)
                .status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ListStudies(1, "garbage!").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->ListStudies(-1, "").status().code(), absl::StatusCode::kInvalidArgument);
  // Nor for a new study of a deleted one's name.
  const std::string of_old = core_->ListTrials("s1", v1::Trial::STATE_UNSPECIFIED, 1, "")->next_page_token;
  ASSERT_TRUE(core_->DeleteStudy("s1", /*force=*/true).ok());
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s1", 25)).ok());
  EXPECT_EQ(core_->ListTrials("s1", v1::Trial::STATE_UNSPECIFIED, 1, of_old).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// values_only (the dashboard's history of a whole study): the same trials and values as the
// full listing, without the parameters, metrics and attempts a finished trial is read back for.
TEST_F(SchedulerCoreTest, ListTrialsValuesOnlyKeepsNumbersStatesAndValuesOnly) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 8)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 5; ++i) core_->HandleResult(session, Completed(channel.Assigns().back(), 10 - i));
  absl::StatusOr<ListPage<v1::Trial>> full = core_->ListTrials("s", v1::Trial::STATE_UNSPECIFIED, 100, "");
  absl::StatusOr<ListPage<v1::Trial>> values =
      core_->ListTrials("s", v1::Trial::STATE_UNSPECIFIED, 100, "",
                        SchedulerCore::TrialView::kValuesOnly);
  ASSERT_TRUE(full.ok() && values.ok());
  ASSERT_EQ(values->items.size(), full->items.size());
  ASSERT_GE(full->items.size(), 6u);  // 5 completed and one running.
  for (size_t i = 0; i < full->items.size(); ++i) {
    const v1::Trial& a = full->items[i];
    const v1::Trial& b = values->items[i];
    EXPECT_EQ(b.number(), a.number());
    EXPECT_EQ(b.state(), a.state());
    EXPECT_EQ(b.has_objective_value(), a.has_objective_value());
    EXPECT_EQ(b.objective_value(), a.objective_value());
    if (a.state() == v1::Trial::COMPLETED) {
      EXPECT_FALSE(a.params().empty());
    }
    EXPECT_TRUE(b.params().empty() && b.metrics().empty() && b.attempts().empty()) << b.DebugString();
    EXPECT_LT(b.ByteSizeLong() * 3, a.ByteSizeLong());
  }
}

// An XGBoost study, whose trials stream r2 as early stopping needs (FUNCTION trials stream
// nothing); minimised here so that lower values read as better, as in the other tests.
v1::StudySpec PrunableStudy(const std::string& name, int max_trials) {
  v1::StudySpec spec;
  google::protobuf::TextFormat::ParseFromString(R"pb(
    model { kind: XGBOOST }
    dataset { friedman1 { samples: 200 features: 10 } }
    objective { metric: "r2" goal: MINIMIZE }
    parameters { name: "eta" double_range { min: 0.01 max: 0.3 } })pb", &spec);
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  return spec;
}

TEST_F(SchedulerCoreTest, AMedianRuleStopsALosingTrialFreesItsSlotAndChargesNothing) {
  v1::StudySpec spec = PrunableStudy("s", 4);
  spec.mutable_early_stopping()->mutable_median()->set_n_startup_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1, {v1::Model::XGBOOST}));
  const v1::Assign first = channel.Assigns().back();
  core_->HandleProgress(session, Progress(first, 1, 1.0));
  core_->HandleProgress(session, Progress(first, 2, 0.5));
  core_->HandleResult(session, Completed(first, 0.5, "r2"));
  const v1::Assign second = channel.Assigns().back();
  core_->HandleProgress(session, Progress(second, 1, 0.9));  // Better than the median: goes on.
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 0);
  core_->HandleProgress(session, Progress(second, 2, 3.0));  // Best so far 0.9 > 0.5: stopped.
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->trials_pruned(), 1);
  EXPECT_EQ(study->trials_failed(), 0);
  v1::Trial pruned = AllTrials(*core_, "s").at(1);
  EXPECT_EQ(pruned.state(), v1::Trial::PRUNED);
  EXPECT_EQ(pruned.lost_attempts(), 0);
  EXPECT_EQ(pruned.metrics().at("pruned_step"), 2);
  EXPECT_EQ(pruned.metrics().at("r2"), 3.0);
  EXPECT_FALSE(pruned.has_objective_value());
  // Cancelled on its worker (that attempt only) once the decision is stored, and the slot
  // went to the next trial.
  ASSERT_TRUE(testing_util::WaitUntil([&] { return channel.Count(v1::SchedulerMessage::kCancel) == 1; }));
  ASSERT_EQ(channel.Assigns().size(), 3u);
  // The worker's answer to the Cancel settles nothing more; it only adds what the stopped
  // attempt cost (once, and never over the value the trial was judged by).
  v1::TrialResult cancelled = Completed(second, 0, "r2");
  cancelled.set_state(v1::Trial::CANCELLED);
  (*cancelled.mutable_metrics())["cpu_seconds"] = 1.5;
  (*cancelled.mutable_metrics())["wall_seconds"] = 2.5;
  core_->HandleResult(session, cancelled);
  (*cancelled.mutable_metrics())["cpu_seconds"] = 99;
  core_->HandleResult(session, cancelled);
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 1);
  EXPECT_EQ(core_->GetStudy("s")->trials_pending(), 1);
  pruned = AllTrials(*core_, "s").at(1);
  EXPECT_EQ(pruned.state(), v1::Trial::PRUNED);
  EXPECT_EQ(pruned.metrics().at("r2"), 3.0);
  EXPECT_EQ(pruned.metrics().at("cpu_seconds"), 1.5);
  EXPECT_EQ(pruned.metrics().at("wall_seconds"), 2.5);
  // Pruned trials count as finished: two more and the study completes.
  core_->HandleResult(session, Completed(channel.Assigns().back(), 0.1, "r2"));
  core_->HandleResult(session, Completed(channel.Assigns().back(), 0.2, "r2"));
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
  EXPECT_EQ(core_->GetBestTrial("s")->objective_value(), 0.1);
}

TEST_F(SchedulerCoreTest, ProgressThatCannotBeJudgedIsDroppedAndNeverBlocksTheStore) {
  v1::StudySpec spec = PrunableStudy("s", 2);
  spec.mutable_early_stopping()->mutable_median()->set_n_startup_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1, {v1::Model::XGBOOST}));
  const v1::Assign first = channel.Assigns().back();
  // A NaN (which SQLite cannot hold in the column), steps out of range, repeated, backwards.
  core_->HandleProgress(session, Progress(first, 1, std::nan("")));
  core_->HandleProgress(session, Progress(first, -5, 1.0));
  core_->HandleProgress(session, Progress(first, std::numeric_limits<int64_t>::max(), 1.0));
  core_->HandleProgress(session, Progress(first, 10, 2.0));
  core_->HandleProgress(session, Progress(first, 10, 0.0));
  core_->HandleProgress(session, Progress(first, 5, 0.0));
  core_->HandleResult(session, Completed(first, 2.0, "r2"));
  // The store still writes: the result is acknowledged and the study goes on.
  ASSERT_TRUE(testing_util::WaitUntil([&] { return channel.Count(v1::SchedulerMessage::kAck) == 1; }));
  // A second trial is judged against that curve: 3.0 at step 10 is worse than 2.0 (minimising).
  const v1::Assign second = channel.Assigns().back();
  core_->HandleProgress(session, Progress(second, 10, 3.0));
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 1);
  EXPECT_TRUE(db_.get()->health().ok());
  // Stored is exactly what was judged: one value per trial.
  core_.reset();
  db_.Reopen();
  absl::StatusOr<std::vector<StoredIntermediateValue>> stored =
      db_.get()->LoadIntermediateValues("s");
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[0].step, 10);
  EXPECT_EQ((*stored)[0].value, 2.0);
  EXPECT_EQ((*stored)[1].value, 3.0);
}

TEST_F(SchedulerCoreTest, ProgressStillInFlightForPrunedTrialsNeverCutsTheWorkerOff) {
  // Many more pruned trials than the unknown-trial limit, each with a late report of its own.
  const int trials = static_cast<int>(kMaxUnknownTrialsPerSession) + 20;
  v1::StudySpec spec = PrunableStudy("s", trials);
  spec.mutable_early_stopping()->mutable_median()->set_n_startup_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1, {v1::Model::XGBOOST}));
  const v1::Assign first = channel.Assigns().back();
  core_->HandleProgress(session, Progress(first, 1, 0.0));
  core_->HandleResult(session, Completed(first, 0.0, "r2"));
  for (int i = 1; i < trials; ++i) {
    const v1::Assign assign = channel.Assigns().back();
    core_->HandleProgress(session, Progress(assign, 1, 5.0));  // Worse: pruned.
    core_->HandleProgress(session, Progress(assign, 2, 5.0));  // Sent before the Cancel arrived.
    v1::TrialResult cancelled = Completed(assign, 0, "r2");
    cancelled.set_state(v1::Trial::CANCELLED);
    core_->HandleResult(session, cancelled);
  }
  EXPECT_FALSE(channel.closed().has_value()) << channel.closed()->ToString();
  EXPECT_EQ(core_->connected_workers(), 1);
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->trials_pruned(), trials - 1);
}

TEST_F(SchedulerCoreTest, EarlyStoppingDecidesAlikeAfterARestart) {
  v1::StudySpec spec = PrunableStudy("s", 4);
  spec.mutable_early_stopping()->mutable_asha()->set_reduction_factor(2);
  spec.mutable_early_stopping()->mutable_asha()->set_min_resource(1);  // Not the derived 10.
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& before = NewChannel();
  const uint64_t session = Connect(before, Hello("w", 2, {v1::Model::XGBOOST}));
  const v1::Assign first = before.Assigns()[0];
  const v1::Assign second = before.Assigns()[1];
  core_->HandleProgress(session, Progress(first, 1, 1.0));  // First at rung 1: goes on.
  // The scheduler restarts; its curves come back from the database.
  Restart();
  RecordingChannel& after = NewChannel();
  v1::Hello hello = Hello("w", 2, {v1::Model::XGBOOST});
  *hello.add_running() = Attempt(first);
  *hello.add_running() = Attempt(second);
  const uint64_t again = Connect(after, hello);
  core_->HandleProgress(again, Progress(second, 1, 2.0));  // Worse than 1.0 at rung 1: stopped.
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 1);
  EXPECT_EQ(AllTrials(*core_, "s").at(1).state(), v1::Trial::PRUNED);
  EXPECT_EQ(AllTrials(*core_, "s").at(0).state(), v1::Trial::RUNNING);
}

// Hyperband's brackets are a function of the trial number and the study's seed: a scheduler
// restarted in the middle of a bracket (curves and trials from the SQLite file) puts every
// trial in the bracket it had, and judges each only against its own bracket.
TEST_F(SchedulerCoreTest, HyperbandDecidesAlikeAfterARestartInTheMiddleOfABracket) {
  constexpr int kTrials = 20;
  v1::StudySpec spec = PrunableStudy("s", kTrials);
  spec.mutable_algorithm()->set_seed(11);
  // Brackets 0 (rungs 1, 3), 1 (rung 3) and 2 (no rung below max_resource 9).
  v1::HyperbandStopping& hyperband = *spec.mutable_early_stopping()->mutable_hyperband();
  hyperband.set_min_resource(1);
  hyperband.set_max_resource(9);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  const study::HyperbandRule rule{.min_resource = 1, .max_resource = 9, .reduction_factor = 3,
                                  .seed = 11};
  RecordingChannel& before = NewChannel();
  const uint64_t session = Connect(before, Hello("w", kTrials, {v1::Model::XGBOOST}));
  ASSERT_EQ(before.Assigns().size(), static_cast<size_t>(kTrials));
  // Two trials of bracket 0 and one of another bracket, by trial number.
  std::vector<v1::Assign> zero, other;
  std::map<uint64_t, int64_t> numbers;
  for (const v1::Trial& trial : AllTrials(*core_, "s")) numbers[trial.id()] = trial.number();
  for (const v1::Assign& assign : before.Assigns()) {
    const int bracket = study::HyperbandBracketOf(rule, numbers.at(assign.trial_id()));
    (bracket == 0 ? zero : other).push_back(assign);
  }
  ASSERT_GE(zero.size(), 2u);
  ASSERT_GE(other.size(), 1u);
  core_->HandleProgress(session, Progress(zero[0], 1, 0.1));  // Alone at bracket 0's rung 1.
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 0);

  Restart();
  RecordingChannel& after = NewChannel();
  v1::Hello hello = Hello("w", kTrials, {v1::Model::XGBOOST});
  for (const v1::Assign& assign : before.Assigns()) *hello.add_running() = Attempt(assign);
  const uint64_t again = Connect(after, hello);
  // Minimising: 0.5 at step 1 loses to 0.1 in bracket 0, and is not judged at step 1 in the
  // others (no rung there).
  core_->HandleProgress(again, Progress(other[0], 1, 0.5));
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 0) << "judged against another bracket";
  core_->HandleProgress(again, Progress(zero[1], 1, 0.5));
  EXPECT_EQ(core_->GetStudy("s")->trials_pruned(), 1);
  for (const v1::Trial& trial : AllTrials(*core_, "s")) {
    EXPECT_EQ(trial.state(), trial.id() == zero[1].trial_id() ? v1::Trial::PRUNED
                                                              : v1::Trial::RUNNING)
        << "trial " << trial.number();
  }
}

// A pruned trial that was level with the best when it was stopped is counted: the rule may
// have cost the study its best model.
TEST_F(SchedulerCoreTest, PrunedTrialsLevelWithTheBestWhenStoppedAreCountedWithinReach) {
  v1::StudySpec spec = PrunableStudy("s", 3);  // Minimising r2, for the test's sake.
  spec.mutable_early_stopping()->mutable_asha()->set_reduction_factor(2);
  spec.mutable_early_stopping()->mutable_asha()->set_min_resource(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 3, {v1::Model::XGBOOST}));
  const std::vector<v1::Assign> assigns = channel.Assigns();
  ASSERT_EQ(assigns.size(), 3u);
  core_->HandleProgress(session, Progress(assigns[0], 1, 0.10));  // Alone at rung 1: goes on.
  core_->HandleProgress(session, Progress(assigns[1], 1, 0.05));  // The best there: goes on.
  core_->HandleProgress(session, Progress(assigns[2], 1, 0.08));  // Not the best: stopped.
  core_->HandleResult(session, Completed(assigns[0], 0.10, "r2"));
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->trials_pruned(), 1);
  // The best completed trial showed 0.10 at step 1; the pruned one 0.08, better.
  EXPECT_EQ(study->best_trial().id(), assigns[0].trial_id());
  EXPECT_EQ(study->trials_pruned_within_reach(), 1);
}

// Runs `trials` trials of `spec` one at a time on one worker (suggestions may come from the
// suggestion threads), answering each with its parameters' sum; returns their parameters.
std::vector<std::string> RunSequentially(SchedulerCore& core, const std::string& study,
                                         int trials) {
  RecordingChannel channel;
  const uint64_t session = *core.ConnectWorker(Hello("w", 1), {}, &channel);
  std::vector<std::string> seen;
  for (int i = 0; i < trials; ++i) {
    EXPECT_TRUE(testing_util::WaitUntil([&] { return channel.Assigns().size() > seen.size(); }));
    if (channel.Assigns().size() <= seen.size()) break;
    const v1::Assign assign = channel.Assigns().back();
    double sum = 0;
    for (const auto& [name, value] : assign.params()) sum += value.double_value();
    seen.push_back(assign.params().at("x1").ShortDebugString() +
                   assign.params().at("x2").ShortDebugString());
    core.HandleResult(session, Completed(assign, sum));
  }
  core.DisconnectWorker(session, "done");
  return seen;
}

TEST(SchedulerCoreResumeTest, EveryOptimiserResumesWithTheSuggestionsItWouldHaveMade) {
  for (v1::Algorithm::Name algorithm :
       {v1::Algorithm::RANDOM, v1::Algorithm::TPE, v1::Algorithm::BAYESIAN,
        v1::Algorithm::HILL_CLIMBING, v1::Algorithm::GRID}) {
    SCOPED_TRACE(v1::Algorithm::Name_Name(algorithm));
    v1::StudySpec spec = FunctionStudy("s", 10);
    spec.mutable_algorithm()->set_name(algorithm);
    spec.mutable_algorithm()->set_seed(11);
    if (algorithm == v1::Algorithm::TPE) {
      spec.mutable_algorithm()->mutable_tpe()->set_n_startup_trials(3);
    } else if (algorithm == v1::Algorithm::BAYESIAN) {
      spec.mutable_algorithm()->mutable_bayesian()->set_n_startup_trials(3);
    }
    testing::TempDatabase reference_db;
    std::vector<std::string> uninterrupted;
    {
      SchedulerCore reference(reference_db.get(), SchedulerOptions());
      ASSERT_TRUE(reference.CreateStudy(spec).ok());
      uninterrupted = RunSequentially(reference, "s", 10);
    }
    testing::TempDatabase db;
    std::vector<std::string> resumed;
    {
      SchedulerCore before(db.get(), SchedulerOptions());
      ASSERT_TRUE(before.CreateStudy(spec).ok());
      resumed = RunSequentially(before, "s", 5);
    }
    db.Reopen();
    SchedulerCore after(db.get(), SchedulerOptions());
    ASSERT_TRUE(after.Recover().ok());
    // The sixth trial was suggested (pending) before the restart; it comes first.
    for (std::string& point : RunSequentially(after, "s", 5)) resumed.push_back(std::move(point));
    EXPECT_EQ(resumed, uninterrupted);
    EXPECT_EQ(after.GetStudy("s")->state(), v1::Study::COMPLETED);
  }
}

class BlockedOptimizer : public optimizer::Optimizer {
 public:
  explicit BlockedOptimizer(absl::Notification* release) : release_(release) {}
  absl::StatusOr<std::optional<optimizer::Point>> Suggest(const optimizer::History& h) override {
    release_->WaitForNotification();
    return optimizer::Point{static_cast<double>(h.trials.size()), 0.0};
  }

 private:
  absl::Notification* release_;
};

TEST(SchedulerCoreSuggestionTest, SlowSuggestionsDoNotHoldUpOtherStudies) {
  absl::Notification release;
  testing::TempDatabase db;
  SchedulerOptions options;
  options.optimizer_factory = [&release](const optimizer::SearchSpace& space,
                                         const optimizer::OptimizerConfig& config)
      -> absl::StatusOr<std::unique_ptr<optimizer::Optimizer>> {
    if (config.seed == 666) return std::make_unique<BlockedOptimizer>(&release);
    return optimizer::MakeOptimizer(space, config);
  };
  RecordingChannel channel;  // Before the core: it must outlive what the core sends it.
  SchedulerCore core(db.get(), options);
  v1::StudySpec slow = FunctionStudy("slow", 2);
  slow.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  slow.mutable_algorithm()->set_seed(666);
  ASSERT_TRUE(core.CreateStudy(slow).ok());
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("fast", 20)).ok());
  const uint64_t session = *core.ConnectWorker(Hello("w", 1), {}, &channel);
  // The fast study runs to the end while the slow one's first suggestion is still being made.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(channel.Assigns().back().study(), "fast");
    core.HandleResult(session, Completed(channel.Assigns().back(), i));
  }
  EXPECT_EQ(core.GetStudy("fast")->state(), v1::Study::COMPLETED);
  EXPECT_EQ(core.GetStudy("slow")->trials_running(), 0);
  release.Notify();
  ASSERT_TRUE(testing_util::WaitUntil([&] { return core.GetStudy("slow")->trials_running() == 1; }));
  EXPECT_EQ(channel.Assigns().back().study(), "slow");
}

// A model-based optimiser whose every suggestion takes a second of the core's clock and no
// wall time to speak of; every one after the first also waits for `release`.
class ClockedOptimizer : public optimizer::Optimizer {
 public:
  ClockedOptimizer(std::unique_ptr<optimizer::Optimizer> inner, absl::Mutex* mutex,
                   absl::Time* now, absl::Notification* release)
      : inner_(std::move(inner)), mutex_(mutex), now_(now), release_(release) {}
  absl::StatusOr<std::optional<optimizer::Point>> Suggest(const optimizer::History& h) override {
    if (calls_++ > 0) release_->WaitForNotification();
    {
      absl::MutexLock lock(mutex_);
      *now_ += absl::Seconds(1);
    }
    return inner_->Suggest(h);
  }

 private:
  std::unique_ptr<optimizer::Optimizer> inner_;
  absl::Mutex* mutex_;
  absl::Time* now_;
  absl::Notification* release_;
  std::atomic<int> calls_{0};
};

// Dispatch order follows the core's clock alone (issue 35): TPE's first suggestion took a
// second of it, so a worker at TPE's turn while the next one is being made does not hold the
// turn but runs the random study's trials, all of them, however long that suggestion takes.
// Timed with the wall clock, the first suggestion took microseconds, and the worker waited
// for the second (held here until the random study is done): no fifth assignment came.
TEST(SchedulerCoreSuggestionTest, SuggestionCostIsMeasuredWithTheCoresClock) {
  absl::Mutex mutex;
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  absl::Notification release;
  testing::TempDatabase db;
  SchedulerOptions options;
  options.clock = [&] {
    absl::MutexLock lock(&mutex);
    return now;
  };
  options.optimizer_factory = [&](const optimizer::SearchSpace& space,
                                  const optimizer::OptimizerConfig& config)
      -> absl::StatusOr<std::unique_ptr<optimizer::Optimizer>> {
    absl::StatusOr<std::unique_ptr<optimizer::Optimizer>> inner =
        optimizer::MakeOptimizer(space, config);
    if (!inner.ok() || config.seed != 777) return inner;
    return std::make_unique<ClockedOptimizer>(std::move(*inner), &mutex, &now, &release);
  };
  RecordingChannel channel;  // Before the core: it must outlive what the core sends it.
  SchedulerCore core(db.get(), options);
  ASSERT_TRUE(core.CreateStudy(FunctionStudy("random", 6)).ok());
  v1::StudySpec tpe = FunctionStudy("tpe", 6);
  tpe.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  tpe.mutable_algorithm()->set_seed(777);
  ASSERT_TRUE(core.CreateStudy(tpe).ok());
  // A failed ASSERT must not leave a suggestion blocked: the core's destructor waits for it.
  absl::Cleanup released = [&] {
    if (!release.HasBeenNotified()) release.Notify();
  };
  const uint64_t session = *core.ConnectWorker(Hello("w", 1), {}, &channel);
  std::vector<std::string> order;
  for (size_t n = 1; n <= 12; ++n) {
    if (n == 8) release.Notify();  // The random study is done: TPE's suggestions may come.
    ASSERT_TRUE(testing_util::WaitUntil([&] { return channel.Assigns().size() == n; }))
        << "after " << absl::StrJoin(order, ", ");
    const v1::Assign assign = channel.Assigns().back();
    order.push_back(assign.study());
    if (n == 2) {
      // As in AModelBasedStudyKeepsItsTurnWhileItsSuggestionIsMade: the first suggestion is
      // made while the second trial runs, so its cost is known from the third turn on.
      ASSERT_TRUE(testing_util::WaitUntil([&] { return AllTrials(core, "tpe").size() == 1; }));
    }
    core.HandleResult(session, Completed(assign, 1.0));
  }
  EXPECT_EQ(absl::StrJoin(order, ","),
            "random,random,tpe,random,random,random,random,tpe,tpe,tpe,tpe,tpe");
}

// ---------------------------------------------------------------------------------------------
// Fail fast and an idle early-stopping rule (issue 27).

class FailFastTest : public SchedulerCoreTest {
 protected:
  // Fails the trial `channel` was given last, with `error`.
  void Fail(uint64_t session, RecordingChannel& channel, const std::string& error) {
    v1::TrialResult result = Completed(channel.Assigns().back(), 0);
    result.set_state(v1::Trial::FAILED);
    result.set_error(error);
    core_->HandleResult(session, result);
  }
};

TEST_F(FailFastTest, FirstTrialsFailingAlikeEndTheStudyWithTheirErrorEvenAcrossARestart) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 40)).ok());
  {
    RecordingChannel& channel = NewChannel();
    const uint64_t session = Connect(channel, Hello("w", 1));
    for (int i = 0; i < study::kDefaultFailFastTrials - 1; ++i) {
      Fail(session, channel, "command gbr exited with status 2; stderr ends:\nno such file");
    }
    EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::RUNNING);
  }
  Restart();  // The failures so far come back from the database and still count.
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1));
  Fail(session, channel, "command gbr exited with status 2; stderr ends:\nno such file");
  const v1::Study study = *core_->GetStudy("s");
  EXPECT_EQ(study.state(), v1::Study::FAILED);
  EXPECT_EQ(study.trials_failed(), study::kDefaultFailFastTrials);
  EXPECT_THAT(study.state_reason(), HasSubstr("the first 5 trials all failed with the same error"));
  EXPECT_THAT(study.state_reason(), HasSubstr("set fail_fast_trials: 0"));
  EXPECT_THAT(study.state_reason(), HasSubstr("dhpt trial s 0"));
  EXPECT_THAT(study.state_reason(), HasSubstr("exited with status 2; stderr ends: no such file"));
  EXPECT_EQ(channel.Assigns().size(), 1u);  // Nothing more was started.
}

TEST_F(FailFastTest, DifferentErrorsASuccessOrFailFastOffLetTheStudyGoOn) {
  // Five failures, not all alike.
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("differ", 8)).ok());
  RecordingChannel& channel = NewChannel();
  uint64_t session = Connect(channel, Hello("w", 1));
  for (int i = 0; i < 6; ++i) Fail(session, channel, i == 3 ? "out of memory" : "diverged");
  EXPECT_EQ(core_->GetStudy("differ")->state(), v1::Study::RUNNING);
  ASSERT_TRUE(core_->StopStudy("differ").ok());

  // A completed trial first: the setup works, later failures are the points' own.
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("success", 8)).ok());
  core_->HandleResult(session, Completed(channel.Assigns().back(), 1));
  for (int i = 0; i < 6; ++i) Fail(session, channel, "diverged");
  EXPECT_EQ(core_->GetStudy("success")->state(), v1::Study::RUNNING);
  ASSERT_TRUE(core_->StopStudy("success").ok());

  // Turned off in the spec: the budget is spent, and only then does the study fail.
  v1::StudySpec off = FunctionStudy("off", 7);
  off.set_fail_fast_trials(0);
  ASSERT_TRUE(core_->CreateStudy(off).ok());
  for (int i = 0; i < 6; ++i) Fail(session, channel, "diverged");
  EXPECT_EQ(core_->GetStudy("off")->state(), v1::Study::RUNNING);
  Fail(session, channel, "diverged");
  EXPECT_EQ(core_->GetStudy("off")->state(), v1::Study::FAILED);
  EXPECT_THAT(core_->GetStudy("off")->state_reason(), HasSubstr("every one failed"));

  // A smaller count in the spec.
  v1::StudySpec two = FunctionStudy("two", 7);
  two.set_fail_fast_trials(2);
  ASSERT_TRUE(core_->CreateStudy(two).ok());
  Fail(session, channel, "diverged");
  Fail(session, channel, "diverged");
  EXPECT_THAT(core_->GetStudy("two")->state_reason(), HasSubstr("the first 2 trials all failed"));
}

TEST_F(FailFastTest, AnEarlyStoppingStudyWhoseTrialsReportNoProgressSaysItsRuleIsIdle) {
  v1::StudySpec spec = PrunableStudy("s", 10);
  spec.mutable_early_stopping()->mutable_median()->set_n_startup_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  {
    RecordingChannel& channel = NewChannel();
    const uint64_t session = Connect(channel, Hello("w", 1, {v1::Model::XGBOOST}));
    // Each trial reports its objective once, at its end, as a program printing it only at exit.
    for (int i = 0; i < 3; ++i) {  // kCompletedTrialsBeforeIdleRuleNotice
      EXPECT_THAT(core_->GetStudy("s")->state_reason(), Not(HasSubstr("idle")));
      const v1::Assign assign = channel.Assigns().back();
      core_->HandleProgress(session, Progress(assign, 1, 0.5));
      core_->HandleResult(session, Completed(assign, 0.5, "r2"));
    }
  }
  const std::string notice = "early stopping is idle: none of the first 3 completed trials "
                             "reported progress (more than one intermediate value)";
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), HasSubstr(notice));
  Restart();
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), HasSubstr(notice));
  // Progress from one trial, and the rule has a curve to judge: the notice goes.
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, Hello("w", 1, {v1::Model::XGBOOST}));
  core_->HandleProgress(session, Progress(channel.Assigns().back(), 1, 0.5));
  core_->HandleProgress(session, Progress(channel.Assigns().back(), 2, 0.4));
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), Not(HasSubstr("idle")));
  Restart();
  EXPECT_THAT(core_->GetStudy("s")->state_reason(), Not(HasSubstr("idle")));
}

}  // namespace
}  // namespace dhpt::scheduler
