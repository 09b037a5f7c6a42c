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

// A speed that is not a finite positive number says nothing (placement and ListWorkers read
// nullopt as unknown).
std::optional<double> SaneSpeed(double speed) {
  if (!std::isfinite(speed) || !(speed > 0)) return std::nullopt;
  return speed;
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

bool SpeedModel::AdmitClass(const std::string& node_class) const {
  return classes_.contains(node_class) || priors_.contains(node_class) ||
         classes_.size() + priors_.size() < kMaxSpeedClasses;
}

void SpeedModel::Record(const std::string& node_class, v1::Model::Kind kind, double units,
                        absl::Duration took) {
  if (!(units > 0) || took <= absl::ZeroDuration()) return;
  const double log_seconds_per_unit = std::log(absl::ToDoubleSeconds(took) / units);
  if (!std::isfinite(log_seconds_per_unit)) return;
  const auto key = std::make_pair(node_class, static_cast<int>(kind));
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (!AdmitClass(node_class)) return;
    ++classes_[node_class];
    it = series_.emplace(key, Series{}).first;
  } else {
    Withdraw(key.second, it->second);
  }
  Series& series = it->second;
  series.log_seconds_per_unit.push_back(log_seconds_per_unit);
  if (series.log_seconds_per_unit.size() > static_cast<size_t>(kSpeedWindow)) {
    series.log_seconds_per_unit.pop_front();
  }
  series.median = Median({series.log_seconds_per_unit.begin(), series.log_seconds_per_unit.end()});
  Enter(key.second, node_class, series);
}

void SpeedModel::SetPrior(const std::string& node_class, double trial_cpu_cores) {
  if (!(trial_cpu_cores >= kMinTrialCpuCores && trial_cpu_cores <= kMaxTrialCpuCores) ||
      !AdmitClass(node_class)) {
    return;
  }
  auto [it, fresh] = priors_.try_emplace(node_class, trial_cpu_cores);
  if (!fresh) {
    if (it->second == trial_cpu_cores) return;
    prior_cores_.Erase(it->second);
    it->second = trial_cpu_cores;
  }
  prior_cores_.Insert(trial_cpu_cores);
  // The kinds it learnt: their per-core medians counted its old prior, or none.
  for (auto at = series_.lower_bound(std::make_pair(node_class, 0));
       at != series_.end() && at->first.first == node_class; ++at) {
    Withdraw(at->first.second, at->second);
    Enter(at->first.second, node_class, at->second);
  }
}

void SpeedModel::ForgetPrior(const std::string& node_class) {
  auto it = priors_.find(node_class);
  if (it == priors_.end()) return;
  prior_cores_.Erase(it->second);
  priors_.erase(it);
  for (auto at = series_.lower_bound(std::make_pair(node_class, 0));
       at != series_.end() && at->first.first == node_class; ++at) {
    Withdraw(at->first.second, at->second);
    Enter(at->first.second, node_class, at->second);
  }
}

void SpeedModel::ForgetClassesExcept(const std::function<bool(const std::string&)>& keep) {
  for (auto at = series_.begin(); at != series_.end();) {
    if (keep(at->first.first)) {
      ++at;
      continue;
    }
    Withdraw(at->first.second, at->second);
    if (kinds_[at->first.second].class_medians.empty()) kinds_.erase(at->first.second);
    at = series_.erase(at);
  }
  for (auto at = classes_.begin(); at != classes_.end();) {
    at = keep(at->first) ? std::next(at) : classes_.erase(at);
  }
  std::vector<std::string> gone;
  for (const auto& [node_class, unused] : priors_) {
    if (!keep(node_class)) gone.push_back(node_class);
  }
  for (const std::string& node_class : gone) ForgetPrior(node_class);
}

void SpeedModel::Enter(int kind, const std::string& node_class, Series& series) {
  KindSummary& summary = kinds_[kind];
  summary.class_medians.Insert(series.median);
  if (auto prior = priors_.find(node_class); prior != priors_.end()) {
    series.per_core = series.median + std::log(prior->second);
    summary.per_core.Insert(*series.per_core);
  }
}

void SpeedModel::Withdraw(int kind, Series& series) {
  KindSummary& summary = kinds_[kind];
  summary.class_medians.Erase(series.median);
  if (series.per_core) summary.per_core.Erase(*series.per_core);
  series.per_core.reset();
}

