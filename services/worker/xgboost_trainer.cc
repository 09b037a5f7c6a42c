#include "services/worker/xgboost_trainer.h"

#include <xgboost/c_api.h>

#include <charconv>
#include <cmath>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

constexpr int kDefaultBoostRounds = 100;
constexpr int kDefaultForestTrees = 100;
constexpr int kProgressEvery = 10;

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

absl::StatusOr<int> ParseCount(absl::string_view name, const std::string& value) {
  double parsed = 0;
  if (!absl::SimpleAtod(value, &parsed) || parsed < 1 || parsed > 100000 ||
      parsed != std::floor(parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a whole number from 1 to 100000, got ", value));
  }
  return static_cast<int>(parsed);
}

}  // namespace

RegressionScores ScoreRegression(const std::vector<float>& truth, const float* predicted) {
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

std::string XgboostVersion() {
  int major = 0, minor = 0, patch = 0;
  XGBoostVersion(&major, &minor, &patch);
  return absl::StrCat(major, ".", minor, ".", patch);
}

absl::StatusOr<RegressionScores> TrainXgboost(const SplitDataset& data,
                                              const XgboostRequest& request) {
  if (data.train.target.empty()) {
    return absl::InvalidArgumentError(
        "the data set has no target column: set dataset.csv.target to the column to predict");
  }
  ASSIGN_OR_RETURN(DMatrix train, MakeDMatrix(data.train, request.threads));
  ASSIGN_OR_RETURN(DMatrix validation, MakeDMatrix(data.validation, request.threads));
  DMatrixHandle train_handle = train.get();
  BoosterHandle handle = nullptr;
  RETURN_IF_ERROR(Check(XGBoosterCreate(&train_handle, 1, &handle), "XGBoosterCreate"));
  Booster booster(handle);

  auto set = [&](const std::string& name, const std::string& value) {
    return Check(XGBoosterSetParam(handle, name.c_str(), value.c_str()),
                 absl::StrCat("parameter ", name, "=", value));
  };
  RETURN_IF_ERROR(set("verbosity", "0"));
  RETURN_IF_ERROR(set("nthread", absl::StrCat(std::max(1, request.threads))));
  int rounds = kDefaultBoostRounds;
  if (request.random_forest) {
    rounds = 1;
    RETURN_IF_ERROR(set("learning_rate", "1"));
    RETURN_IF_ERROR(set("num_parallel_tree", absl::StrCat(kDefaultForestTrees)));
    RETURN_IF_ERROR(set("subsample", "0.8"));
    RETURN_IF_ERROR(set("colsample_bynode", "0.8"));
    // As XGBoost's own XGBRFRegressor: a forest averages unshrunk trees, so almost no L2.
    RETURN_IF_ERROR(set("lambda", "1e-5"));
  }
  for (const auto& [name, value] : request.params) {
    if (request.random_forest && (name == "n_estimators" || name == "num_parallel_tree")) {
      ASSIGN_OR_RETURN(int trees, ParseCount(name, value));
      RETURN_IF_ERROR(set("num_parallel_tree", absl::StrCat(trees)));
    } else if (!request.random_forest && (name == "n_estimators" || name == "num_boost_round")) {
      ASSIGN_OR_RETURN(rounds, ParseCount(name, value));
    } else {
      RETURN_IF_ERROR(set(name, value));
    }
  }

  DMatrixHandle eval_handles[] = {validation.get()};
  const char* eval_names[] = {"valid"};
  for (int round = 0; round < rounds; ++round) {
    if (request.cancelled != nullptr && request.cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError("cancelled by the scheduler");
    }
    RETURN_IF_ERROR(Check(XGBoosterUpdateOneIter(handle, round, train.get()), "training"));
    const bool report = request.progress && ((round + 1) % kProgressEvery == 0 || round + 1 == rounds);
    if (report) {
      const char* evaluation = nullptr;
      RETURN_IF_ERROR(Check(XGBoosterEvalOneIter(handle, round, eval_handles, eval_names, 1,
                                                 &evaluation),
                            "evaluation"));
      // "[9]\tvalid-rmse:1.2345"
      const std::string text(evaluation);
      if (size_t colon = text.rfind(':'); colon != std::string::npos) {
        double rmse = 0;
        if (absl::SimpleAtod(text.substr(colon + 1), &rmse)) request.progress(round + 1, rmse);
      }
    }
  }

  bst_ulong length = 0;
  const float* predictions = nullptr;
  RETURN_IF_ERROR(Check(XGBoosterPredict(handle, validation.get(), 0, 0, 0, &length, &predictions),
                        "prediction"));
  if (length != static_cast<bst_ulong>(data.validation.rows)) {
    return absl::InternalError(absl::StrCat("xgboost returned ", length, " predictions for ",
                                            data.validation.rows, " rows"));
  }
  return ScoreRegression(data.validation.target, predictions);
}

}  // namespace dhpt::worker
