// Conditional search spaces on real workers (issue 33): every trial holds exactly its active
// parameters, through the store and the API, and a COMMAND program is given only those.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "services/study/spec_translation.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

// The model choice the tests below share: XGBoost or Random Forest on one dataset, each kind
// with its own parameters and `max_depth` for both, drawn by RANDOM with a fixed seed (seed 6
// draws both kinds within the first 8 trials).
v1::StudySpec ModelChoiceSpec(const std::string& name, int max_trials, int parallel_trials) {
  v1::StudySpec spec = Spec(R"(
name: model-choice
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 600, features: 10, noise: 1.0, seed: 3}}
algorithm: {name: RANDOM, seed: 6}
parameters:
  - {name: model_kind, categorical: {values: [XGBOOST, RANDOM_FOREST]}}
  - {name: eta, double_range: {min: 0.05, max: 0.5, log: true}, condition: {parent: model_kind, values: [XGBOOST]}}
  - {name: num_boost_round, int_range: {min: 10, max: 30}, condition: {parent: model_kind, values: [XGBOOST]}}
  - {name: num_parallel_tree, int_range: {min: 5, max: 20}, condition: {parent: model_kind, values: [RANDOM_FOREST]}}
  - {name: max_depth, int_range: {min: 2, max: 6}}
)");
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  spec.set_parallel_trials(parallel_trials);
  return spec;
}

TEST(ConditionalTest, AConditionalXgboostStudyRunsWithOnlyActiveParameters) {
  TestCluster cluster(2);
  const v1::StudySpec spec = Spec(R"(
name: conditional-xgb
model: {kind: XGBOOST, fixed: {num_boost_round: 20, tree_method: hist}}
dataset: {friedman1: {samples: 600, features: 10, noise: 1.0, seed: 3}}
algorithm: {name: TPE, seed: 4, tpe: {n_startup_trials: 4}}
parameters:
  - {name: booster, categorical: {values: [gbtree, dart]}}
  - {name: rate_drop, double_range: {min: 0.0, max: 0.5}, condition: {parent: booster, values: [dart]}}
  - {name: grow_policy, categorical: {values: [depthwise, lossguide]}}
  - {name: max_depth, int_range: {min: 2, max: 8}, condition: {parent: grow_policy, values: [depthwise]}}
  - {name: max_leaves, int_range: {min: 4, max: 64}, condition: {parent: grow_policy, values: [lossguide]}}
  - {name: eta, double_range: {min: 0.05, max: 0.5, log: true}}
forbidden:
  - all: [{parameter: booster, values: [dart]}, {parameter: grow_policy, values: [lossguide]}]
max_trials: 12
parallel_trials: 2
)");
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  const v1::Study study = cluster.WaitForEnd("conditional-xgb");
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 12);
  const optimizer::SearchSpace space = study::ToSearchSpace(study.spec());
  std::set<std::string> branches;
  const absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("conditional-xgb");
  ASSERT_TRUE(trials.ok()) << trials.status();
  for (const v1::Trial& trial : *trials) {
    // ToPoint refuses a missing active parameter and a present inactive one.
    const absl::StatusOr<optimizer::Point> point = study::ToPoint(space, trial.params());
    ASSERT_TRUE(point.ok()) << point.status() << " in trial " << trial.number();
    EXPECT_FALSE(space.Forbidden(*point)) << "trial " << trial.number();
    branches.insert(trial.params().at("booster").string_value() + "/" +
                    trial.params().at("grow_policy").string_value());
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.error();
  }
  EXPECT_GE(branches.size(), 2u);
  EXPECT_FALSE(branches.contains("dart/lossguide"));
}

TEST(ConditionalTest, ACommandProgramIsGivenOnlyActiveParameters) {
  TempDirectory dir;
  // Appends its arguments and DHPT_PARAMS to a file, one trial a line, and reports a loss.
  const std::string log = dir.path() + "/args.log";
  const std::string script = dir.path() + "/record.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"$* $DHPT_PARAMS\" >> " << log << "\necho loss=1\n";
  chmod(script.c_str(), 0755);
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("recorder", 2, "dhpt-cpu-worker", {"--command=record=" + script});
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: conditional-command
model: {kind: COMMAND, command: record}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 5}
parameters:
  - {name: shape, categorical: {values: [round, square]}}
  - {name: radius, double_range: {min: 1, max: 2}, condition: {parent: shape, values: [round]}}
  - {name: side, int_range: {min: 1, max: 9}, condition: {parent: shape, values: [square]}}
