#include "services/worker/xgboost_trainer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/common/model_catalog.h"

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

// How often `part` occurs in `text`.
size_t Occurrences(absl::string_view text, absl::string_view part) {
  return std::vector<absl::string_view>(absl::StrSplit(text, part)).size() - 1;
}

// DHPT_XGBOOST_MODULE naming a FIFO blocked the start-up probe's dlopen (it opens the FIFO and
// waits for a writer) until the probe's 60 s timeout, with no log line; a directory got
// dlopen's terse error. Both are refused before anything is opened, and every refusal says
// what to install where once (the start-up check repeated it).
TEST(XgboostTrainerTest, AModuleThatIsNoRegularFileIsRefusedAtOnceSayingWhatToDoOnce) {
  const std::string dir = ::testing::TempDir();
  const std::string fifo = absl::StrCat(dir, "/fifo-xgboost-", getpid(), ".so");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo;
  const std::string directory = absl::StrCat(dir, "/dir-xgboost-", getpid(), ".so");
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0) << directory;
  const std::string missing = absl::StrCat(dir, "/missing-xgboost-", getpid(), ".so");
  const std::pair<std::string, std::string> cases[] = {
      {fifo, " is a FIFO, not a library file"},
      {directory, " is a directory, not a library file"},
      {missing, "No such file"}};
  for (const auto& [path, why] : cases) {
    SCOPED_TRACE(path);
    setenv("DHPT_XGBOOST_MODULE", path.c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = CheckXgboostModule();
    const auto took = std::chrono::steady_clock::now() - start;
    unsetenv("DHPT_XGBOOST_MODULE");
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(path));
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(why));
    EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(
                                      "this worker could run no XGBoost or Random Forest trial: "
                                      "cannot load the XGBoost library ("));
    EXPECT_EQ(Occurrences(status.message(), "DHPT_XGBOOST_MODULE"), 1) << status.message();
    EXPECT_EQ(Occurrences(status.message(), "install"), 1) << status.message();
    // Bounded by the probe's timeout (60 s) either way; refused without waiting on it.
    EXPECT_LT(took, std::chrono::seconds(30));
  }
  unlink(fifo.c_str());
  rmdir(directory.c_str());
}

