#include "services/common/model_catalog.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace dhpt {
namespace {

bool Contains(const std::vector<absl::string_view>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

const std::vector<absl::string_view>& KnownHyperparameters(v1::Model::Kind kind) {
  // XGBoost's own parameter names (and the scikit-learn aliases users type), plus the number
  // of boosting rounds. nthread is the worker's to set, so it is not tunable.
  static const std::vector<absl::string_view> kXgboost = {
      "num_boost_round", "n_estimators", "eta", "learning_rate", "max_depth",
      "min_child_weight", "subsample", "colsample_bytree", "colsample_bylevel",
      "colsample_bynode", "gamma", "min_split_loss", "lambda", "reg_lambda", "alpha",
      "reg_alpha", "max_delta_step", "max_leaves", "max_bin", "booster", "tree_method",
      "grow_policy", "objective", "sampling_method", "rate_drop", "skip_drop", "sample_type",
      "normalize_type", "one_drop", "base_score", "seed"};
  // Random Forest is XGBoost's random-forest mode: n_estimators parallel trees in one round.
  static const std::vector<absl::string_view> kRandomForest = {
      "n_estimators", "num_parallel_tree", "max_depth", "min_child_weight", "subsample",
      "colsample_bynode", "colsample_bytree", "colsample_bylevel", "gamma", "min_split_loss",
      "lambda", "reg_lambda", "alpha", "reg_alpha", "max_leaves", "max_bin", "tree_method",
      "grow_policy", "objective", "seed"};
  // services/worker/autoencoder_trainer.h documents each.
  static const std::vector<absl::string_view> kAutoencoder = {
      "hidden_layers", "hidden_width", "width_decay", "bottleneck", "activation",
      "learning_rate", "weight_decay", "dropout", "epochs", "batch_size", "seed"};
  static const std::vector<absl::string_view> kNone;
  switch (kind) {
    case v1::Model::XGBOOST:
      return kXgboost;
    case v1::Model::RANDOM_FOREST:
      return kRandomForest;
    case v1::Model::AUTOENCODER:
      return kAutoencoder;
    default:
      return kNone;
  }
}

bool IsKnownHyperparameter(v1::Model::Kind kind, absl::string_view name) {
  return Contains(KnownHyperparameters(kind), name);
}

const std::vector<absl::string_view>& ReportedMetrics(v1::Model::Kind kind) {
  static const std::vector<absl::string_view> kRegression = {
      "r2", "mse", kMetricWallSeconds, kMetricCpuSeconds, kMetricCpuUtilization,
      kMetricPeakRssBytes, kMetricModelBytes, kMetricInferenceLatencyUs,
      kMetricInferenceLatencyBatchUs, kMetricInferencePeakRssBytes};
  static const std::vector<absl::string_view> kAutoencoder = {
      "r2", "mse", "val_loss", kMetricWallSeconds, kMetricCpuSeconds, kMetricCpuUtilization,
      kMetricPeakRssBytes, kMetricModelBytes, kMetricInferenceLatencyUs,
      kMetricInferenceLatencyBatchUs, kMetricInferencePeakRssBytes};
  static const std::vector<absl::string_view> kFunction = {
      "value", kMetricWallSeconds, kMetricCpuSeconds, kMetricCpuUtilization, kMetricPeakRssBytes};
  static const std::vector<absl::string_view> kNone;
  switch (kind) {
    case v1::Model::XGBOOST:
    case v1::Model::RANDOM_FOREST:
      return kRegression;
    case v1::Model::AUTOENCODER:
      return kAutoencoder;
    case v1::Model::FUNCTION:
      return kFunction;
    default:
      return kNone;
  }
}

bool IsUserCode(v1::Model::Kind kind) {
  return kind == v1::Model::COMMAND || kind == v1::Model::EXTERNAL;
}

bool IsUserCodeName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxUserCodeNameBytes) return false;
  auto word = [](char c) { return absl::ascii_isalnum(c) || c == '_' || c == '-'; };
  if (!word(name[0]) || name[0] == '-') return false;  // Not an option of its own.
  return std::all_of(name.begin(), name.end(), [&](char c) { return word(c) || c == '.'; });
}

std::optional<absl::string_view> ProgressMetric(v1::Model::Kind kind,
                                                absl::string_view objective_metric) {
  if (IsUserCode(kind)) return objective_metric;
  switch (kind) {
    case v1::Model::XGBOOST:
    case v1::Model::RANDOM_FOREST:
    case v1::Model::AUTOENCODER:
      return "r2";
    default:  // FUNCTION: a benchmark function is evaluated at once, with nothing to stream.
      return std::nullopt;
  }
}

bool IsReportedMetric(v1::Model::Kind kind, absl::string_view metric) {
  return Contains(ReportedMetrics(kind), metric);
}

}  // namespace dhpt
