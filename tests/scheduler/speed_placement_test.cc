// Placement by learnt speed (issue 32): the longest ready trials go to the fastest workers, and
// at a study's end an idle fast worker runs a duplicate of a slow worker's trial; the first
// result counts, once. On the core's fake clock, with a real SQLite store.

#include <deque>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

v1::TrialResult Finished(const v1::Assign& assign, v1::Trial::State state, double value = 1,
                         const std::string& metric = "value") {
  v1::TrialResult result;
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_epoch(assign.epoch());
  result.set_state(state);
  if (state == v1::Trial::COMPLETED) (*result.mutable_metrics())[metric] = value;
  return result;
}

v1::Hello Board(const std::string& id, const std::string& board,
                std::vector<v1::Model::Kind> models = {v1::Model::FUNCTION}) {
  v1::Hello hello = Hello(id, 1, std::move(models));
  (*hello.mutable_capabilities()->mutable_labels())["board"] = board;
  return hello;
}

// An XGBoost study on 200 rows whose rounds are the given parameter (or fixed field) text.
v1::StudySpec XgboostStudy(const std::string& name, int max_trials, const std::string& rounds) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(dataset { friedman1 { samples: 200 features: 5 noise: 1 seed: 0 } })pb", &spec));
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(rounds, &spec)) << rounds;
  spec.mutable_model()->set_kind(v1::Model::XGBOOST);
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  return spec;
}

// Counts requeues, which a lost duplicate must not cause.
class RequeueCounter : public SchedulerObserver {
 public:
  void TrialRequeued(const v1::StudySpec&) override { ++requeued; }
  int requeued = 0;
};

class SpeedPlacementTest : public ::testing::Test {
 protected:
  void Start(double duplicate_margin = kDefaultDuplicateMargin, bool speed_placement = true) {
    SchedulerOptions options;
    options.observer = &observer_;
    options.clock = [this] { return now_; };
    options.duplicate_margin = duplicate_margin;
    options.speed_placement = speed_placement;
    options.early_duplicates = early_duplicates_;
    if (lease_) {
      options.heartbeat_interval = *lease_;
      options.missed_heartbeats = 1;
    }
    core_ = std::make_unique<SchedulerCore>(db_.get(), options);
  }
  uint64_t Connect(RecordingChannel& channel, const v1::Hello& hello) {
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(hello, {}, &channel);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }
  void Advance(absl::Duration d) { now_ += d; }
  // Completes the latest attempt given on `channel`.
  void Complete(uint64_t session, RecordingChannel& channel, const std::string& metric = "value",
                double value = 1) {
    core_->HandleResult(session,
                        Finished(channel.Assigns().back(), v1::Trial::COMPLETED, value, metric));
  }

  // Five one-unit trials on an Orin (1 s each) and a Pi 4 (5 s each): the Pi 4 is given the
  // last trial at 5 s and the Orin is idle from 6 s. Returns the last trial's first attempt.
  v1::Assign RunUntilTheOrinIsIdle() {
    EXPECT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
    fast_session_ = Connect(fast_, Board("fast", "orin"));
    slow_session_ = Connect(slow_, Board("slow", "pi4"));
    EXPECT_EQ(fast_.Assigns().size(), 1u);
    EXPECT_EQ(slow_.Assigns().size(), 1u);
    Advance(absl::Seconds(1));
    core_->HandleResult(fast_session_, Finished(fast_.Assigns().back(), v1::Trial::COMPLETED));
    Advance(absl::Seconds(1));
    core_->HandleResult(fast_session_, Finished(fast_.Assigns().back(), v1::Trial::COMPLETED));
    Advance(absl::Seconds(3));  // 5 s
    core_->HandleResult(slow_session_, Finished(slow_.Assigns().back(), v1::Trial::COMPLETED));
    EXPECT_EQ(slow_.Assigns().size(), 2u);  // The fifth trial, the last.
    Advance(absl::Seconds(1));  // 6 s: the Orin's third trial ends; nothing new to suggest.
    core_->HandleResult(fast_session_, Finished(fast_.Assigns().back(), v1::Trial::COMPLETED));
    return slow_.Assigns().back();
  }