TEST(XgboostTrainerTest, LearnsFriedmanAndReportsProgress) {
  SplitDataset data = Friedman(2000);
  XgboostRequest request;
  request.params = {{"max_depth", "4"}, {"eta", "0.1"}, {"num_boost_round", "150"}};
  std::vector<std::pair<int64_t, double>> progress;
  request.progress = [&](int64_t step, double value) { progress.emplace_back(step, value); };
  absl::StatusOr<XgboostResult> scores = TrainXgboost(data, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_GT(scores->r2, 0.85);
  ASSERT_EQ(progress.size(), 15u);
  EXPECT_EQ(progress.back().first, 150);
  // Validation r2, as forests report it: it rises, and the last is the final score.
  EXPECT_GT(progress.back().second, progress.front().second);
  EXPECT_NEAR(progress.back().second, scores->r2, 1e-9);
}

TEST(XgboostTrainerTest, RandomForestModeLearnsToo) {
  SplitDataset data = Friedman(4000);
  XgboostRequest request;
  request.random_forest = true;
  request.params = {{"n_estimators", "100"}, {"max_depth", "12"}};
  absl::StatusOr<XgboostResult> scores = TrainXgboost(data, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_GT(scores->r2, 0.8);
}

TEST(XgboostTrainerTest, ForestReportsR2AfterEveryChunk) {
  SplitDataset data = Friedman(2000);
  XgboostRequest request;
  request.random_forest = true;
  request.params = {{"n_estimators", "35"}, {"max_depth", "8"}};
  std::vector<std::pair<int64_t, double>> progress;
  request.progress = [&](int64_t step, double value) { progress.emplace_back(step, value); };
  absl::StatusOr<XgboostResult> scores = TrainXgboost(data, request);
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(progress.size(), 4u);  // 10, 20, 30 and 35 trees.
  EXPECT_EQ(progress[0].first, kForestChunkTrees);
  EXPECT_EQ(progress.back().first, 35);
  EXPECT_NEAR(progress.back().second, scores->r2, 1e-9);
  EXPECT_GT(progress.back().second, 0.5);
}

// Chunks of 10 trees, averaged by tree count, are the same estimator as one booster of 100
// trees: the r2 differs only by the draw of the trees' rows and columns.
TEST(XgboostTrainerTest, ChunkedForestMatchesOneBoosterForest) {
  SplitDataset data = Friedman(4000);
  XgboostRequest request;
  request.random_forest = true;
  request.params = {{"n_estimators", "100"}, {"max_depth", "10"}, {"seed", "7"}};
  request.forest_chunk_trees = 100;
  absl::StatusOr<XgboostResult> one = TrainXgboost(data, request);
  request.forest_chunk_trees = 10;
  absl::StatusOr<XgboostResult> chunked = TrainXgboost(data, request);
  ASSERT_TRUE(one.ok() && chunked.ok());
  EXPECT_NEAR(chunked->r2, one->r2, 0.01);
  // The chunks' seeds derive from the user's: the same seed grows the same forest.
  absl::StatusOr<XgboostResult> again = TrainXgboost(data, request);
  EXPECT_DOUBLE_EQ(again->r2, chunked->r2);
  request.params.back().second = "8";
  EXPECT_NE(TrainXgboost(data, request)->r2, chunked->r2);
}

// A forest of 2,000 trees used to be one boosting round that no cancel could stop.
TEST(XgboostTrainerTest, CancelStopsALargeForestBetweenChunks) {
  SplitDataset data = Friedman(4000);
  std::atomic<bool> cancelled = false;
  XgboostRequest request;
  request.random_forest = true;
  request.params = {{"n_estimators", "2000"}, {"max_depth", "10"}};
  request.cancelled = &cancelled;
  std::chrono::steady_clock::time_point cancelled_at;
  int64_t trees_at_cancel = 0;
  request.progress = [&](int64_t trees, double) {
    if (cancelled) return;
    // As the scheduler's Cancel does, from the worker's stream thread.
    trees_at_cancel = trees;
    std::thread([&] {
      cancelled_at = std::chrono::steady_clock::now();
      cancelled = true;
    }).join();
  };
  absl::Status status = TrainXgboost(data, request).status();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
  EXPECT_EQ(trees_at_cancel, kForestChunkTrees);
  EXPECT_LT(seconds, 1.0);
}

TEST(XgboostTrainerTest, BadParametersAreErrorsNotCrashes) {
  SplitDataset data = Friedman(200);
  XgboostRequest request;
  request.params = {{"booster", "oak"}};
  absl::StatusOr<XgboostResult> scores = TrainXgboost(data, request);
  ASSERT_FALSE(scores.ok());
  EXPECT_THAT(std::string(scores.status().message()), ::testing::HasSubstr("oak"));
  request.params = {{"num_boost_round", "0"}};
  EXPECT_FALSE(TrainXgboost(data, request).ok());
  request.random_forest = true;
  request.params = {{"seed", "-1"}};
  EXPECT_FALSE(TrainXgboost(data, request).ok());
}

// The trainer checks the ranges spec validation checks, from the same catalogue
// (services/common/model_catalog.h), in the same words.
TEST(XgboostTrainerTest, RangesAreTheCataloguesThatValidationUses) {
  SplitDataset data = Friedman(200);
  XgboostRequest request;
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"colsample_bynode", "1.5"}, {"subsample", "0"}, {"max_bin", "1"}, {"max_depth", "2.5"}};
  for (const auto& [name, value] : refused) {
    request.params = {{name, value}};
    absl::StatusOr<XgboostResult> result = TrainXgboost(data, request);
    ASSERT_FALSE(result.ok()) << name;
    double number = 0;
    ASSERT_TRUE(absl::SimpleAtod(value, &number));
    const HyperparameterRange* range = FindHyperparameterRange(v1::Model::XGBOOST, name);
    ASSERT_NE(range, nullptr) << name;
    EXPECT_EQ(result.status().message(), CheckHyperparameterValue(*range, number).message());
  }
  request.random_forest = true;
  request.params = {{"n_estimators", "0"}};
  EXPECT_EQ(TrainXgboost(data, request).status().message(),
            "n_estimators must be a whole number in [1, 100000], got 0");
}