std::optional<double> SpeedModel::LogSecondsPerUnit(const std::string& node_class,
                                                    int kind) const {
  if (auto it = series_.find(std::make_pair(node_class, kind)); it != series_.end()) {
    return it->second.median;
  }
  auto prior = priors_.find(node_class);
  auto summary = kinds_.find(kind);
  if (prior == priors_.end() || summary == kinds_.end()) return std::nullopt;
  const std::optional<double> per_core_median = summary->second.per_core.Median();
  if (!per_core_median) return std::nullopt;
  return *per_core_median - std::log(prior->second);
}

std::optional<double> SpeedModel::SecondsPerUnit(const std::string& node_class,
                                                 v1::Model::Kind kind) const {
  const std::optional<double> log_seconds = LogSecondsPerUnit(node_class, static_cast<int>(kind));
  if (!log_seconds) return std::nullopt;
  return std::exp(*log_seconds);
}

std::optional<double> SpeedModel::LearntSecondsPerUnit(const std::string& node_class,
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

std::optional<double> SpeedModel::MedianSecondsPerUnit(v1::Model::Kind kind) const {
  auto summary = kinds_.find(static_cast<int>(kind));
  if (summary == kinds_.end()) return std::nullopt;
  const std::optional<double> cluster_median = summary->second.class_medians.Median();
  if (!cluster_median) return std::nullopt;
  return std::exp(*cluster_median);
}

std::optional<double> SpeedModel::RelativeSpeed(const std::string& node_class,
                                                v1::Model::Kind kind) const {
  const std::optional<double> log_seconds = LogSecondsPerUnit(node_class, static_cast<int>(kind));
  auto summary = kinds_.find(static_cast<int>(kind));
  if (!log_seconds || summary == kinds_.end()) return std::nullopt;
  const std::optional<double> cluster_median = summary->second.class_medians.Median();
  if (!cluster_median) return std::nullopt;
  return SaneSpeed(std::exp(*cluster_median - *log_seconds));
}

std::optional<double> SpeedModel::OverallSpeed(const std::string& node_class) const {
  double log_sum = 0;
  int kinds = 0;
  for (auto it = series_.lower_bound(std::make_pair(node_class, 0));
       it != series_.end() && it->first.first == node_class; ++it) {
    log_sum += *kinds_.at(it->first.second).class_medians.Median() - it->second.median;
    ++kinds;
  }
  if (kinds > 0) return SaneSpeed(std::exp(log_sum / kinds));
  return PriorSpeed(node_class);
}

std::optional<double> SpeedModel::PriorSpeed(const std::string& node_class) const {
  auto prior = priors_.find(node_class);
  if (prior == priors_.end() || classes_.contains(node_class)) return std::nullopt;
  double log_sum = 0;
  int kinds = 0;
  for (const auto& [kind, unused] : kinds_) {
    if (std::optional<double> relative = RelativeSpeed(node_class, static_cast<v1::Model::Kind>(kind))) {
      log_sum += std::log(*relative);
      ++kinds;
    }
  }
  if (kinds > 0) return SaneSpeed(std::exp(log_sum / kinds));
  // No class with a prior has completed a trial: its cores against the median class's.
  return SaneSpeed(prior->second / *prior_cores_.Median());
}

std::vector<SpeedModel::Estimate> SpeedModel::Estimates() const {
  std::vector<Estimate> out;
  for (const auto& [key, series] : series_) {
    const auto kind = static_cast<v1::Model::Kind>(key.second);
    out.push_back({key.first, kind, RelativeSpeed(key.first, kind).value_or(0), std::exp(series.median)});
  }
  return out;
}

std::vector<SpeedModel::Estimate> SpeedModel::EstimatesOf(const std::string& node_class) const {
  std::vector<Estimate> out;
  for (auto it = series_.lower_bound(std::make_pair(node_class, 0));
       it != series_.end() && it->first.first == node_class; ++it) {
    const auto kind = static_cast<v1::Model::Kind>(it->first.second);
    out.push_back({node_class, kind, RelativeSpeed(node_class, kind).value_or(0), std::exp(it->second.median)});
  }
  return out;
}

}  // namespace dhpt::scheduler