  std::optional<absl::Duration> lease_;  // Else SchedulerOptions' default.
  bool early_duplicates_ = false;
  std::deque<RecordingChannel> channels_;
  RecordingChannel& fast_ = channels_.emplace_back();
  RecordingChannel& slow_ = channels_.emplace_back();
  uint64_t fast_session_ = 0;
  uint64_t slow_session_ = 0;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  RequeueCounter observer_;
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(SpeedPlacementTest, SpeedsAreLearntPerBoardFromCompletedTrials) {
  Start();
  RunUntilTheOrinIsIdle();
  std::map<std::string, double> speeds;
  for (const SpeedModel::Estimate& estimate : core_->SpeedEstimates()) {
    EXPECT_EQ(estimate.kind, v1::Model::FUNCTION);
    speeds[estimate.node_class] = estimate.seconds_per_unit;
  }
  EXPECT_NEAR(speeds["orin"], 1, 1e-9);
  EXPECT_NEAR(speeds["pi4"], 5, 1e-9);
}

TEST_F(SpeedPlacementTest, AnIdleFastWorkerDuplicatesTheSlowWorkersLastTrialAndItsResultCounts) {
  Start();
  const v1::Assign last = RunUntilTheOrinIsIdle();
  // The Pi 4 needs 4 s more (5 s predicted, 1 s done), the Orin 1 s: a duplicate, attempt 2.
  ASSERT_EQ(fast_.Assigns().size(), 4u);
  const v1::Assign duplicate = fast_.Assigns().back();
  EXPECT_EQ(duplicate.trial_id(), last.trial_id());
  EXPECT_EQ(duplicate.attempt(), last.attempt() + 1);
  // The slow attempt's progress is neither refused nor stored.
  core_->HandleProgress(slow_session_, Progress(last, 1, 3));
  EXPECT_EQ(slow_.Count(v1::SchedulerMessage::kCancel), 0);

  Advance(absl::Seconds(1));
  core_->HandleResult(fast_session_, Finished(duplicate, v1::Trial::COMPLETED, 7));
  // The slow attempt is cancelled; its answer to that changes nothing.
  ASSERT_EQ(slow_.Count(v1::SchedulerMessage::kCancel), 1);
  for (const v1::SchedulerMessage& m : slow_.sent()) {
    if (m.has_cancel()) {
      EXPECT_EQ(m.cancel().attempt(), last.attempt());
    }
  }
  core_->HandleResult(slow_session_, Finished(last, v1::Trial::CANCELLED));
  core_->HandleResult(slow_session_, Finished(last, v1::Trial::COMPLETED, 1));

  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  ASSERT_EQ(trials.size(), 5u);
  for (const v1::Trial& trial : trials) EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  const v1::Trial& duplicated = trials.back();
  EXPECT_EQ(duplicated.id(), last.trial_id());
  EXPECT_EQ(duplicated.worker_id(), "fast");
  EXPECT_EQ(duplicated.metrics().at("value"), 7);
  EXPECT_EQ(duplicated.lost_attempts(), 0);
  const v1::Study study = *core_->GetStudy("s");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_THAT(study.state_reason(), HasSubstr("all 5 trials finished"));
  // Both workers are free again, with nothing left.
  for (const v1::Worker& worker : core_->ListWorkers()) EXPECT_EQ(worker.running_trials_size(), 0);
}

TEST_F(SpeedPlacementTest, TheSlowAttemptFinishingFirstCountsAndTheDuplicateIsCancelled) {
  Start();
  const v1::Assign last = RunUntilTheOrinIsIdle();
  ASSERT_EQ(fast_.Assigns().size(), 4u);
  const v1::Assign duplicate = fast_.Assigns().back();
  ASSERT_EQ(duplicate.trial_id(), last.trial_id());
  const int fast_cancels = fast_.Count(v1::SchedulerMessage::kCancel);
  Advance(absl::Milliseconds(500));
  core_->HandleResult(slow_session_, Finished(last, v1::Trial::COMPLETED, 9));
  EXPECT_EQ(fast_.Count(v1::SchedulerMessage::kCancel), fast_cancels + 1);
  core_->HandleResult(fast_session_, Finished(duplicate, v1::Trial::COMPLETED, 2));

  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  ASSERT_EQ(trials.size(), 5u);
  const v1::Trial& duplicated = trials.back();
  EXPECT_EQ(duplicated.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(duplicated.worker_id(), "slow");
  EXPECT_EQ(duplicated.attempt(), 1);  // Recorded as the slow attempt, not the duplicate.
  EXPECT_EQ(duplicated.attempts_size(), 2);
  EXPECT_EQ(duplicated.metrics().at("value"), 9);
  EXPECT_EQ(duplicated.lost_attempts(), 0);
  // Its time is the slow attempt's: given at 5 s, done at 6.5 s.
  EXPECT_EQ(duplicated.end_time().seconds() - duplicated.start_time().seconds(), 1);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

TEST_F(SpeedPlacementTest, ASlowAttemptThatFailsLeavesTheDuplicateRunning) {
  Start();
  const v1::Assign last = RunUntilTheOrinIsIdle();
  ASSERT_EQ(fast_.Assigns().size(), 4u);
  core_->HandleResult(slow_session_, Finished(last, v1::Trial::FAILED));
  EXPECT_EQ(AllTrials(*core_, "s").back().state(), v1::Trial::RUNNING);
  core_->DisconnectWorker(slow_session_, "gone");  // Not the current attempt: nothing requeued.
  core_->HandleResult(fast_session_, Finished(fast_.Assigns().back(), v1::Trial::COMPLETED));
  EXPECT_EQ(AllTrials(*core_, "s").back().state(), v1::Trial::COMPLETED);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

// The duplicate ends without a result while the slow attempt runs on: its worker drops, it is
// handed back, or it fails. The trial stays the slow attempt's, as if no duplicate had run: no
// requeue, no lost attempt, attempt 1 of 1, and the slow attempt's result counts.
enum class DuplicateEnd { kWorkerLost, kHandedBack, kFailed };

class LostDuplicateTest : public SpeedPlacementTest,
                          public ::testing::WithParamInterface<DuplicateEnd> {};

TEST_P(LostDuplicateTest, TheSlowAttemptCarriesOnWithoutARequeueOrASecondAttempt) {
  Start();
  const v1::Assign last = RunUntilTheOrinIsIdle();
  ASSERT_EQ(fast_.Assigns().size(), 4u);
  const v1::Assign duplicate = fast_.Assigns().back();
  ASSERT_EQ(duplicate.trial_id(), last.trial_id());
  v1::TrialAttempt started;
  started.set_trial_id(duplicate.trial_id());
  started.set_attempt(duplicate.attempt());
  started.set_epoch(duplicate.epoch());
  core_->HandleStarted(fast_session_, started);  // Begun: losing it would cost an attempt.
  Advance(absl::Milliseconds(300));
  switch (GetParam()) {
    case DuplicateEnd::kWorkerLost:
      core_->DisconnectWorker(fast_session_, "link down");
      break;
    case DuplicateEnd::kHandedBack:
      core_->HandleResult(fast_session_, Finished(duplicate, v1::Trial::CANCELLED));
      break;
    case DuplicateEnd::kFailed:
      core_->HandleResult(fast_session_, Finished(duplicate, v1::Trial::FAILED));
      break;
  }
  v1::Trial trial = AllTrials(*core_, "s").back();
  EXPECT_EQ(trial.state(), v1::Trial::RUNNING);
  EXPECT_EQ(trial.attempt(), last.attempt());
  EXPECT_EQ(trial.attempts_size(), last.attempt());
  EXPECT_EQ(trial.lost_attempts(), 0);
  EXPECT_EQ(trial.worker_id(), "slow");
  EXPECT_EQ(observer_.requeued, 0);
  EXPECT_EQ(slow_.Count(v1::SchedulerMessage::kCancel), 0);  // The slow attempt runs on.
  // Its progress is the trial's again (not refused), and its result counts.
  core_->HandleProgress(slow_session_, Progress(last, 1, 3));
  EXPECT_EQ(slow_.Count(v1::SchedulerMessage::kCancel), 0);
  Advance(absl::Seconds(3));
  core_->HandleResult(slow_session_, Finished(last, v1::Trial::COMPLETED, 9));
  trial = AllTrials(*core_, "s").back();
  EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trial.metrics().at("value"), 9);
  EXPECT_EQ(trial.attempt(), last.attempt());
  EXPECT_EQ(trial.attempts_size(), last.attempt());
  EXPECT_EQ(trial.lost_attempts(), 0);
  EXPECT_EQ(trial.end_time().seconds() - trial.start_time().seconds(), 4);  // Given at 5 s.
  EXPECT_EQ(observer_.requeued, 0);
  const v1::Study study = *core_->GetStudy("s");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_THAT(study.state_reason(), HasSubstr("all 5 trials finished"));
  // The duplicate's worker, back with its attempt, is refused it: the trial counted once.
  if (GetParam() == DuplicateEnd::kWorkerLost) {
    RecordingChannel& back = channels_.emplace_back();
    v1::Hello hello = Board("fast", "orin");
    v1::TrialAttempt held;
    held.set_trial_id(duplicate.trial_id());
    held.set_attempt(duplicate.attempt());
    held.set_epoch(duplicate.epoch());
    *hello.add_running() = held;
    const uint64_t session = Connect(back, hello);
    core_->HandleResult(session, Finished(duplicate, v1::Trial::COMPLETED, 2));
    EXPECT_EQ(AllTrials(*core_, "s").back().metrics().at("value"), 9);
  }
}

INSTANTIATE_TEST_SUITE_P(SpeedPlacement, LostDuplicateTest,
                         ::testing::Values(DuplicateEnd::kWorkerLost, DuplicateEnd::kHandedBack,
                                           DuplicateEnd::kFailed));

// Earliest finish time at a study's end: an Orin (1 s a trial) and two Pi 4s (5 s a trial),
// learnt from a first study. The second has four trials for the three slots: the Orin takes
// the first; with three left, the Orin (busy for 1 s more) would finish them at 2, 3 and 4 s
// and a Pi 4 one at 5 s, so the Pi 4s take none and the study suggests none for them. First-
// come gives each Pi 4 one (the study ends at 5 s). Duplicates off: this rule alone.
class EndgameTest : public SpeedPlacementTest, public ::testing::WithParamInterface<bool> {
 protected:
  void StartMain() {
    Start(/*duplicate_margin=*/0, /*speed_placement=*/GetParam());
    fast_session_ = Connect(fast_, Board("fast", "orin"));
    slow_session_ = Connect(slow_, Board("slow", "pi4"));
    slow2_session_ = Connect(slow2_, Board("slow2", "pi4"));
    ASSERT_TRUE(core_->CreateStudy(FunctionStudy("learn", 3)).ok());
    ASSERT_EQ(fast_.Assigns().size(), 1u);
    ASSERT_EQ(slow_.Assigns().size(), 1u);
    ASSERT_EQ(slow2_.Assigns().size(), 1u);
    Advance(absl::Seconds(1));
    Complete(fast_session_, fast_);
    Advance(absl::Seconds(4));
    Complete(slow_session_, slow_);
    Complete(slow2_session_, slow2_);
    ASSERT_EQ(core_->GetStudy("learn")->state(), v1::Study::COMPLETED);
    ASSERT_TRUE(core_->CreateStudy(FunctionStudy("main", 4)).ok());
    ASSERT_EQ(fast_.Assigns().size(), 2u);
  }
  int SlowAssigns() const {
    return static_cast<int>(slow_.Assigns().size() + slow2_.Assigns().size());
  }
  RecordingChannel& slow2_ = channels_.emplace_back();
  uint64_t slow2_session_ = 0;
};

TEST_P(EndgameTest, SlowWorkersLeaveTheLastTrialsToAFasterOneThatFinishesThemSooner) {
  StartMain();
  if (!GetParam()) {
    EXPECT_EQ(SlowAssigns(), 4);  // First-come: one more each.
    return;
  }
  EXPECT_EQ(SlowAssigns(), 2);
  EXPECT_EQ(AllTrials(*core_, "main").size(), 1u);  // None suggested for a Pi 4.
  for (int i = 0; i < 3; ++i) {
    Advance(absl::Seconds(1));
    Complete(fast_session_, fast_);
    core_->ExpireTrials();  // The sweep, at the Orin's predicted finish: nothing changes.
    EXPECT_EQ(SlowAssigns(), 2);
  }
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_);
  const v1::Study study = *core_->GetStudy("main");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);  // At 4 s, not 5.
  EXPECT_THAT(study.state_reason(), HasSubstr("all 4 trials finished"));
  for (const v1::Trial& trial : AllTrials(*core_, "main")) EXPECT_EQ(trial.worker_id(), "fast");
}

TEST_P(EndgameTest, AFasterWorkerThatOverrunsItsPredictionNoLongerHoldsTheSlowOnesBack) {
  StartMain();
  if (!GetParam()) return;
  ASSERT_EQ(SlowAssigns(), 2);
  // The Orin's trial should have taken 1 s; at 3 s nothing says when it ends: the sweep places
  // again, and each Pi 4 takes a trial.
  Advance(absl::Seconds(3));
  core_->ExpireTrials();
  EXPECT_EQ(SlowAssigns(), 4);
}

INSTANTIATE_TEST_SUITE_P(SpeedPlacement, EndgameTest, ::testing::Bool());

TEST_F(SpeedPlacementTest, NoDuplicateWhenTurnedOffOrNotWorthIt) {
  Start(/*duplicate_margin=*/0);
  RunUntilTheOrinIsIdle();
  EXPECT_EQ(fast_.Assigns().size(), 3u);
}

TEST_F(SpeedPlacementTest, NoDuplicateBeyondTheMargin) {
  Start(/*duplicate_margin=*/4.5);  // 4 s left on the Pi 4 is not 4.5 times the Orin's 1 s.
  RunUntilTheOrinIsIdle();
  EXPECT_EQ(fast_.Assigns().size(), 3u);
}

TEST_F(SpeedPlacementTest, FirstComeWhenSpeedPlacementIsOff) {
  Start(kDefaultDuplicateMargin, /*speed_placement=*/false);
  RunUntilTheOrinIsIdle();
  EXPECT_EQ(fast_.Assigns().size(), 3u);
  // Learnt and shown all the same.
  EXPECT_EQ(core_->SpeedEstimates().size(), 2u);
}

// Issue 32, fifth round: a board that has completed no trial yet is placed by its CPU prior
// (WorkerCapabilities.trial_cpu_cores, its cgroup quota), not handed trials as if it were as
// fast as any. An Orin (0.1 core a trial) has learnt 1 s a trial; a Pi 4 (0.02 core) joins
// idle when the study has one trial left: by its prior it would take 5 s, the Orin is free in
// 1 s and done in 2, so the Pi 4 leaves it to the Orin. Without a prior nothing predicted the
// Pi 4, and it took the trial first-come.
TEST_F(SpeedPlacementTest, ABoardNotYetLearntIsPlacedByItsCpuPrior) {
  Start();
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 3)).ok());
  v1::Hello orin = Board("fast", "orin");
  orin.mutable_capabilities()->set_trial_cpu_cores(0.1);
  v1::Hello pi4 = Board("slow", "pi4");
  pi4.mutable_capabilities()->set_trial_cpu_cores(0.02);
  fast_session_ = Connect(fast_, orin);
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_);
  ASSERT_EQ(fast_.Assigns().size(), 2u);
  slow_session_ = Connect(slow_, pi4);
  EXPECT_EQ(slow_.Assigns().size(), 0u);
  // `dhpt workers` shows the Pi 4's prior, a fifth of the Orin's learnt speed.
  for (const v1::Worker& worker : core_->ListWorkers()) {
    EXPECT_NEAR(worker.prior_speed(), worker.node_class() == "pi4" ? 0.2 : 0, 1e-9)
        << worker.worker_id();
  }
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_);
  ASSERT_EQ(fast_.Assigns().size(), 3u);
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_);
  EXPECT_EQ(slow_.Assigns().size(), 0u);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

