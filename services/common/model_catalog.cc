#include "services/common/model_catalog.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Counts of boosting rounds or trees: the workers' limit on one trial's work.
constexpr double kMaxTreeCount = 100000;
constexpr double kMaxSeed = 2147483647;  // XGBoost's seed is a 32-bit int.

// XGBoost's parameter bounds (its TrainParam and GBTree/Dart declarations); the sampling
// ratios are (0, 1] because XGBoost samples no column or row at 0 and fails the trial.
constexpr HyperparameterRange kXgboostRanges[] = {
    {"num_boost_round", 1, kMaxTreeCount, false, false, true},
    {"n_estimators", 1, kMaxTreeCount, false, false, true},
    {"num_parallel_tree", 1, kMaxTreeCount, false, false, true},
    {"eta", 0, kInf},
    {"learning_rate", 0, kInf},
    {"max_depth", 0, kInf, false, false, true},
    {"min_child_weight", 0, kInf},
    {"subsample", 0, 1, true, false},
    {"colsample_bytree", 0, 1, true, false},
    {"colsample_bylevel", 0, 1, true, false},
    {"colsample_bynode", 0, 1, true, false},
    {"gamma", 0, kInf},
    {"min_split_loss", 0, kInf},
    {"lambda", 0, kInf},
    {"reg_lambda", 0, kInf},
    {"alpha", 0, kInf},
    {"reg_alpha", 0, kInf},
    {"max_delta_step", 0, kInf},
    {"max_leaves", 0, kInf, false, false, true},
    {"max_bin", 2, kInf, false, false, true},
    {"rate_drop", 0, 1},
    {"skip_drop", 0, 1},
    {"seed", 0, kMaxSeed, false, false, true},
};

// services/worker/autoencoder_trainer.h says what each does.
constexpr HyperparameterRange kAutoencoderRanges[] = {
    {"hidden_layers", 1, 8, false, false, true},
    {"hidden_width", 1, 4096, false, false, true},
    {"width_decay", 0, 1, true, false},
    {"bottleneck", 1, 4096, false, false, true},
    {"learning_rate", 0, 10, true, false},
    {"weight_decay", 0, 10},
    {"dropout", 0, 1, false, true},
    {"epochs", 1, 100000, false, false, true},
    {"batch_size", 1, 1 << 20, false, false, true},
    {"seed", 0, 9007199254740992.0, false, false, true},  // 2^53: exact as a double.
};

}  // namespace

const HyperparameterRange* FindHyperparameterRange(v1::Model::Kind kind, absl::string_view name) {
  auto find = [name](const auto& ranges) -> const HyperparameterRange* {
    for (const HyperparameterRange& range : ranges) {
      if (range.name == name) return &range;
    }
    return nullptr;
  };
  switch (kind) {
    case v1::Model::XGBOOST:
    case v1::Model::RANDOM_FOREST:
      return IsKnownHyperparameter(kind, name) ? find(kXgboostRanges) : nullptr;
    case v1::Model::AUTOENCODER:
      return find(kAutoencoderRanges);
    default:
      return nullptr;
  }
}

const std::vector<absl::string_view>* HyperparameterChoices(v1::Model::Kind kind,
                                                            absl::string_view name) {
  static const std::vector<absl::string_view> kActivations = {"relu", "leaky_relu", "elu",
                                                              "gelu", "silu",       "tanh"};
  if (kind == v1::Model::AUTOENCODER && name == "activation") return &kActivations;
  return nullptr;
}

std::string DescribeRange(const HyperparameterRange& range) {
  const std::string high = std::isinf(range.max) ? "inf)" : absl::StrCat(range.max,
                                                                          range.max_open ? ")" : "]");
  return absl::StrCat(range.min_open ? "(" : "[", range.min, ", ", high);
}

absl::Status CheckHyperparameterValue(const HyperparameterRange& range, double value) {
  const bool low_ok = range.min_open ? value > range.min : value >= range.min;
  const bool high_ok = range.max_open ? value < range.max : value <= range.max;
  const bool whole_ok = !range.whole || value == std::floor(value);
  if (std::isfinite(value) && low_ok && high_ok && whole_ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(range.name, range.whole ? " must be a whole number in " : " must be in ",
                   DescribeRange(range), ", got ", value));
}

absl::Status CheckAutoencoderBottleneck(int64_t bottleneck, int64_t channels) {
  if (bottleneck < channels) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "bottleneck ", bottleneck, " must be smaller than the data's ", channels,
      " channels (feature columns), or nothing is compressed"));
}

v1::Objective::Goal ImpliedGoal(absl::string_view metric) {
  if (metric == "r2") return v1::Objective::MAXIMIZE;
  // Errors, losses and costs: less is better whatever the study.
  static const std::vector<absl::string_view> kLessIsBetter = {
      "mse", "val_loss", "value", "loss", kMetricWallSeconds, kMetricCpuSeconds,
      kMetricPeakRssBytes, kMetricEnergyJoules, kMetricModelBytes, kMetricInferenceLatencyUs,
      kMetricInferenceLatencyBatchUs, kMetricInferencePeakRssBytes};
  if (Contains(kLessIsBetter, metric)) return v1::Objective::MINIMIZE;
  return v1::Objective::GOAL_UNSPECIFIED;
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
