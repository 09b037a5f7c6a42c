// Every algorithm through the real scheduler and parallel workers on XGBoost: the model-based
// ones must do better than Random search with the same budget and seeds (median over seeds).

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "services/cli/study_file.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

double MedianBestR2(TestCluster& cluster, const std::string& algorithm) {
  std::vector<double> best;
  for (int seed = 1; seed <= 5; ++seed) {
    const std::string name = absl::StrCat("e2e-", algorithm, "-", seed);
    absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(absl::StrCat(R"(
model: {kind: XGBOOST, fixed: {num_boost_round: 60}}
dataset: {friedman1: {samples: 1000, features: 10, noise: 1.0, seed: 5}}
parameters:
  - {name: max_depth, int_range: {min: 1, max: 10}}
  - {name: eta, double_range: {min: 0.001, max: 1.0, log: true}}
  - {name: min_child_weight, double_range: {min: 1, max: 200, log: true}}
  - {name: subsample, double_range: {min: 0.1, max: 1.0}}
max_trials: 30
parallel_trials: 2
name: )", name, "\nalgorithm: {name: ", algorithm, ", seed: ", seed, "}\n"));
    EXPECT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(cluster.client().CreateStudy(*spec).ok());
    v1::Study study = cluster.WaitForEnd(name);
    EXPECT_EQ(study.state(), v1::Study::COMPLETED);
    EXPECT_EQ(study.trials_completed(), 30);
    best.push_back(study.best_trial().objective_value());
  }
  std::sort(best.begin(), best.end());
  return best[2];
}

TEST(AlgorithmsTest, ModelBasedSearchIsNoWorseThanRandomThroughTheScheduler) {
  TestCluster cluster(2);
  const double random = MedianBestR2(cluster, "RANDOM");
  const double tpe = MedianBestR2(cluster, "TPE");
  const double climbing = MedianBestR2(cluster, "HILL_CLIMBING");
  const double bayesian = MedianBestR2(cluster, "BAYESIAN");
  std::printf("median best r2: random %.4f, tpe %.4f, hill climbing %.4f, bayesian %.4f\n",
              random, tpe, climbing, bayesian);
  // Strictly better: an algorithm that fell back to random search with the same seeds would
  // tie Random's median exactly, and a tie passed before (issue 35).
  EXPECT_GT(tpe, random);
  EXPECT_GT(climbing, random);
  EXPECT_GT(bayesian, random);
}

}  // namespace
}  // namespace dhpt::testing
