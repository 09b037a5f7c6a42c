// UpdateStudy: limits changed while a study runs, finished studies reopened for more trials
// (their optimiser going on from their history), through a restart too, and what is refused.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <set>

#include "absl/time/clock.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

// Polls `condition` for up to 10 s (TPE suggests on the suggestion threads).
template <typename F>
bool WaitFor(F condition) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

v1::UpdateStudyRequest Update(const std::string& name, std::initializer_list<const char*> paths,
                              const v1::StudySpec& values) {
  v1::UpdateStudyRequest request;
  request.set_name(name);
  *request.mutable_spec() = values;
  for (const char* path : paths) request.mutable_update_mask()->add_paths(path);
  return request;
}

v1::UpdateStudyRequest MaxTrials(const std::string& name, int max_trials) {
  v1::StudySpec values;
  values.set_max_trials(max_trials);
  return Update(name, {"max_trials"}, values);
}

v1::StudySpec TpeStudy(const std::string& name, int max_trials) {
  v1::StudySpec spec = FunctionStudy(name, max_trials);
  spec.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  spec.mutable_algorithm()->set_seed(7);
  return spec;
}

class UpdateStudyTest : public ::testing::Test {
 protected:
  UpdateStudyTest() { Start(); }

  void Start() {
    core_.reset();
    SchedulerOptions options;
    options.clock = [this] { return now_; };
    core_ = std::make_unique<SchedulerCore>(db_.get(), options);
    ASSERT_TRUE(core_->Recover().ok());
  }
  void Restart() {
    core_.reset();
    db_.Reopen();
    Start();
  }

  // A worker of `slots` slots on `core` (the test's by default).
  uint64_t Connect(RecordingChannel& channel, int slots, SchedulerCore* core = nullptr) {
    absl::StatusOr<uint64_t> session =
        (core ? core : core_.get())->ConnectWorker(Hello("w", slots), {}, &channel);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }
  RecordingChannel& NewChannel() { return channels_.emplace_back(); }

  // Answers `n` trials, one at a time as they are assigned, each with a value of its
  // parameters (so two runs that suggest the same points learn the same).
  void RunTrials(SchedulerCore& core, RecordingChannel& channel, uint64_t session, int n,
                 v1::Trial::State state = v1::Trial::COMPLETED) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(WaitFor([&] { return channel.Assigns().size() > answered_[&channel]; }))
          << "no trial assigned after " << answered_[&channel];
      const v1::Assign assign = channel.Assigns()[answered_[&channel]++];
      v1::TrialResult result;
      result.set_trial_id(assign.trial_id());
      result.set_attempt(assign.attempt());
      result.set_epoch(assign.epoch());
      result.set_state(state);
      if (state == v1::Trial::FAILED) result.set_error("diverged");
      (*result.mutable_metrics())["value"] =
          assign.params().at("x1").double_value() + assign.params().at("x2").double_value();
      core.HandleResult(session, result);
    }
  }

  std::deque<RecordingChannel> channels_;  // Declared first: destroyed after the cores.
  std::map<const RecordingChannel*, size_t> answered_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(UpdateStudyTest, ACompletedStudyExtendedGoesOnWithTheSameOptimiserThroughARestart) {
  // What one study of 16 trials suggests, without a stop or a restart.
  testing::TempDatabase reference_db;
  SchedulerCore reference(reference_db.get(), SchedulerOptions{});
  ASSERT_TRUE(reference.CreateStudy(TpeStudy("s", 16)).ok());
  RecordingChannel& reference_channel = NewChannel();
  RunTrials(reference, reference_channel, Connect(reference_channel, 1, &reference), 16);

  ASSERT_TRUE(core_->CreateStudy(TpeStudy("s", 12)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, 1);
  RunTrials(*core_, channel, session, 12);
  ASSERT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);

  absl::StatusOr<v1::Study> extended = core_->UpdateStudy(MaxTrials("s", 16));
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_EQ(extended->state(), v1::Study::RUNNING);
  EXPECT_EQ(extended->spec().max_trials(), 16);
  EXPECT_FALSE(extended->has_end_time());
  RunTrials(*core_, channel, session, 2);

  // Stored before the answer: a restart keeps the new budget and the study running.
  Restart();
  absl::StatusOr<v1::Study> recovered = core_->GetStudy("s");
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->state(), v1::Study::RUNNING);
  EXPECT_EQ(recovered->spec().max_trials(), 16);
  RecordingChannel& after = NewChannel();
  const uint64_t again = Connect(after, 1);
  RunTrials(*core_, after, again, 2);
  absl::StatusOr<v1::Study> done = core_->GetStudy("s");
  EXPECT_EQ(done->state(), v1::Study::COMPLETED);
  EXPECT_EQ(done->trials_completed(), 16);

  // Trials 12-15 are the ones the uninterrupted study suggested: TPE went on from trial 12.
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  const std::vector<v1::Trial> expected = AllTrials(reference, "s");
  ASSERT_EQ(trials.size(), 16u);
  ASSERT_EQ(expected.size(), 16u);
  for (int n = 12; n < 16; ++n) {
    EXPECT_EQ(trials[n].params().at("x1").double_value(),
              expected[n].params().at("x1").double_value())
        << "trial " << n;
  }
}

