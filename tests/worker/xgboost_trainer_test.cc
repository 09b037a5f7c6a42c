#include "services/worker/xgboost_trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dhpt::worker {
namespace {

SplitDataset Friedman(int samples) {
  v1::Friedman1 spec;
  spec.set_samples(samples);
  spec.set_features(10);
  spec.set_noise(1.0);
  return *SplitTrainValidation(*GenerateFriedman1(spec), 0.2, 0);
}

TEST(ScoreRegressionTest, PerfectAndMeanPredictions) {
  std::vector<float> truth = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(ScoreRegression(truth, truth.data()).r2, 1.0);
  std::vector<float> mean(4, 2.5f);
  RegressionScores scores = ScoreRegression(truth, mean.data());
  EXPECT_DOUBLE_EQ(scores.r2, 0.0);
  EXPECT_DOUBLE_EQ(scores.mse, 1.25);
}

TEST(XgboostTrainerTest, LearnsFriedmanAndReportsProgress) {
  SplitDataset data = Friedman(2000);
  XgboostRequest request;
  request.params = {{"max_depth", "4"}, {"eta", "0.1"}, {"num_boost_round", "150"}};
  std::vector<std::pair<int64_t, double>> progress;
  request.progress = [&](int64_t step, double value) { progress.emplace_back(step, value); };
  absl::StatusOr<RegressionScores> scores = TrainXgboost(data, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_GT(scores->r2, 0.85);
  ASSERT_EQ(progress.size(), 15u);
  EXPECT_EQ(progress.back().first, 150);
  EXPECT_LT(progress.back().second, progress.front().second);  // Validation rmse falls.
}

TEST(XgboostTrainerTest, RandomForestModeLearnsToo) {
  SplitDataset data = Friedman(4000);
  XgboostRequest request;
  request.random_forest = true;
  request.params = {{"n_estimators", "100"}, {"max_depth", "12"}};
  absl::StatusOr<RegressionScores> scores = TrainXgboost(data, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_GT(scores->r2, 0.8);
}

TEST(XgboostTrainerTest, BadParametersAreErrorsNotCrashes) {
  SplitDataset data = Friedman(200);
  XgboostRequest request;
  request.params = {{"booster", "oak"}};
  absl::StatusOr<RegressionScores> scores = TrainXgboost(data, request);
  ASSERT_FALSE(scores.ok());
  EXPECT_THAT(std::string(scores.status().message()), ::testing::HasSubstr("oak"));
  request.params = {{"num_boost_round", "0"}};
  EXPECT_FALSE(TrainXgboost(data, request).ok());
}

TEST(XgboostTrainerTest, CancellationStopsTraining) {
  SplitDataset data = Friedman(200);
  std::atomic<bool> cancelled = true;
  XgboostRequest request;
  request.cancelled = &cancelled;
  EXPECT_TRUE(absl::IsCancelled(TrainXgboost(data, request).status()));
}

}  // namespace
}  // namespace dhpt::worker
