#pragma once

// What each model kind accepts and reports: the hyperparameters a study may tune or fix, and
// the metrics a trial of that kind reports (so an objective can be checked before any trial).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "dhpt/v1/common.pb.h"

namespace dhpt {

// Hyperparameter names the model's trainer understands (aliases included).
const std::vector<absl::string_view>& KnownHyperparameters(v1::Model::Kind kind);
bool IsKnownHyperparameter(v1::Model::Kind kind, absl::string_view name);

// The values a numeric hyperparameter may take: what its trainer accepts (XGBoost's own
// bounds, the AutoEncoder's in services/worker/autoencoder_trainer.h). Spec validation refuses
// a range or fixed value outside it and the workers' trainers check against the same entry,
// so a study is never accepted only to fail every trial.
struct HyperparameterRange {
  absl::string_view name;
  double min = 0;
  double max = 0;  // Infinity: no upper bound.
  bool min_open = false;  // (min, ...: min itself is refused.
  bool max_open = false;  // ..., max): max itself is refused.
  bool whole = false;     // Whole numbers only (a count, a depth, a seed).
};
// nullptr for a name with no numeric range (strings such as booster, aliases included).
const HyperparameterRange* FindHyperparameterRange(v1::Model::Kind kind, absl::string_view name);
// "(0, 1]", "[1, 100000]", "[0, inf)".
std::string DescribeRange(const HyperparameterRange& range);
// INVALID_ARGUMENT "NAME must be in (0, 1], got 1.5" (or "a whole number in") unless `value`
// is in `range`.
absl::Status CheckHyperparameterValue(const HyperparameterRange& range, double value);
// The values a string hyperparameter may take (the AutoEncoder's activation); nullptr where
// any string goes to the trainer as is (XGBoost checks its own).
const std::vector<absl::string_view>* HyperparameterChoices(v1::Model::Kind kind,
                                                            absl::string_view name);

// An AutoEncoder compresses its input to `bottleneck` values, so the bottleneck must be below
// the data's channels (feature columns); the worker and validation both use this rule.
absl::Status CheckAutoencoderBottleneck(int64_t bottleneck, int64_t channels);

// The goal of a metric whose direction is known, for an objective that leaves it out: r2
// MAXIMIZE; mse, val_loss, value, loss and the measurements (time, memory, energy) MINIMIZE.
// GOAL_UNSPECIFIED for any other (a user code's accuracy could go either way).
v1::Objective::Goal ImpliedGoal(absl::string_view metric);

// COMMAND and EXTERNAL: the user's own code, whose hyperparameters and metrics DHPT does not
// know in advance. Their names need only be safe as `--name=value` arguments and metric names
// (IsUserCodeName).
bool IsUserCode(v1::Model::Kind kind);
inline constexpr size_t kMaxUserCodeNameBytes = 64;
// Letters, digits, '_' and '-' (and '.' after the first), at most kMaxUserCodeNameBytes: what
// Katib's StdOut collector reads as a metric name and a command line takes unquoted.
bool IsUserCodeName(absl::string_view name);

// Metrics a completed trial of this kind reports, the measurements of every trial included.
const std::vector<absl::string_view>& ReportedMetrics(v1::Model::Kind kind);
bool IsReportedMetric(v1::Model::Kind kind, absl::string_view metric);

// The metric a trial of this kind streams as progress while it trains (r2 on the validation
// split, every 10 rounds or trees, or every epoch), which early stopping compares; nullopt when
// the kind streams none (benchmark functions). User code streams whatever it reports of its
// objective metric, so for it this is `objective_metric`.
std::optional<absl::string_view> ProgressMetric(v1::Model::Kind kind,
                                                absl::string_view objective_metric = "");

// How long the trainers train when a study leaves it unset, and how often the tree trainers
// report progress (XGBoost every 10 rounds, a Random Forest every 10 trees; the AutoEncoder
// every epoch). Early stopping derives its default rungs from them (early_stopping_defaults.h).
inline constexpr int kDefaultBoostRounds = 100;
inline constexpr int kDefaultForestTrees = 100;
inline constexpr int kDefaultAutoencoderEpochs = 20;
inline constexpr int kTreeProgressEvery = 10;

// Measurements every trial reports, whatever its model.
inline constexpr absl::string_view kMetricWallSeconds = "wall_seconds";
inline constexpr absl::string_view kMetricCpuSeconds = "cpu_seconds";
inline constexpr absl::string_view kMetricCpuUtilization = "cpu_utilization";
inline constexpr absl::string_view kMetricPeakRssBytes = "peak_rss_bytes";
// Set by the scheduler on a PRUNED trial: the step its early-stopping rule stopped it at (its
// objective metric then holds the value it had reported there).
inline constexpr absl::string_view kMetricPrunedStep = "pruned_step";
// Reported only by trials that ran where a GPU is observed (services/worker/gpu_telemetry.h):
// utilisation as a 0..1 share, memory in bytes, averaged and peaked over the trial.
inline constexpr absl::string_view kMetricGpuUtilizationAvg = "gpu_utilization_avg";
inline constexpr absl::string_view kMetricGpuUtilizationPeak = "gpu_utilization_peak";
inline constexpr absl::string_view kMetricGpuMemoryUsedAvg = "gpu_memory_used_avg_bytes";
inline constexpr absl::string_view kMetricGpuMemoryUsedPeak = "gpu_memory_used_peak_bytes";
inline constexpr absl::string_view kMetricGpuMemoryTotal = "gpu_memory_total_bytes";
// What deploying the trained model would cost, measured on the worker that trained it (model
// kinds that train a model; docs/multi-objective.md says how): its serialised size, the median
// single-threaded inference time per row at batch 1 and at batch 256 on validation rows after a
// warm-up, and the peak memory of that inference.
inline constexpr absl::string_view kMetricModelBytes = "model_bytes";
inline constexpr absl::string_view kMetricInferenceLatencyUs = "inference_latency_us";
inline constexpr absl::string_view kMetricInferenceLatencyBatchUs = "inference_latency_batch256_us";
inline constexpr absl::string_view kMetricInferencePeakRssBytes = "inference_peak_rss_bytes";
// Reported only where power rails are observed (Jetson INA3221, services/worker/power_rails.h):
// the energy of the whole trial and its mean power. Absent, never zero, without a sensor.
inline constexpr absl::string_view kMetricEnergyJoules = "energy_joules";
inline constexpr absl::string_view kMetricPowerAvgWatts = "power_avg_watts";
inline constexpr absl::string_view kDeploymentMetrics[] = {
    kMetricModelBytes, kMetricInferenceLatencyUs, kMetricInferenceLatencyBatchUs,
    kMetricInferencePeakRssBytes};
// What a trial cost where it ran, as opposed to what its model scored.
inline constexpr absl::string_view kMeasurementMetrics[] = {
    kMetricWallSeconds,       kMetricCpuSeconds,         kMetricCpuUtilization,
    kMetricPeakRssBytes,      kMetricGpuUtilizationAvg,  kMetricGpuUtilizationPeak,
    kMetricGpuMemoryUsedAvg,  kMetricGpuMemoryUsedPeak,  kMetricGpuMemoryTotal,
    kMetricEnergyJoules,      kMetricPowerAvgWatts,
};

// Whether the worker measures `metric` itself: a measurement is never taken from what a
// program prints, whether or not the study made it an objective.
inline bool IsMeasurementMetric(absl::string_view metric) {
  for (absl::string_view measured : kMeasurementMetrics) {
    if (metric == measured) return true;
  }
  return false;
}

}  // namespace dhpt