// Issue 32, fifth round: mid-study, a slow board's trial predicted to end after the rest of
// the study (TPE's random start gave a Pi 4 the largest trial) is duplicated on a free fast
// worker before it takes a new trial; the first result counts, once.
TEST_F(SpeedPlacementTest, MidStudyASlowBoardsTrialThatWouldEndLastIsDuplicatedFirst) {
  early_duplicates_ = true;  // --early_duplicates: off by default (docs/benchmarks.md).
  Start();
  ASSERT_TRUE(core_->CreateStudy(XgboostStudy("learn", 2, R"pb(
      model { fixed { key: "n_estimators" value { number_value: 100 } } }
      parameters { name: "max_depth" int_range { min: 2 max: 10 } })pb")).ok());
  fast_session_ = Connect(fast_, Board("fast", "orin", {v1::Model::XGBOOST}));
  slow_session_ = Connect(slow_, Board("slow", "pi4", {v1::Model::XGBOOST}));
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_, "r2", 0.5);  // The Orin: 1 s for 100 rounds.
  Advance(absl::Seconds(4));
  ASSERT_EQ(slow_.Assigns().size(), 1u);
  Complete(slow_session_, slow_, "r2", 0.5);  // The Pi 4: 5 s.
  // Both away while the study starts, so that the Pi 4 comes back to its largest trial alone.
  core_->DisconnectWorker(fast_session_, "away");
  core_->DisconnectWorker(slow_session_, "away");
  ASSERT_TRUE(core_->CreateStudy(XgboostStudy(
      "main", 4, R"pb(parameters { name: "n_estimators" int_range { min: 100 max: 1000 } })pb")).ok());
  v1::EnqueueTrialRequest request;
  request.set_study("main");
  (*request.mutable_params())["n_estimators"].set_number_value(1000);
  ASSERT_TRUE(core_->EnqueueTrial(request).ok());
  RecordingChannel& slow = channels_.emplace_back();
  slow_session_ = Connect(slow, Board("slow", "pi4", {v1::Model::XGBOOST}));
  ASSERT_EQ(slow.Assigns().size(), 1u);
  const v1::Assign big = slow.Assigns().back();
  ASSERT_EQ(big.params().at("n_estimators").int_value(), 1000);
  // 50 s on the Pi 4; the other three trials, taken at its size (the study's only one so
  // far), take the two boards 25 s (67 s of the median board's work over 2.7 such boards): it
  // is the study's tail. The Orin runs it in 10 s, before any new trial.
  RecordingChannel& fast = channels_.emplace_back();
  fast_session_ = Connect(fast, Board("fast", "orin", {v1::Model::XGBOOST}));
  ASSERT_EQ(fast.Assigns().size(), 1u);
  EXPECT_EQ(fast.Assigns().back().trial_id(), big.trial_id());
  EXPECT_EQ(fast.Assigns().back().attempt(), big.attempt() + 1);
  Advance(absl::Seconds(10));
  Complete(fast_session_, fast, "r2", 0.9);
  EXPECT_EQ(slow.Count(v1::SchedulerMessage::kCancel), 1);
  const std::vector<v1::Trial> done = AllTrials(*core_, "main", v1::Trial::COMPLETED);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id(), big.trial_id());
  EXPECT_EQ(observer_.requeued, 0);
}