max_trials: 10
parallel_trials: 2
)")).ok());
  const v1::Study study = cluster.WaitForEnd("conditional-command", absl::Minutes(2));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  std::ifstream in(log);
  std::string line;
  int rounds = 0, squares = 0;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, "--shape=round")) {
      ++rounds;
      EXPECT_TRUE(absl::StrContains(line, "--radius=")) << line;
      EXPECT_FALSE(absl::StrContains(line, "side")) << line;
    } else {
      ++squares;
      EXPECT_TRUE(absl::StrContains(line, "--side=")) << line;
      EXPECT_FALSE(absl::StrContains(line, "radius")) << line;
    }
  }
  EXPECT_EQ(rounds + squares, 10);
  EXPECT_GE(rounds, 1);
  EXPECT_GE(squares, 1);
}

// Model choice end to end on real workers: both kinds' trials run and complete on the same
// dataset and objective. (That each is assigned as its own kind, without model_kind among its
// parameters, SchedulerCoreTest.AModelChoiceTrialIsAssignedAsItsOwnKind shows: XGBoost would
// accept a stray parameter, so a run alone cannot tell.)
TEST(ConditionalTest, AModelChoiceStudyRunsEachTrialAsItsOwnKind) {
  TestCluster cluster(2);
  ASSERT_TRUE(cluster.client().CreateStudy(ModelChoiceSpec("model-choice", 10, 2)).ok());
  const v1::Study study = cluster.WaitForEnd("model-choice");
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  const absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("model-choice");
  ASSERT_TRUE(trials.ok()) << trials.status();
  std::set<std::string> kinds;
  for (const v1::Trial& trial : *trials) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.error();
    kinds.insert(trial.params().at("model_kind").string_value());
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"XGBOOST", "RANDOM_FOREST"}));
}

// Model choice on workers that each run one kind (--models): each takes the trials of its kind,
// and a trial suggested for the other kind waits for the worker that runs it. Before, the study
// waited for a worker that runs every kind, and no trial ran.
TEST(ConditionalTest, WorkersThatRunOneKindEachTakeTheTrialsOfTheirKind) {
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("xgb", 1, "dhpt-cpu-worker", {"--models=XGBOOST"});
  cluster.SpawnWorkerProcess("rf", 1, "dhpt-cpu-worker", {"--models=RANDOM_FOREST"});
  ASSERT_TRUE(WaitFor([&] { return cluster.client().ListWorkers()->size() == 2; }));
  ASSERT_TRUE(cluster.client().CreateStudy(ModelChoiceSpec("model-choice-split", 10, 2)).ok());
  const v1::Study study = cluster.WaitForEnd("model-choice-split", absl::Seconds(60));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  const absl::StatusOr<std::vector<v1::Trial>> trials =
      cluster.client().ListTrials("model-choice-split");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 10u);
  std::set<std::string> kinds;
  for (const v1::Trial& trial : *trials) {
    const std::string kind = trial.params().at("model_kind").string_value();
    kinds.insert(kind);
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << trial.error();
    EXPECT_EQ(trial.worker_id(), kind == "XGBOOST" ? "xgb" : "rf") << "trial " << trial.number();
    EXPECT_EQ(trial.attempts_size(), 1) << "trial " << trial.number();
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"XGBOOST", "RANDOM_FOREST"}));
}

// With only XGBoost workers, a model choice's Random Forest trials wait: the study says for
// what (it stood still with an empty reason), and goes on when a worker that runs them joins.
TEST(ConditionalTest, AModelChoiceWaitingForAKindNoWorkerRunsSaysSo) {
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("xgb", 1, "dhpt-cpu-worker", {"--models=XGBOOST"});
  ASSERT_TRUE(WaitFor([&] { return cluster.client().ListWorkers()->size() == 1; }));
  ASSERT_TRUE(cluster.client().CreateStudy(ModelChoiceSpec("model-choice-waits", 8, 1)).ok());
  absl::StatusOr<v1::Study> waiting;
  ASSERT_TRUE(WaitFor([&] {
    waiting = cluster.client().GetStudy("model-choice-waits");
    return waiting.ok() && waiting->trials_pending() > 0 && waiting->trials_running() == 0 &&
           !waiting->state_reason().empty();
  }, absl::Seconds(60))) << (waiting.ok() ? waiting->ShortDebugString() : waiting.status().ToString());
  EXPECT_THAT(waiting->state_reason(), ::testing::HasSubstr("waiting for a worker that runs RANDOM_FOREST"));
  cluster.SpawnWorkerProcess("rf", 1, "dhpt-cpu-worker", {"--models=RANDOM_FOREST"});
  const v1::Study study = cluster.WaitForEnd("model-choice-waits", absl::Seconds(60));
  EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 8);
}

}  // namespace
}  // namespace dhpt::testing
