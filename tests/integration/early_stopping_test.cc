// Early stopping with the real scheduler and a real XGBoost worker: trials that are visibly
// losing are pruned from the validation r2 they stream, their slot goes to the next trial at
// once, and a restarted scheduler keeps what it decided.

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/study_client.h"
#include "services/common/model_catalog.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using google::protobuf::util::TimeUtil;

// XGBoost for up to 2,000 rounds; learning rates down to 1e-4 make some trials hopeless from
// their first report. One trial at a time, so that each is judged against those before it.
v1::StudySpec LongXgboostStudy(const std::string& name) {
  return Spec(absl::StrCat("name: ", name, R"(
model: {kind: XGBOOST, fixed: {tree_method: hist, num_boost_round: 2000, max_depth: 3}}
dataset: {friedman1: {samples: 2000, features: 10, noise: 1.0, seed: 0}}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: RANDOM, seed: 5}
parameters:
  - {name: eta, double_range: {min: 0.0001, max: 0.3, log: true}}
early_stopping: {median: {n_startup_trials: 1}}
max_trials: 8
parallel_trials: 1
)"));
}

TEST(EarlyStoppingFlowTest, LosingTrialsArePrunedFromTheirProgressAndFreeTheirSlotAtOnce) {
  TestCluster cluster(/*workers=*/0);
  cluster.SpawnWorkerProcess("cpu-1", /*slots=*/1);
  ASSERT_TRUE(cluster.client().CreateStudy(LongXgboostStudy("pruned")).ok());
  const v1::Study study = cluster.WaitForEnd("pruned", absl::Seconds(300));
  EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed() + study.trials_pruned(), 8);
  EXPECT_EQ(study.trials_failed(), 0);
  EXPECT_GE(study.trials_pruned(), 2);

  // Each pruned trial also keeps what it cost until it stopped, from its worker's answer to
  // the Cancel (which may come just after the study ended).
  absl::StatusOr<std::vector<v1::Trial>> trials;
  EXPECT_TRUE(WaitFor([&] {
    trials = cluster.client().ListTrials("pruned");
    return trials.ok() && std::all_of(trials->begin(), trials->end(), [](const v1::Trial& t) {
      return t.metrics().contains(std::string(kMetricCpuSeconds));
    });
  }, absl::Seconds(30))) << "a pruned trial's cost never arrived";
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 8u);
  for (size_t i = 0; i < trials->size(); ++i) {
    const v1::Trial& trial = (*trials)[i];
    if (trial.state() != v1::Trial::PRUNED) continue;
    SCOPED_TRACE(absl::StrCat("trial ", trial.number()));
    EXPECT_EQ(trial.attempt(), 1);  // Not charged, not retried.
    const double step = trial.metrics().at(std::string(kMetricPrunedStep));
    EXPECT_GE(step, 10);
    EXPECT_LT(step, 2000);
    EXPECT_EQ(static_cast<int64_t>(step) % 10, 0);  // A step the worker reported.
    EXPECT_TRUE(std::isfinite(trial.metrics().at("r2")));  // The value it was judged by.
    // The next trial started on the freed slot within seconds, not after 2,000 rounds.
    if (i + 1 < trials->size()) {
      const auto gap = TimeUtil::DurationToMilliseconds((*trials)[i + 1].start_time() -
                                                        trial.end_time());
      EXPECT_LT(gap, 5000) << "the slot stayed busy after the trial was pruned";
    }
  }
}

// The restart comes at a fixed point, not at a moment a timer picks: the first scheduler runs
// the study's first 4 trials to its end, is killed, and the restarted one is asked for 8 more
// (dhpt extend). Those 8 are judged only by the rule the restarted scheduler recovered, so one
// that lost the rule (or its curves) prunes none of them.
TEST(EarlyStoppingFlowTest, ARestartedSchedulerKeepsItsDecisionsAndGoesOnPruning) {
  TempDirectory directory;
  const std::string db = absl::StrCat("--db=", directory.path(), "/scheduler.db");
  v1::StudySpec spec = LongXgboostStudy("resumed");
  spec.set_max_trials(4);
  std::vector<v1::Trial> before;
  {
    SchedulerProcess scheduler({db});
    const std::unique_ptr<cli::ChildProcess> worker =
        StartWorkerProcess(scheduler.address(), "cpu-1");
    cli::StudyClient client(scheduler.address());
    ASSERT_TRUE(client.CreateStudy(spec).ok());
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Study> study = client.GetStudy("resumed");
      return study.ok() && study->state() == v1::Study::COMPLETED;
    }, absl::Seconds(300)));
    absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("resumed");
    ASSERT_TRUE(trials.ok());
    before = *trials;
    scheduler.Kill();
  }
  ASSERT_EQ(before.size(), 4u);
  SchedulerProcess scheduler({db});
  const std::unique_ptr<cli::ChildProcess> worker =
      StartWorkerProcess(scheduler.address(), "cpu-2");
  cli::StudyClient client(scheduler.address());
  v1::UpdateStudyRequest more;
  more.set_name("resumed");
  more.mutable_spec()->set_max_trials(12);
  more.mutable_update_mask()->add_paths("max_trials");
  ASSERT_TRUE(client.UpdateStudy(more).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> study = client.GetStudy("resumed");
    return study.ok() && study->state() == v1::Study::COMPLETED;
  }, absl::Seconds(300)));
  absl::StatusOr<std::vector<v1::Trial>> after = client.ListTrials("resumed");
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 12u);
  for (const v1::Trial& old : before) {
    const v1::Trial& now = (*after)[old.number()];
    EXPECT_EQ(now.state(), old.state()) << "trial " << old.number();
    EXPECT_EQ(now.metrics().at("r2"), old.metrics().at("r2")) << "trial " << old.number();
  }
  int pruned_after_restart = 0;
  for (size_t i = before.size(); i < after->size(); ++i) {
    pruned_after_restart += (*after)[i].state() == v1::Trial::PRUNED;
  }
  EXPECT_GE(pruned_after_restart, 1) << "the restarted scheduler pruned none of 8 new trials";
  absl::StatusOr<v1::Study> study = client.GetStudy("resumed");
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->trials_completed() + study->trials_pruned(), 12);
}

}  // namespace
}  // namespace dhpt::testing