// Several trials ready: a fast worker takes the longest, a slow one the shortest; queue order
// when speed placement is off.
class ReadyTrialsTest : public SpeedPlacementTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ReadyTrialsTest, TheLongestReadyTrialGoesToTheFastestWorker) {
  const bool speed_placement = GetParam();
  Start(kDefaultDuplicateMargin, speed_placement);
  ASSERT_TRUE(core_->CreateStudy(XgboostStudy(
      "x", 6, R"pb(parameters { name: "n_estimators" int_range { min: 10 max: 400 } })pb")).ok());
  for (int rounds : {100, 101, 10, 400, 50, 300}) {
    v1::EnqueueTrialRequest request;
    request.set_study("x");
    (*request.mutable_params())["n_estimators"].set_number_value(rounds);
    absl::StatusOr<v1::Trial> enqueued = core_->EnqueueTrial(request);
    ASSERT_TRUE(enqueued.ok()) << enqueued.status();
  }
  fast_session_ = Connect(fast_, Board("fast", "orin", {v1::Model::XGBOOST}));
  slow_session_ = Connect(slow_, Board("slow", "pi4", {v1::Model::XGBOOST}));
  ASSERT_EQ(fast_.Assigns().size(), 1u);
  ASSERT_EQ(slow_.Assigns().size(), 1u);
  auto rounds = [](const v1::Assign& assign) { return assign.params().at("n_estimators").int_value(); };
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_, "r2", 0.5);
  ASSERT_EQ(fast_.Assigns().size(), 2u);
  EXPECT_EQ(rounds(fast_.Assigns().back()), speed_placement ? 400 : 10);
  Advance(absl::Seconds(4));
  Complete(slow_session_, slow_, "r2", 0.5);
  ASSERT_EQ(slow_.Assigns().size(), 2u);
  EXPECT_EQ(rounds(slow_.Assigns().back()), speed_placement ? 10 : 400);
  // Both workers list their class and learnt speed: the Orin took 1 s for 100 rounds, the Pi 4
  // 5 s for 101.
  std::map<std::string, double> speeds;
  for (const v1::Worker& worker : core_->ListWorkers()) {
    ASSERT_EQ(worker.speeds_size(), 1) << worker.worker_id();
    EXPECT_EQ(worker.speeds(0).kind(), v1::Model::XGBOOST);
    speeds[worker.node_class()] = worker.speeds(0).relative_speed();
  }
  EXPECT_NEAR(speeds["orin"] / speeds["pi4"], 5.0 * 100 / 101, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(SpeedPlacement, ReadyTrialsTest, ::testing::Bool());

// A straggler: the slow worker's trial is slower than its size predicted (deeper trees); its
// progress says so, and the idle fast worker is offered a duplicate then.
class StragglerTest : public SpeedPlacementTest, public ::testing::WithParamInterface<bool> {};

TEST_P(StragglerTest, ATrialWhoseProgressShowsItSlowIsDuplicatedOnAnIdleFastWorker) {
  const bool reports_progress = GetParam();
  // A margin that the predictions alone (4 s left on the Pi 4, 1 s on the Orin) do not pass.
  Start(/*duplicate_margin=*/4.5);
  auto study = [&](const std::string& name) {
    EXPECT_TRUE(core_->CreateStudy(XgboostStudy(
        name, 2, R"pb(parameters { name: "n_estimators" int_range { min: 100 max: 110 } })pb")).ok());
  };
  auto complete = [&](uint64_t session, RecordingChannel& channel) {
    Complete(session, channel, "r2", 0.5);
  };
  // Learnt from a first study: about 1 s a trial on the Orin, 5 s on the Pi 4.
  fast_session_ = Connect(fast_, Board("fast", "orin", {v1::Model::XGBOOST}));
  slow_session_ = Connect(slow_, Board("slow", "pi4", {v1::Model::XGBOOST}));
  study("learn");
  Advance(absl::Seconds(1));
  complete(fast_session_, fast_);
  Advance(absl::Seconds(4));
  complete(slow_session_, slow_);
  // The Orin away while the second study starts, so that the Pi 4 takes a trial of it (with
  // the Orin there, earliest finish time would leave both trials to the Orin).
  core_->DisconnectWorker(fast_session_, "away");
  study("main");
  ASSERT_EQ(slow_.Assigns().size(), 2u);
  const v1::Assign straggler = slow_.Assigns().back();
  // The Orin back a second later, with 4 s left on the Pi 4: not 4.5 times its 1 s, so no early
  // duplicate either; it takes the study's other trial.
  Advance(absl::Seconds(1));
  RecordingChannel& fast = channels_.emplace_back();
  fast_session_ = Connect(fast, Board("fast", "orin", {v1::Model::XGBOOST}));
  ASSERT_EQ(fast.Assigns().size(), 1u);
  EXPECT_NE(fast.Assigns().back().trial_id(), straggler.trial_id());
  Advance(absl::Seconds(1));
  complete(fast_session_, fast);
  EXPECT_EQ(fast.Assigns().size(), 1u);  // Idle: not worth a duplicate as predicted.
  // 5 s in, 3 of its 100-110 rounds done: it needs about three minutes, the Orin 35 s.
  Advance(absl::Seconds(3));
  core_->HandleProgress(slow_session_, Progress(straggler, reports_progress ? 3 : 99, 0.1));
  if (reports_progress) {
    ASSERT_EQ(fast.Assigns().size(), 2u);
    EXPECT_EQ(fast.Assigns().back().trial_id(), straggler.trial_id());
  } else {
    EXPECT_EQ(fast.Assigns().size(), 1u);  // 99 rounds done: nearly finished.
  }
}

INSTANTIATE_TEST_SUITE_P(SpeedPlacement, StragglerTest, ::testing::Bool());

// A board that slows after its speed was learnt (issue 32, from the hostile review): two
// Orins learn 1 s a trial (100 rounds); one holds the study's last trial, the other is idle.
// On pace, no duplicate (1 s left is not 1.5 times the idle Orin's 1 s). Then the holder
// freezes (no report at all, or none after its first) or is throttled (reports 5x slower
// per round): its re-estimated finish is more than 1.5 s off, and the idle Orin runs a
// duplicate, found by the periodic sweep (a frozen board sends nothing) or at the slowed
// report. The duplicate's result counts, once. Before, a trial past its prediction without
// progress was taken as finishing now, a slowed trial scaled the idle Orin's prediction with
// it, and nothing but a report offered a duplicate.
enum class Slowed { kFrozenWithoutProgress, kFrozenAfterProgress, kThrottled };

class SlowedBoardTest : public SpeedPlacementTest, public ::testing::WithParamInterface<Slowed> {};

TEST_P(SlowedBoardTest, ItsLastTrialIsDuplicatedOnAnIdleWorkerOfTheSameSpeed) {
  const bool reports = GetParam() != Slowed::kFrozenWithoutProgress;
  const std::string metric = reports ? "r2" : "value";
  Start();
  ASSERT_TRUE(core_->CreateStudy(reports ? XgboostStudy("s", 3, R"pb(
      model { fixed { key: "n_estimators" value { number_value: 100 } } }
      parameters { name: "max_depth" int_range { min: 2 max: 10 } })pb")
                                         : FunctionStudy("s", 3)).ok());
  const std::vector<v1::Model::Kind> kinds = {reports ? v1::Model::XGBOOST : v1::Model::FUNCTION};
  RecordingChannel& a = channels_.emplace_back();
  RecordingChannel& b = channels_.emplace_back();
  const uint64_t a_session = Connect(a, Board("a", "orin", kinds));
  const uint64_t b_session = Connect(b, Board("b", "orin", kinds));
  ASSERT_EQ(a.Assigns().size(), 1u);
  ASSERT_EQ(b.Assigns().size(), 1u);
  Advance(absl::Seconds(1));
  Complete(a_session, a, metric);  // Learnt: 1 s a trial. It takes the last one.
  ASSERT_EQ(a.Assigns().size(), 2u);
  const v1::Assign last = a.Assigns().back();
  Complete(b_session, b, metric);
  EXPECT_EQ(b.Assigns().size(), 1u);  // Idle: the last trial is on pace.
  auto duplicated = [&] { return b.Assigns().size() == 2u; };

  Advance(absl::Milliseconds(500));
  if (reports) core_->HandleProgress(a_session, Progress(last, 50, 0.1));  // Half, on pace.
  core_->ExpireTrials();
  EXPECT_FALSE(duplicated());
  Advance(absl::Milliseconds(500));  // 1 s in: as predicted, it should end now.
  core_->ExpireTrials();
  EXPECT_FALSE(duplicated());
  if (GetParam() == Slowed::kThrottled) {
    Advance(absl::Milliseconds(500));  // 10 rounds in 1 s since the first report: 0.1 s a round.
    core_->HandleProgress(a_session, Progress(last, 60, 0.1));
    ASSERT_TRUE(duplicated());  // 4 s left at that pace, at its report.
  } else {
    Advance(absl::Seconds(2));  // 3 s in, silent: 2 s overdue, or 3 s for the 50 rounds left.
    core_->ExpireTrials();
    ASSERT_TRUE(duplicated());
  }
  const v1::Assign duplicate = b.Assigns().back();
  EXPECT_EQ(duplicate.trial_id(), last.trial_id());
  Advance(absl::Seconds(1));
  core_->HandleResult(b_session, Finished(duplicate, v1::Trial::COMPLETED, 7, metric));
  EXPECT_EQ(a.Count(v1::SchedulerMessage::kCancel), 1);  // The slowed attempt.
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials.back().worker_id(), "b");
  EXPECT_EQ(trials.back().metrics().at(metric), 7);
  EXPECT_EQ(trials.back().lost_attempts(), 0);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

// Issue 32, fifth round: a board frozen whole (its heartbeats too) under a lease shorter than
// the 2.5 times its trial's prediction at which a silent trial is duplicated (1.5 times the
// idle board's prediction beyond its own overrun) loses the trial to the lease instead: it is
// requeued and the idle board runs it. That is the intended outcome, not a missed duplicate:
// a board silent past its lease cannot be told from a dead one, and the lease is what bounds
// the wait for one (docs/deployment.md). It costs one lost attempt; the trial is counted once,
// and the frozen board's result when it thaws is refused.
TEST_F(SpeedPlacementTest, ABoardFrozenPastItsLeaseLosesItsTrialToARequeueCountedOnce) {
  lease_ = absl::Seconds(2);  // Under 2.5 times the 1 s trials.
  Start();
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 3)).ok());
  RecordingChannel& a = channels_.emplace_back();
  RecordingChannel& b = channels_.emplace_back();
  const uint64_t a_session = Connect(a, Board("a", "orin"));
  const uint64_t b_session = Connect(b, Board("b", "orin"));
  Advance(absl::Seconds(1));
  Complete(a_session, a);  // Learnt: 1 s a trial. It takes the last one, and freezes.
  ASSERT_EQ(a.Assigns().size(), 2u);
  const v1::Assign last = a.Assigns().back();
  core_->HandleStarted(a_session, Attempt(last));
  Complete(b_session, b);
  for (int i = 0; i < 4; ++i) {  // b heartbeats every 0.6 s; a is silent.
    Advance(absl::Milliseconds(600));
    core_->HandleHeartbeat(b_session);
    core_->ExpireTrials();
    core_->ExpireLeases();
    EXPECT_EQ(b.Assigns().size(), i < 3 ? 1u : 2u) << "at " << 1 + 0.6 * (i + 1) << " s";
  }
  // 2.4 s since a was last heard from: the lease took the trial before any duplicate.
  ASSERT_EQ(b.Assigns().size(), 2u);
  const v1::Assign requeued = b.Assigns().back();
  EXPECT_EQ(requeued.trial_id(), last.trial_id());
  EXPECT_EQ(requeued.attempt(), last.attempt() + 1);
  Advance(absl::Seconds(1));
  core_->HandleResult(b_session, Finished(requeued, v1::Trial::COMPLETED, 7));
  // a thaws, reconnects holding its attempt and sends its result: refused, changing nothing.
  RecordingChannel& thawed = channels_.emplace_back();
  v1::Hello hello = Board("a", "orin");
  *hello.add_running() = Attempt(last);
  const uint64_t thawed_session = Connect(thawed, hello);
  core_->HandleResult(thawed_session, Finished(last, v1::Trial::COMPLETED, 99));
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  ASSERT_EQ(trials.size(), 3u);
  for (const v1::Trial& trial : trials) EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(trials.back().worker_id(), "b");
  EXPECT_EQ(trials.back().metrics().at("value"), 7);
  EXPECT_EQ(trials.back().lost_attempts(), 1);
  EXPECT_EQ(observer_.requeued, 1);
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);
}