TEST_F(UpdateStudyTest, AStoppedStudyReopensAndItsCancelledTrialsCountTowardsMaxTrials) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 6)).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, 2);
  RunTrials(*core_, channel, session, 2);
  ASSERT_EQ(core_->StopStudy("s")->trials_cancelled(), 2);  // The next two were running.
  answered_[&channel] += 2;

  // The same max_trials: the four trials it has not made yet.
  absl::StatusOr<v1::Study> reopened = core_->UpdateStudy(MaxTrials("s", 6));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(reopened->state(), v1::Study::RUNNING);
  EXPECT_EQ(reopened->trials_running(), 2);  // The 2 of 6 not made yet, on the worker's slots.
  RunTrials(*core_, channel, session, 2);
  absl::StatusOr<v1::Study> done = core_->GetStudy("s");
  EXPECT_EQ(done->state(), v1::Study::COMPLETED);
  EXPECT_EQ(done->trials_completed(), 4);
  EXPECT_EQ(done->trials_cancelled(), 2);
}

TEST_F(UpdateStudyTest, ParallelTrialsRaisedWhileRunningGivesMoreSlotsAndWatchersSeeIt) {
  v1::StudySpec spec = FunctionStudy("s", 20);
  spec.set_parallel_trials(1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  Connect(channel, 4);
  ASSERT_EQ(channel.Assigns().size(), 1u);

  class Watcher : public StudyWatcher {
    void OnEventsReady() override {}
    void OnEnd(const absl::Status&) override {}
  } watcher;
  absl::StatusOr<uint64_t> watch = core_->Watch("s", {}, &watcher);
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(core_->ReadWatch(*watch, 1 << 20).ok());  // What it was.

  v1::StudySpec values;
  values.set_parallel_trials(3);
  absl::StatusOr<v1::Study> updated = core_->UpdateStudy(Update("s", {"parallel_trials"}, values));
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->state(), v1::Study::RUNNING);
  EXPECT_EQ(channel.Assigns().size(), 3u);

  int seen = 0;
  absl::StatusOr<WatchRead> read = core_->ReadWatch(*watch, 1 << 20);
  ASSERT_TRUE(read.ok());
  for (const WatchEventPtr& event : read->events) {
    v1::WatchStudyResponse response;
    ASSERT_TRUE(response.ParseFromString(event->framed));
    for (const v1::StudyEvent& e : response.events()) {
      if (e.has_study() && e.study().spec().parallel_trials() == 3) ++seen;
    }
  }
  EXPECT_GE(seen, 1);
  core_->Unwatch(*watch);
}

