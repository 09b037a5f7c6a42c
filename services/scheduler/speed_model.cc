#include "services/scheduler/speed_model.h"

#include <algorithm>
#include <cmath>

#include "services/common/model_catalog.h"

namespace dhpt::scheduler {

namespace {

// The first of `names` the trial sets (parameter, else the model's fixed value), else `fallback`.
double Budget(const v1::Model& model,
              const google::protobuf::Map<std::string, v1::ParameterValue>& params,
              std::initializer_list<const char*> names, double fallback) {
  for (const char* name : names) {
    if (auto it = params.find(name); it != params.end()) {
      if (it->second.has_int_value()) return static_cast<double>(it->second.int_value());
      if (it->second.has_double_value()) return it->second.double_value();
    }
    if (auto it = model.fixed().find(name);
        it != model.fixed().end() && it->second.has_number_value()) {
      return it->second.number_value();
    }
  }
  return fallback;
}

double TrainingRows(const v1::Dataset& dataset) {
  double samples = 1;
  if (dataset.has_friedman1()) samples = dataset.friedman1().samples();
  if (dataset.has_sensors()) samples = dataset.sensors().samples();
  if (samples <= 1) return 1;
  const double validation = dataset.validation_fraction() > 0 ? dataset.validation_fraction() : 0.2;
  return std::max(1.0, samples * (1 - validation));
}

double Median(std::vector<double> values) {
  const size_t n = values.size();
  auto middle = values.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (n % 2 == 1) return *middle;
  return (*std::max_element(values.begin(), middle) + *middle) / 2;
}

}  // namespace

std::string NodeClass(const v1::WorkerCapabilities& worker, absl::string_view worker_id) {
  for (const char* key : {"board", "dhpt.io/board", "node"}) {
    if (auto it = worker.labels().find(key); it != worker.labels().end() && !it->second.empty()) {
      return it->second;
    }
  }
  return std::string(worker_id);
}

std::optional<double> TrialSteps(const v1::Model& model,
                                 const google::protobuf::Map<std::string, v1::ParameterValue>& params) {
  switch (model.kind()) {
    case v1::Model::XGBOOST:
      return std::max(1.0, Budget(model, params, {"num_boost_round", "n_estimators"}, kDefaultBoostRounds));
    case v1::Model::RANDOM_FOREST:
      return std::max(1.0, Budget(model, params, {"n_estimators", "num_parallel_tree"}, kDefaultForestTrees));
    case v1::Model::AUTOENCODER:
      return std::max(1.0, Budget(model, params, {"epochs"}, kDefaultAutoencoderEpochs));
    default:
      return std::nullopt;
  }
}

double TrialWorkUnits(const v1::Model& model,
                      const google::protobuf::Map<std::string, v1::ParameterValue>& params,
                      const v1::Dataset& dataset) {
  const std::optional<double> steps = TrialSteps(model, params);
  return steps ? *steps * TrainingRows(dataset) : 1;
}

void SpeedModel::Record(const std::string& node_class, v1::Model::Kind kind, double units,
                        absl::Duration took) {
  if (!(units > 0) || took <= absl::ZeroDuration()) return;
  const auto key = std::make_pair(node_class, static_cast<int>(kind));
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (!classes_.contains(node_class) && classes_.size() >= kMaxSpeedClasses) return;
    ++classes_[node_class];
    it = series_.emplace(key, Series{}).first;
  }
  Series& series = it->second;
  series.log_seconds_per_unit.push_back(std::log(absl::ToDoubleSeconds(took) / units));
  if (series.log_seconds_per_unit.size() > static_cast<size_t>(kSpeedWindow)) {
    series.log_seconds_per_unit.pop_front();
  }
  series.median = Median({series.log_seconds_per_unit.begin(), series.log_seconds_per_unit.end()});
  cluster_medians_.erase(static_cast<int>(kind));
}

std::optional<double> SpeedModel::SecondsPerUnit(const std::string& node_class,
                                                 v1::Model::Kind kind) const {
  auto it = series_.find(std::make_pair(node_class, static_cast<int>(kind)));
  if (it == series_.end()) return std::nullopt;
  return std::exp(it->second.median);
}

std::optional<absl::Duration> SpeedModel::Predict(const std::string& node_class,
                                                  v1::Model::Kind kind, double units) const {
  const std::optional<double> seconds = SecondsPerUnit(node_class, kind);
  if (!seconds) return std::nullopt;
  return absl::Seconds(*seconds * units);
}

std::optional<double> SpeedModel::ClusterMedian(v1::Model::Kind kind) const {
  auto [cached, fresh] = cluster_medians_.try_emplace(static_cast<int>(kind));
  if (!fresh) return cached->second;
  std::vector<double> medians;
  for (const auto& [key, series] : series_) {
    if (key.second == static_cast<int>(kind)) medians.push_back(series.median);
  }
  if (!medians.empty()) cached->second = Median(std::move(medians));
  return cached->second;
}

std::optional<double> SpeedModel::RelativeSpeed(const std::string& node_class,
                                                v1::Model::Kind kind) const {
  auto it = series_.find(std::make_pair(node_class, static_cast<int>(kind)));
  if (it == series_.end()) return std::nullopt;
  return std::exp(*ClusterMedian(kind) - it->second.median);
}

std::optional<double> SpeedModel::OverallSpeed(const std::string& node_class) const {
  double log_sum = 0;
  int kinds = 0;
  for (auto it = series_.lower_bound(std::make_pair(node_class, 0));
       it != series_.end() && it->first.first == node_class; ++it) {
    log_sum += *ClusterMedian(static_cast<v1::Model::Kind>(it->first.second)) - it->second.median;
    ++kinds;
  }
  if (kinds == 0) return std::nullopt;
  return std::exp(log_sum / kinds);
}

std::vector<SpeedModel::Estimate> SpeedModel::Estimates() const {
  std::vector<Estimate> out;
  for (const auto& [key, series] : series_) {
    const auto kind = static_cast<v1::Model::Kind>(key.second);
    out.push_back({key.first, kind, *RelativeSpeed(key.first, kind), std::exp(series.median)});
  }
  return out;
}

std::vector<SpeedModel::Estimate> SpeedModel::EstimatesOf(const std::string& node_class) const {
  std::vector<Estimate> out;
  for (auto it = series_.lower_bound(std::make_pair(node_class, 0));
       it != series_.end() && it->first.first == node_class; ++it) {
    const auto kind = static_cast<v1::Model::Kind>(it->first.second);
    out.push_back({node_class, kind, *RelativeSpeed(node_class, kind), std::exp(it->second.median)});
  }
  return out;
}

}  // namespace dhpt::scheduler
