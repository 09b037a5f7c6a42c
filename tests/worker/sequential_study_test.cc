#include "services/worker/sequential_study.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "google/protobuf/text_format.h"
#include "services/common/param_values.h"

namespace dhpt::worker {
namespace {

using ::testing::HasSubstr;

v1::StudySpec Spec(const std::string& text) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  return spec;
}

constexpr char kBraninStudy[] = R"pb(
  name: "branin" model { kind: FUNCTION function: "branin" }
  objective { metric: "value" goal: MINIMIZE }
  algorithm { name: RANDOM seed: 9 }
  parameters { name: "x1" double_range { min: -5 max: 10 } }
  parameters { name: "x2" double_range { min: 0 max: 15 } }
  max_trials: 12)pb";

std::set<std::string> Points(const SequentialRun& run) {
  std::set<std::string> points;
  for (const v1::Trial& trial : run.trials) {
    points.insert(FormatParameterValue(trial.params().at("x1")) + "," +
                  FormatParameterValue(trial.params().at("x2")));
  }
  return points;
}

TEST(SequentialStudyTest, RunsTheBudgetInOrderAndKeepsTheBest) {
  TrialRunner runner;
  int started = 0;
  std::vector<int64_t> ended;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(
      Spec(kBraninStudy), runner,
      {.on_start = [&](const v1::Study& study) {
         EXPECT_EQ(study.state(), v1::Study::RUNNING);
         ++started;
       },
       .on_trial_end = [&](const v1::Trial& trial) { ended.push_back(trial.number()); }});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(started, 1);
  EXPECT_EQ(run->study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(run->study.trials_completed(), 12);
  ASSERT_EQ(run->trials.size(), 12u);
  EXPECT_EQ(ended, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  double best = run->trials[0].objective_value();
  for (const v1::Trial& trial : run->trials) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
    EXPECT_EQ(trial.worker_id(), "sequential");
    EXPECT_TRUE(trial.metrics().contains("wall_seconds"));
    EXPECT_LE(trial.start_time().seconds(), trial.end_time().seconds());
    best = std::min(best, trial.objective_value());
  }
  EXPECT_EQ(run->study.best_trial().objective_value(), best);
  // The spec came back with the scheduler's defaults filled in.
  EXPECT_GT(run->study.spec().max_attempts(), 0);
}

TEST(SequentialStudyTest, EarlyStoppingPrunesAsTheSchedulerWould) {
  // XGBoost reporting r2 every 10 rounds; learning rates down to 1e-4 are hopeless from their
  // first report. Each trial is judged against the curves of those before it.
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(Spec(R"pb(
    name: "pruned" model { kind: XGBOOST fixed { key: "num_boost_round" value { number_value: 200 } }
                                         fixed { key: "max_depth" value { number_value: 2 } } }
    dataset { friedman1 { samples: 500 features: 10 noise: 1 seed: 0 } }
    objective { metric: "r2" goal: MAXIMIZE }
    algorithm { name: RANDOM seed: 5 }
    parameters { name: "eta" double_range { min: 0.0001 max: 0.5 log: true } }
    early_stopping { median { n_startup_trials: 1 } }
    max_trials: 8)pb"), runner, {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(run->study.trials_completed() + run->study.trials_pruned(), 8);
  EXPECT_EQ(run->study.trials_failed(), 0);
  EXPECT_GE(run->study.trials_pruned(), 1);
  for (const v1::Trial& trial : run->trials) {
    if (trial.state() != v1::Trial::PRUNED) continue;
    SCOPED_TRACE(trial.number());
    EXPECT_THAT(trial.error(), HasSubstr("pruned at step"));
    const double step = trial.metrics().at("pruned_step");
    EXPECT_EQ(static_cast<int64_t>(step) % 10, 0);  // A step the trainer reported.
    EXPECT_LE(step, 200);
    EXPECT_TRUE(trial.metrics().contains("r2"));  // The value it was judged by,
    EXPECT_TRUE(trial.metrics().contains("cpu_seconds"));  // and what it cost until then.
    EXPECT_FALSE(trial.has_objective_value());
  }
}

TEST(SequentialStudyTest, CountsPrunedTrialsWithinReachOfTheBestAsGetStudyDoes) {
  // Halving at every 10 rounds from the first report: with only the best half going on, two
  // trials of this seed are stopped while level with the eventual best at that step (counted
  // as the scheduler counts them, from the run's own curves).
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(Spec(R"pb(
    name: "reach" model { kind: XGBOOST fixed { key: "num_boost_round" value { number_value: 80 } } }
    dataset { friedman1 { samples: 300 features: 10 noise: 1 seed: 0 } }
    objective { metric: "r2" goal: MAXIMIZE }
    algorithm { name: RANDOM seed: 7 }
    parameters { name: "eta" double_range { min: 0.01 max: 0.5 log: true } }
    parameters { name: "max_depth" int_range { min: 1 max: 6 } }
    early_stopping { asha { min_resource: 10 reduction_factor: 2 } }
    max_trials: 16)pb"), runner, {});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_GE(run->study.trials_pruned(), 1);
  EXPECT_EQ(run->study.trials_pruned_within_reach(), 2);
}

TEST(SequentialStudyTest, SameSeedSamePointsEveryAlgorithm) {
  for (v1::Algorithm::Name algorithm :
       {v1::Algorithm::RANDOM, v1::Algorithm::GRID, v1::Algorithm::TPE,
        v1::Algorithm::HILL_CLIMBING, v1::Algorithm::BAYESIAN}) {
    v1::StudySpec spec = Spec(kBraninStudy);
    spec.mutable_algorithm()->set_name(algorithm);
    TrialRunner first_runner, second_runner;
    absl::StatusOr<SequentialRun> first = RunStudySequentially(spec, first_runner, {});
    absl::StatusOr<SequentialRun> second = RunStudySequentially(spec, second_runner, {});
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(Points(*first), Points(*second)) << v1::Algorithm::Name_Name(algorithm);
    EXPECT_EQ(Points(*first).size(), first->trials.size()) << "a point was tried twice";
  }
}

TEST(SequentialStudyTest, AnExhaustedGridEndsTheStudyEarly) {
  v1::StudySpec spec = Spec(R"pb(
    name: "tiny-grid" model { kind: FUNCTION function: "branin" }
    algorithm { name: GRID }
    parameters { name: "x1" int_range { min: 0 max: 2 } }
    parameters { name: "x2" int_range { min: 0 max: 1 } }
    max_trials: 50)pb");
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(spec, runner, {});
  // 3 x 2 points, then nothing left to suggest.
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->trials.size(), 6u);
  EXPECT_EQ(run->study.state(), v1::Study::COMPLETED);
  EXPECT_THAT(run->study.state_reason(), HasSubstr("exhausted"));
}

TEST(SequentialStudyTest, TooManyFailuresFailTheStudy) {
  v1::StudySpec spec = Spec(R"pb(
    name: "bad-xgboost"
    model { kind: XGBOOST fixed { key: "objective" value { string_value: "reg:nonsense" } } }
    dataset { friedman1 { samples: 200 features: 5 } }
    objective { metric: "r2" goal: MAXIMIZE }
    parameters { name: "max_depth" int_range { min: 2 max: 6 } }
    max_trials: 10 max_failed_trials: 1)pb");
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(spec, runner, {});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->study.state(), v1::Study::FAILED);
  EXPECT_EQ(run->study.trials_failed(), 2);
  EXPECT_THAT(run->study.state_reason(), HasSubstr("more than max_failed_trials (1)"));
  EXPECT_FALSE(run->trials[0].error().empty());
}

TEST(SequentialStudyTest, CancellationStopsTheStudy) {
  std::atomic<bool> cancelled = false;
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(
      Spec(kBraninStudy), runner,
      {.cancelled = &cancelled, .on_trial_end = [&](const v1::Trial& trial) {
         if (trial.number() == 2) cancelled = true;
       }});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->study.state(), v1::Study::STOPPED);
  EXPECT_EQ(run->trials.size(), 3u);
}

TEST(SequentialStudyTest, AnInvalidSpecIsRefusedAsTheSchedulerWould) {
  v1::StudySpec spec = Spec(kBraninStudy);
  spec.mutable_parameters(0)->mutable_double_range()->set_min(20);
  TrialRunner runner;
  absl::StatusOr<SequentialRun> run = RunStudySequentially(spec, runner, {});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run.status().message(), HasSubstr("parameters[0]"));
}

}  // namespace
}  // namespace dhpt::worker
