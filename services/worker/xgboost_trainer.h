#pragma once

// XGBoost and Random Forest trials through XGBoost's C API. Random Forest is XGBoost's
// random-forest mode: `n_estimators` trees grown in parallel in one boosting round with
// learning rate 1 and row/column subsampling below 1 (defaults 0.8), as XGBoost documents.
// The forest is grown in chunks of kForestChunkTrees trees, one booster each (see
// TrainXgboost), so that a cancel or a timeout stops it between chunks.

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
};

// "1.7.4": the XGBoost library this process loaded.
std::string XgboostVersion();

absl::StatusOr<RegressionScores> TrainXgboost(const SplitDataset& data,
                                              const XgboostRequest& request);

RegressionScores ScoreRegression(const std::vector<float>& truth, const float* predicted);

}  // namespace dhpt::worker