TEST_F(UpdateStudyTest, AStudyFailedForMaxFailedTrialsReopensOnlyWhenTheChangeRaisesIt) {
  v1::StudySpec spec = FunctionStudy("s", 10);
  spec.set_max_failed_trials(0);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  RecordingChannel& channel = NewChannel();
  const uint64_t session = Connect(channel, 1);
  RunTrials(*core_, channel, session, 1);
  RunTrials(*core_, channel, session, 1, v1::Trial::FAILED);
  ASSERT_EQ(core_->GetStudy("s")->state(), v1::Study::FAILED);

  absl::StatusOr<v1::Study> refused = core_->UpdateStudy(MaxTrials("s", 20));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("max_failed_trials: 1 trials"));

  v1::StudySpec values;
  values.set_max_failed_trials(3);
  absl::StatusOr<v1::Study> reopened =
      core_->UpdateStudy(Update("s", {"max_failed_trials"}, values));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(reopened->state(), v1::Study::RUNNING);
  EXPECT_EQ(reopened->spec().max_failed_trials(), 3);
  RunTrials(*core_, channel, session, 1);  // The cancelled one stays; a new one runs.
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 2);
}

TEST_F(UpdateStudyTest, AStudyWhoseEveryTrialFailedIsNotReopened) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 2)).ok());
  RecordingChannel& channel = NewChannel();
  RunTrials(*core_, channel, Connect(channel, 1), 2, v1::Trial::FAILED);
  ASSERT_EQ(core_->GetStudy("s")->state(), v1::Study::FAILED);
  absl::StatusOr<v1::Study> refused = core_->UpdateStudy(MaxTrials("s", 10));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("--warm-start=s"));
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::FAILED);
}

TEST_F(UpdateStudyTest, AGridIsNotExtendedPastItsPoints) {
  v1::StudySpec spec = FunctionStudy("g", 9);
  spec.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  spec.mutable_algorithm()->set_grid_points(3);  // 9 points: every one runs.
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  v1::StudySpec exhausting = spec;
  exhausting.set_name("h");
  exhausting.set_max_trials(100);  // Ends when the optimiser has no point left.
  ASSERT_TRUE(core_->CreateStudy(exhausting).ok());
  RecordingChannel& channel = NewChannel();
  RunTrials(*core_, channel, Connect(channel, 1), 18);
  ASSERT_EQ(core_->GetStudy("g")->state(), v1::Study::COMPLETED);
  ASSERT_EQ(core_->GetStudy("h")->state(), v1::Study::COMPLETED);

  absl::StatusOr<v1::Study> refused = core_->UpdateStudy(MaxTrials("g", 29));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("has 9 points"));
  refused = core_->UpdateStudy(MaxTrials("h", 200));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("exhausted"));
}

TEST_F(UpdateStudyTest, ChangesAreCheckedAsAtCreation) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 4)).ok());
  RecordingChannel& channel = NewChannel();
  RunTrials(*core_, channel, Connect(channel, 1), 4);
  ASSERT_EQ(core_->GetStudy("s")->state(), v1::Study::COMPLETED);

  EXPECT_EQ(core_->UpdateStudy(MaxTrials("nope", 10)).status().code(),
            absl::StatusCode::kNotFound);
  v1::StudySpec values = FunctionStudy("s", 10);
  absl::StatusOr<v1::Study> refused = core_->UpdateStudy(Update("s", {}, values));
  EXPECT_THAT(refused.status().message(), HasSubstr("update_mask: name the fields"));
  refused = core_->UpdateStudy(Update("s", {"max_trials", "parameters"}, values));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("\"parameters\" cannot be changed"));
  refused = core_->UpdateStudy(MaxTrials("s", 3));
  EXPECT_THAT(refused.status().message(), HasSubstr("has made 4 trials already"));
  refused = core_->UpdateStudy(MaxTrials("s", 4));  // Ended, and no room for more.
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("raise max_trials above 4"));
  v1::StudySpec negative;
  negative.set_parallel_trials(-1);
  refused = core_->UpdateStudy(Update("s", {"parallel_trials"}, negative));
  EXPECT_THAT(refused.status().message(), HasSubstr("parallel_trials: must be >= 0"));
  v1::StudySpec timeout;
  timeout.mutable_trial_timeout()->set_seconds(0);
  refused = core_->UpdateStudy(Update("s", {"trial_timeout"}, timeout));
  EXPECT_THAT(refused.status().message(), HasSubstr("trial_timeout: must be between 1s"));
  // Nothing was changed by a refused update.
  absl::StatusOr<v1::Study> study = core_->GetStudy("s");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->spec().max_trials(), 4);
  EXPECT_EQ(study->spec().parallel_trials(), 0);
}

}  // namespace
}  // namespace dhpt::scheduler
