// libdhpt_xgboost.so: the code that calls XGBoost's C API (xgboost_trainer.h says what it
// trains and reports), loaded by the workers at their first XGBoost or Random Forest trial
// (xgboost_module.h says why it is a library of its own). Links XGBoost and Abseil only.

#include "services/worker/xgboost_module.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"
#include "services/worker/xgboost_forest.h"

namespace dhpt::worker {
namespace {

// XGBoost reports errors as -1 plus a thread-local message; this is where they stop.
absl::Status Check(int code, absl::string_view call) {
  if (code == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("xgboost ", call, ": ", XGBGetLastError()));
}

struct DMatrixDeleter {
  void operator()(void* handle) const { XGDMatrixFree(handle); }
};
struct BoosterDeleter {
  void operator()(void* handle) const { XGBoosterFree(handle); }
};
using DMatrix = std::unique_ptr<void, DMatrixDeleter>;
using Booster = std::unique_ptr<void, BoosterDeleter>;

absl::StatusOr<DMatrix> MakeDMatrix(const Dataset& data, int threads) {
  DMatrixHandle handle = nullptr;
  RETURN_IF_ERROR(Check(XGDMatrixCreateFromMat_omp(data.features.data(), data.rows, data.cols,
                                                   std::nanf(""), &handle, threads),
                        "XGDMatrixCreateFromMat"));
  DMatrix matrix(handle);
  RETURN_IF_ERROR(Check(XGDMatrixSetFloatInfo(handle, "label", data.target.data(), data.rows),
                        "XGDMatrixSetFloatInfo"));
  return matrix;
}

absl::Status Cancelled(const XgboostRequest& request) {
  if (request.cancelled != nullptr && request.cancelled->load(std::memory_order_relaxed)) {
    return absl::CancelledError("cancelled by the scheduler");
  }
  return absl::OkStatus();
}

// A booster on `train` (predicting `validation` from its prediction cache) with the plan's
// parameters; `forest_trees` > 0 makes it a random forest of that many trees with `seed`.
absl::StatusOr<Booster> MakeBooster(const XgboostRequest& request, const XgboostPlan& plan,
                                    DMatrixHandle train, DMatrixHandle validation,
                                    int forest_trees, uint64_t seed) {
  DMatrixHandle matrices[] = {train, validation};
  BoosterHandle handle = nullptr;
  RETURN_IF_ERROR(Check(XGBoosterCreate(matrices, 2, &handle), "XGBoosterCreate"));
  Booster booster(handle);
  auto set = [&](const std::string& name, const std::string& value) {
    return Check(XGBoosterSetParam(handle, name.c_str(), value.c_str()),
                 absl::StrCat("parameter ", name, "=", value));
  };
  RETURN_IF_ERROR(set("verbosity", "0"));
  RETURN_IF_ERROR(set("nthread", absl::StrCat(std::max(1, request.threads))));
  if (forest_trees > 0) {
    RETURN_IF_ERROR(set("learning_rate", "1"));
    RETURN_IF_ERROR(set("subsample", "0.8"));
    RETURN_IF_ERROR(set("colsample_bynode", "0.8"));
    // As XGBoost's own XGBRFRegressor: a forest averages unshrunk trees, so almost no L2.
    RETURN_IF_ERROR(set("lambda", "1e-5"));
  }
  for (const auto& [name, value] : plan.booster_params) RETURN_IF_ERROR(set(name, value));
  if (forest_trees > 0) {
    RETURN_IF_ERROR(set("num_parallel_tree", absl::StrCat(forest_trees)));
    RETURN_IF_ERROR(set("seed", absl::StrCat(seed)));
  }
  return booster;
}

// The booster's predictions for `validation`, which has `rows` rows.
absl::StatusOr<const float*> PredictValidation(BoosterHandle booster, DMatrixHandle validation,
                                               int64_t rows) {
  bst_ulong length = 0;
  const float* predictions = nullptr;
  RETURN_IF_ERROR(
      Check(XGBoosterPredict(booster, validation, 0, 0, 0, &length, &predictions), "prediction"));
  if (length != static_cast<bst_ulong>(rows)) {
    return absl::InternalError(
        absl::StrCat("xgboost returned ", length, " predictions for ", rows, " rows"));
  }
  return predictions;
}

// The model in `format` ("ubj" or "json"), as XGBoosterSaveModelToBuffer writes it.
absl::StatusOr<std::string> SaveModel(BoosterHandle booster, const char* format) {
  bst_ulong length = 0;
  const char* bytes = nullptr;
  const std::string config = absl::StrCat(R"({"format":")", format, R"("})");
  RETURN_IF_ERROR(Check(XGBoosterSaveModelToBuffer(booster, config.c_str(), &length, &bytes),
                        "saving the model"));
  return std::string(bytes, length);
}

// Gradient boosting: `rounds` rounds of one booster, cancellable between rounds. With `model`,
// the trained model goes there (UBJSON).
absl::StatusOr<RegressionScores> TrainBoosted(const SplitDataset& data,
                                              const XgboostRequest& request, const XgboostPlan& plan,
                                              DMatrixHandle train, DMatrixHandle validation,
                                              std::string* model) {
  const int rounds = plan.rounds;
  ASSIGN_OR_RETURN(Booster booster, MakeBooster(request, plan, train, validation, 0, 0));
  for (int round = 0; round < rounds; ++round) {
    RETURN_IF_ERROR(Cancelled(request));
    RETURN_IF_ERROR(Check(XGBoosterUpdateOneIter(booster.get(), round, train), "training"));
    if (request.progress && ((round + 1) % plan.progress_every == 0 || round + 1 == rounds)) {
      // The validation matrix is in the booster's prediction cache: this costs the new trees.
      ASSIGN_OR_RETURN(const float* predictions,
                       PredictValidation(booster.get(), validation, data.validation.rows));
      request.progress(round + 1, ScoreRegression(data.validation.target, predictions).r2);
    }
  }
  ASSIGN_OR_RETURN(const float* predictions,
                   PredictValidation(booster.get(), validation, data.validation.rows));
  const RegressionScores scores = ScoreRegression(data.validation.target, predictions);
  if (model != nullptr) {
    ASSIGN_OR_RETURN(*model, SaveModel(booster.get(), "ubj"));
  }
  return scores;
}

// A random forest of `trees` trees, grown in chunks so that it can be cancelled. XGBoost's
// random-forest mode (one round, num_parallel_tree = N, learning rate 1) predicts the mean of
// its N trees' outputs plus base_score, and every tree is fit to the same gradients at
// base_score. So chunk boosters of n_1, n_2, ... trees, each with its own seed (its own
// bootstrap rows and columns), combined as the tree-count-weighted mean of their predictions,
// are the same estimator as one booster of n_1 + n_2 + ... trees, as a forest of trees drawn
// independently should be. A chunk's booster is freed once its predictions are added, so a
// large forest also holds one chunk's trees at a time; with `chunks` (deployment costs to
// measure), each chunk's model is kept there as JSON for MergeForestChunks.
absl::StatusOr<RegressionScores> TrainForest(const SplitDataset& data,
                                             const XgboostRequest& request, const XgboostPlan& plan,
                                             DMatrixHandle train, DMatrixHandle validation,
                                             std::vector<ForestChunk>* chunks) {
  const int trees = plan.trees;
  const uint64_t seed = plan.seed;
  const int chunk_trees = std::max(1, request.forest_chunk_trees);
  const size_t rows = static_cast<size_t>(data.validation.rows);
  std::vector<double> sum(rows, 0.0);  // Tree-count-weighted sum of the chunks' predictions.
  std::vector<float> forest(rows);
  RegressionScores scores;
  int grown = 0;
  for (int chunk = 0; grown < trees; ++chunk) {
    RETURN_IF_ERROR(Cancelled(request));
    const int size = std::min(chunk_trees, trees - grown);
    // Distinct per chunk, the same for the same user seed; within XGBoost's 31-bit seeds.
    const uint64_t chunk_seed = (seed * 1000003 + static_cast<uint64_t>(chunk)) % 2147483647;
    ASSIGN_OR_RETURN(Booster booster, MakeBooster(request, plan, train, validation, size, chunk_seed));
    RETURN_IF_ERROR(Check(XGBoosterUpdateOneIter(booster.get(), 0, train), "training"));
    ASSIGN_OR_RETURN(const float* predictions,
                     PredictValidation(booster.get(), validation, data.validation.rows));
    grown += size;
    if (chunks != nullptr) {
      ASSIGN_OR_RETURN(std::string json, SaveModel(booster.get(), "json"));
      chunks->push_back({std::move(json), size});
    }
    for (size_t i = 0; i < rows; ++i) {
      sum[i] += static_cast<double>(size) * predictions[i];
      forest[i] = static_cast<float>(sum[i] / grown);
    }
    scores = ScoreRegression(data.validation.target, forest.data());
    if (request.progress) request.progress(grown, scores.r2);
  }
  return scores;
}

// XGBoost's in-place prediction reads its input through the array interface: `rows` x `cols`
// row-major floats at `data`, read-only.
std::string DenseArrayInterface(const float* data, int64_t rows, int64_t cols) {
  return absl::StrCat(R"({"data":[)", reinterpret_cast<uintptr_t>(data), R"(,true],"shape":[)",
                      rows, ",", cols, R"(],"typestr":"<f4","version":3})");
}
constexpr char kInplacePredictConfig[] =
    R"({"type":0,"training":false,"iteration_begin":0,"iteration_end":0,)"
    R"("strict_shape":false,"missing":NaN,"cache_id":0})";

// `model` (any format XGBoost loads) as a deployment would use it: a fresh booster with one
// thread (the figure a single-core board would see, and no contention with neighbour slots),
// sized as UBJSON, predicting in place without a DMatrix.
absl::StatusOr<DeploymentCosts> MeasureDeployment(const std::string& model,
                                                  const Dataset& validation,
                                                  const XgboostRequest& request,
                                                  MeasureInferenceFunction measure_inference) {
  BoosterHandle handle = nullptr;
  RETURN_IF_ERROR(Check(XGBoosterCreate(nullptr, 0, &handle), "XGBoosterCreate"));
  Booster booster(handle);
  RETURN_IF_ERROR(Check(XGBoosterLoadModelFromBuffer(handle, model.data(), model.size()),
                        "loading the trained model"));
  RETURN_IF_ERROR(Check(XGBoosterSetParam(handle, "verbosity", "0"), "verbosity"));
  RETURN_IF_ERROR(Check(XGBoosterSetParam(handle, "nthread", "1"), "nthread"));
  DeploymentCosts costs;
  ASSIGN_OR_RETURN(std::string bytes, SaveModel(handle, "ubj"));
  costs.model_bytes = static_cast<double>(bytes.size());
  InferenceBenchmarkOptions options = request.inference;
  options.cancelled = request.cancelled;
  const int64_t cols = validation.cols;
  auto predict = [&](const float* features, int64_t rows) {
    const bst_ulong* shape = nullptr;
    bst_ulong dims = 0;
    const float* predictions = nullptr;
    const std::string array = DenseArrayInterface(features, rows, cols);
    return Check(XGBoosterPredictFromDense(handle, array.c_str(), kInplacePredictConfig, nullptr,
                                           &shape, &dims, &predictions),
                 "in-place prediction");
  };
  ASSIGN_OR_RETURN(costs.inference, measure_inference(validation, predict, options));
  return costs;
}

absl::StatusOr<XgboostResult> Train(const SplitDataset& data, const XgboostRequest& request,
                                    const XgboostPlan& plan,
                                    MeasureInferenceFunction measure_inference) {
  ASSIGN_OR_RETURN(DMatrix train, MakeDMatrix(data.train, request.threads));
  ASSIGN_OR_RETURN(DMatrix validation, MakeDMatrix(data.validation, request.threads));
  std::string model;
  std::vector<ForestChunk> chunks;
  RegressionScores scores;
  if (request.random_forest) {
    ASSIGN_OR_RETURN(scores, TrainForest(data, request, plan, train.get(), validation.get(),
                                         request.measure_deployment ? &chunks : nullptr));
  } else {
    ASSIGN_OR_RETURN(scores, TrainBoosted(data, request, plan, train.get(), validation.get(),
                                          request.measure_deployment ? &model : nullptr));
  }
  XgboostResult result{.r2 = scores.r2, .mse = scores.mse};
  if (!request.measure_deployment) return result;
  // Only a completed trial is measured: a cancel that came with the last round stops here.
  RETURN_IF_ERROR(Cancelled(request));
  if (request.random_forest) {
    ASSIGN_OR_RETURN(model, MergeForestChunks(chunks));
    chunks.clear();
  }
  ASSIGN_OR_RETURN(result.deployment, MeasureDeployment(model, data.validation, request, measure_inference));
  return result;
}

void Version(int* major, int* minor, int* patch) { XGBoostVersion(major, minor, patch); }

}  // namespace
}  // namespace dhpt::worker

extern "C" const dhpt::worker::XgboostModule* DhptXgboostModule() {
  static const dhpt::worker::XgboostModule module{
      .abi = dhpt::worker::kXgboostModuleAbi,
      .version = &dhpt::worker::Version,
      .train = &dhpt::worker::Train,
  };
  return &module;
}
