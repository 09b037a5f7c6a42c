#pragma once

// XGBoost and Random Forest trials through XGBoost's C API. Random Forest is XGBoost's
// random-forest mode: `n_estimators` trees grown in parallel in one boosting round with
// learning rate 1 and row/column subsampling below 1 (defaults 0.8), as XGBoost documents.
// The forest is grown in chunks of kForestChunkTrees trees, one booster each (see
// TrainXgboost), so that a cancel or a timeout stops it between chunks.
//
// With `measure_deployment`, a trial that completes also reports what deploying its model would
// cost (inference_benchmark.h): the model serialised as XGBoost's UBJSON (a forest's chunks
// merged into one model first, xgboost_forest.h) is loaded into a fresh booster with nthread=1,
// as a deployment would load it, and predicts validation rows in place
// (XGBoosterPredictFromDense).
//
// The code that calls XGBoost is a shared library of its own, libdhpt_xgboost.so, loaded at the
// first trial (xgboost_module.h): a worker maps no XGBoost until then. This header and
// xgboost_trainer.cc need no XGBoost headers.

#include <atomic>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/datasets.h"
#include "services/worker/inference_benchmark.h"

namespace dhpt::worker {

struct RegressionScores {
  double r2 = 0;   // 1 - SSE/SST on the validation split.
  double mse = 0;
};

// Trees per booster of a Random Forest: small enough that a cancel stops a forest within a
// chunk's training time, large enough that XGBoost still grows the chunk's trees in parallel.
inline constexpr int kForestChunkTrees = 10;

struct XgboostRequest {
  bool random_forest = false;
  // Hyperparameters by XGBoost name (fixed and tuned), as strings.
  std::vector<std::pair<std::string, std::string>> params;
  int threads = 1;
  const std::atomic<bool>* cancelled = nullptr;
  // Called with (step, validation r2 of the model so far): every few boosting rounds (step =
  // rounds), or after every chunk of a forest (step = trees grown so far).
  std::function<void(int64_t, double)> progress;
  // Trees per chunk of a forest; tests set it to compare a chunked forest with one booster.
  int forest_chunk_trees = kForestChunkTrees;
  // Measure the model's deployment costs once it is trained (the trial runner asks for them).
  bool measure_deployment = false;
  InferenceBenchmarkOptions inference;  // Its `cancelled` is taken from above.
};

struct XgboostResult {
  double r2 = 0;
  double mse = 0;
  std::optional<DeploymentCosts> deployment;  // With measure_deployment.
};

// "1.7.4": the XGBoost library libdhpt_xgboost.so loads, asked of a short-lived child process
// (so this one maps no XGBoost); an error when the library cannot be loaded.
absl::StatusOr<std::string> ProbeXgboostVersion();
// A worker's start-up check: FAILED_PRECONDITION saying why and where to install the library
// when libdhpt_xgboost.so cannot be loaded (the worker could run no XGBoost trial).
absl::Status CheckXgboostModule();

// INVALID_ARGUMENT for hyperparameters out of the catalogue's ranges (checked before XGBoost
// is loaded), FAILED_PRECONDITION when libdhpt_xgboost.so cannot be loaded.
absl::StatusOr<XgboostResult> TrainXgboost(const SplitDataset& data,
                                           const XgboostRequest& request);

// Inline: both the worker and libdhpt_xgboost.so use it.
inline RegressionScores ScoreRegression(const std::vector<float>& truth, const float* predicted) {
  const size_t n = truth.size();
  double mean = 0;
  for (float y : truth) mean += y;
  mean /= static_cast<double>(n);
  double sse = 0, sst = 0;
  for (size_t i = 0; i < n; ++i) {
    sse += std::pow(truth[i] - predicted[i], 2);
    sst += std::pow(truth[i] - mean, 2);
  }
  RegressionScores scores;
  scores.mse = sse / static_cast<double>(n);
  scores.r2 = sst > 0 ? 1 - sse / sst : (sse == 0 ? 1.0 : 0.0);
  return scores;
}

}  // namespace dhpt::worker
