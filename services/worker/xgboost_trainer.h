#pragma once

// XGBoost and Random Forest trials through XGBoost's C API. Random Forest is XGBoost's
// random-forest mode: `n_estimators` trees grown in parallel in one boosting round with
// learning rate 1 and row/column subsampling below 1 (defaults 0.8), as XGBoost documents.

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/worker/datasets.h"

namespace dhpt::worker {

struct RegressionScores {
  double r2 = 0;   // 1 - SSE/SST on the validation split.
  double mse = 0;
};

struct XgboostRequest {
  bool random_forest = false;
  // Hyperparameters by XGBoost name (fixed and tuned), as strings.
  std::vector<std::pair<std::string, std::string>> params;
  int threads = 1;
  const std::atomic<bool>* cancelled = nullptr;
  // Called every few rounds with (round, validation rmse).
  std::function<void(int64_t, double)> progress;
};

// "1.7.4": the XGBoost library this process loaded.
std::string XgboostVersion();

absl::StatusOr<RegressionScores> TrainXgboost(const SplitDataset& data,
                                              const XgboostRequest& request);

RegressionScores ScoreRegression(const std::vector<float>& truth, const float* predicted);

}  // namespace dhpt::worker