// Deployment costs of a completed trial: a model with more trees is larger, and no figure is
// zero. Printed, as the example values docs/deployment-costs.md quotes.
TEST(XgboostTrainerTest, MeasuresDeploymentCosts) {
  SplitDataset data = Friedman(1000);
  XgboostRequest request;
  request.measure_deployment = true;
  auto costs = [&](const char* rounds) {
    request.params = {{"max_depth", "4"}, {"eta", "0.1"}, {"num_boost_round", rounds}};
    absl::StatusOr<XgboostResult> result = TrainXgboost(data, request);
    EXPECT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result.ok() && result->deployment.has_value());
    return result.ok() && result->deployment ? *result->deployment : DeploymentCosts{};
  };
  const DeploymentCosts small = costs("20");
  const DeploymentCosts large = costs("200");
  for (const DeploymentCosts& c : {small, large}) {
    std::printf("xgboost friedman1(1000): model_bytes=%.0f latency_us=%.2f batch256_us=%.3f "
                "peak_rss_bytes=%.0f (%d + %d calls)\n",
                c.model_bytes, c.inference.latency_us, c.inference.batch_latency_us,
                c.inference.peak_rss_bytes.value_or(-1), c.inference.single_row_calls,
                c.inference.batch_calls);
    EXPECT_GT(c.model_bytes, 0);
    EXPECT_GT(c.inference.latency_us, 0);
    EXPECT_GT(c.inference.batch_latency_us, 0);
    EXPECT_GE(c.inference.single_row_calls, 1);
  }
  EXPECT_GT(large.model_bytes, 5 * small.model_bytes);
  // Per row, a batch amortises the call's fixed cost.
  EXPECT_LT(large.inference.batch_latency_us, large.inference.latency_us);
  request.measure_deployment = false;
  EXPECT_FALSE(TrainXgboost(data, request)->deployment.has_value());
}

// A forest grown in chunks is measured as the one model of all its trees a user would deploy:
// about as large as a forest grown as one booster, and growing with the trees.
TEST(XgboostTrainerTest, ForestDeploymentCostsAreThoseOfOneModel) {
  SplitDataset data = Friedman(1000);
  XgboostRequest request;
  request.random_forest = true;
  request.measure_deployment = true;
  request.params = {{"n_estimators", "40"}, {"max_depth", "6"}};
  request.forest_chunk_trees = 40;
  absl::StatusOr<XgboostResult> one = TrainXgboost(data, request);
  request.forest_chunk_trees = 10;
  absl::StatusOr<XgboostResult> chunked = TrainXgboost(data, request);
  request.params = {{"n_estimators", "80"}, {"max_depth", "6"}};
  absl::StatusOr<XgboostResult> twice = TrainXgboost(data, request);
  ASSERT_TRUE(one.ok() && chunked.ok() && twice.ok()) << chunked.status() << twice.status();
  ASSERT_TRUE(one->deployment && chunked->deployment && twice->deployment);
  EXPECT_NEAR(chunked->deployment->model_bytes / one->deployment->model_bytes, 1.0, 0.1);
  EXPECT_NEAR(twice->deployment->model_bytes / chunked->deployment->model_bytes, 2.0, 0.2);
  EXPECT_GT(chunked->deployment->inference.latency_us, 0);
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