INSTANTIATE_TEST_SUITE_P(SpeedPlacement, SlowedBoardTest,
                         ::testing::Values(Slowed::kFrozenWithoutProgress,
                                           Slowed::kFrozenAfterProgress, Slowed::kThrottled));

// From a hostile review: a class's prior kept counting after its boards left (one odd board's
// quota moved every later board's prior), and once 1,024 classes had come and gone (workers
// without a board label, restarted pods) a new board never learnt a speed.
TEST_F(SpeedPlacementTest, BoardsThatLeftMakeRoomAndTheirPriorsStopCounting) {
  Start();
  RecordingChannel& odd = channels_.emplace_back();
  v1::Hello odd_hello = Board("odd", "odd");
  odd_hello.mutable_capabilities()->set_trial_cpu_cores(kMinTrialCpuCores);
  const uint64_t odd_session = Connect(odd, odd_hello);
  v1::Hello pi4 = Board("slow", "pi4");
  pi4.mutable_capabilities()->set_trial_cpu_cores(1);
  slow_session_ = Connect(slow_, pi4);
  auto prior_of = [&](const std::string& worker_id) {
    for (const v1::Worker& worker : core_->ListWorkers()) {
      if (worker.worker_id() == worker_id) return worker.prior_speed();
    }
    return -1.0;
  };
  EXPECT_NEAR(prior_of("slow"), 1 / ((kMinTrialCpuCores + 1) / 2), 1e-9);
  core_->DisconnectWorker(odd_session, "gone");
  EXPECT_NEAR(prior_of("slow"), 1, 1e-9);  // Its own cores over the median of its own.

  // Over a thousand unlabelled pods, each a class of its own, come, complete a trial and go.
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 2'000)).ok());
  for (size_t i = 0; i <= kMaxSpeedClasses; ++i) {
    RecordingChannel& pod = channels_.emplace_back();
    v1::Hello hello = Board(absl::StrCat("pod-", i), "");
    hello.mutable_capabilities()->mutable_labels()->clear();
    const uint64_t session = Connect(pod, hello);
    Advance(absl::Seconds(1));
    ASSERT_FALSE(pod.Assigns().empty()) << i;
    Complete(session, pod);
    core_->DisconnectWorker(session, "restarted");
  }
  fast_session_ = Connect(fast_, Board("fast", "orin"));
  Advance(absl::Seconds(1));
  Complete(fast_session_, fast_);
  bool learnt = false;
  for (const SpeedModel::Estimate& estimate : core_->SpeedEstimates()) {
    learnt = learnt || estimate.node_class == "orin";
  }
  EXPECT_TRUE(learnt) << "a board that joined after 1,025 classes left learnt nothing";
}

}  // namespace
}  // namespace dhpt::scheduler
