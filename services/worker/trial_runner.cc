#include "services/worker/trial_runner.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "services/common/benchmark_functions.h"
#include "services/common/logging.h"
#include "services/common/model_catalog.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"
#include "services/worker/command_trial.h"
#include "services/worker/resource_meter.h"
#include "services/worker/xgboost_trainer.h"

namespace dhpt::worker {
namespace {

using Metrics = TrainerMetrics;

Metrics EvaluateSingle(const BenchmarkFunction& function, const std::vector<double>& x) {
  return Metrics{{"value", function.evaluate(x)}};
}

// A multi-objective test problem: its objectives as f1..fM.
Metrics EvaluateMultiObjective(const MultiObjectiveFunction& function,
                               const std::vector<double>& x) {
  std::vector<double> f(static_cast<size_t>(function.objectives));
  function.evaluate(x, f);
  Metrics metrics;
  for (int i = 0; i < function.objectives; ++i) {
    metrics[MultiObjectiveMetric(i)] = f[static_cast<size_t>(i)];
  }
  return metrics;
}

absl::StatusOr<Metrics> EvaluateFunction(const v1::Assign& assign, const TrialContext& context) {
  const absl::Time start = absl::Now();
  const std::string& name = assign.model().function();
  const MultiObjectiveFunction* multi = FindMultiObjectiveFunction(name);
  const BenchmarkFunction* single = multi == nullptr ? FindBenchmarkFunction(name) : nullptr;
  if (multi == nullptr && single == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown function \"", name, "\""));
  }
  const int d = static_cast<int>(assign.params().size());
  if (multi != nullptr ? d < multi->min_dims : !single->AcceptsDims(d)) {
    return absl::InvalidArgumentError(absl::StrCat(
        multi != nullptr ? multi->name : single->name, " is not defined in ", d, " dimensions"));
  }
  std::vector<double> x(static_cast<size_t>(d));
  for (int i = 0; i < d; ++i) {
    auto it = assign.params().find(absl::StrCat("x", i + 1));
    std::optional<double> value;
    if (it != assign.params().end()) value = AsNumber(it->second);
    if (!value) return absl::InvalidArgumentError(absl::StrCat("x", i + 1, " has no numeric value"));
    x[static_cast<size_t>(i)] = *value;
  }
  Metrics metrics =
      multi != nullptr ? EvaluateMultiObjective(*multi, x) : EvaluateSingle(*single, x);
  if (auto it = assign.model().fixed().find(std::string(kFunctionSecondsKey));
      it != assign.model().fixed().end()) {
    const absl::Time end = start + absl::Seconds(std::clamp(it->second.number_value(), 0.0,
                                                            kMaxFunctionSeconds));
    while (absl::Now() < end) {
      if (context.cancelled != nullptr && context.cancelled->load()) {
        return absl::CancelledError("cancelled");
      }
      absl::SleepFor(std::min(absl::Milliseconds(10), end - absl::Now()));
    }
  }
  return metrics;
}

Hyperparameters AllHyperparameters(const v1::Assign& assign) {
  Hyperparameters params;
  for (const auto& [name, value] : assign.model().fixed()) params[name] = FixedAsParameterValue(value);
  for (const auto& [name, value] : assign.params()) params[name] = value;
  return params;
}

void AddGpuUsage(const GpuUsage& usage, const GpuDevice& device,
                 google::protobuf::Map<std::string, double>& metrics) {
  if (usage.samples == 0) return;
  metrics[std::string(kMetricGpuUtilizationAvg)] = usage.utilization_avg;
  metrics[std::string(kMetricGpuUtilizationPeak)] = usage.utilization_peak;
  if (usage.memory_used_avg_bytes) {
    metrics[std::string(kMetricGpuMemoryUsedAvg)] = *usage.memory_used_avg_bytes;
    metrics[std::string(kMetricGpuMemoryUsedPeak)] = *usage.memory_used_peak_bytes;
  }
  if (device.memory_total_bytes) {
    metrics[std::string(kMetricGpuMemoryTotal)] = static_cast<double>(*device.memory_total_bytes);
  }
}

// The program's metrics, less any named like DHPT's own measurements (whether or not the
// study made one its objective): those are measured, never taken from what a program prints.
Metrics CommandMetrics(std::map<std::string, double> printed) {
  Metrics metrics;
  for (auto& [name, value] : printed) {
    if (name != kMetricPrunedStep && !IsMeasurementMetric(name)) metrics.emplace(name, value);
  }
  return metrics;
}

}  // namespace

v1::TrialResult TrialRunner::Run(const v1::Assign& assign, const TrialContext& context) {
  auto failed = [&assign](const std::string& error) {
    v1::TrialResult result;
    result.set_trial_id(assign.trial_id());
    result.set_attempt(assign.attempt());
    result.set_device("cpu");
    result.set_state(v1::Trial::FAILED);
    result.set_error(error);
    return result;
  };
  try {
    return RunUnguarded(assign, context);
  } catch (const std::bad_alloc&) {
    DHPT_LOG_WARNING("trial %d attempt %d ran out of memory (std::bad_alloc)", assign.trial_id(),
                     assign.attempt());
    return failed(
        "the worker ran out of memory in this trial (loading its dataset or training): use a "
        "smaller dataset or model, or workers with more memory");
  } catch (const std::exception& error) {
    DHPT_LOG_WARNING("trial %d attempt %d stopped on an exception: %s", assign.trial_id(),
                     assign.attempt(), error.what());
    return failed("the trial stopped on an unexpected error inside the worker (see its log)");
  }
}

v1::TrialResult TrialRunner::RunUnguarded(const v1::Assign& assign, const TrialContext& context) {
  v1::TrialResult result;
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_device("cpu");
  auto& metrics = *result.mutable_metrics();

  absl::StatusOr<Metrics> outcome = absl::InvalidArgumentError(
      absl::StrCat("this worker cannot run ", v1::Model::Kind_Name(assign.model().kind()),
                   " trials"));
  std::optional<ResourceMeter> meter;
  std::optional<GpuSampler> gpu_sampler;
  std::optional<PowerSampler> power_sampler;
  auto start_measuring = [&] {
    meter.emplace();
    if (options_.gpu) gpu_sampler.emplace(options_.gpu.get(), options_.sample_interval);
    if (options_.power) power_sampler.emplace(options_.power.get(), options_.sample_interval);
  };
  // Trained models of completed trials also report their deployment costs.
  TrialContext training = context;
  training.measure_deployment = true;
  // Loading is measured apart: it happens once per worker, not once per trial.
  auto load_dataset = [&] {
    const auto load_start = std::chrono::steady_clock::now();
    absl::StatusOr<std::shared_ptr<const SplitDataset>> data = datasets_.Get(assign.dataset(), context.cancelled);
    metrics["dataset_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    return data;
  };
  // A COMMAND trial's costs are its process tree's, not the worker process's.
  std::optional<ProcessTreeUsage> command_usage;
  switch (assign.model().kind()) {
    case v1::Model::COMMAND: {
      const std::string& name = assign.model().command();
      const RegisteredCommand* command =
          options_.commands != nullptr ? options_.commands->Find(name) : nullptr;
      if (command == nullptr) {
        outcome = absl::FailedPreconditionError(absl::StrCat(
            "this worker has no command ", name,
            "; its operator registers commands with --command"));
        break;
      }
      if (options_.autoencoder) result.set_device(options_.autoencoder->device());
      start_measuring();
      CommandTrialOutcome run = RunCommandTrial(*command, options_.command_options, assign, context);
      command_usage = run.usage;
      result.set_out_of_memory(run.out_of_memory);
      if (run.status.ok()) {
        outcome = CommandMetrics(std::move(run.metrics));
      } else {
        outcome = std::move(run.status);
      }
      break;
    }
    case v1::Model::FUNCTION:
      start_measuring();
      outcome = EvaluateFunction(assign, context);
      break;
    case v1::Model::AUTOENCODER: {
      if (!options_.autoencoder) break;
      absl::StatusOr<std::shared_ptr<const SplitDataset>> data = load_dataset();
      if (!data.ok()) {
        outcome = data.status();
        break;
      }
      result.set_device(options_.autoencoder->device());
      start_measuring();
      outcome = options_.autoencoder->Train(**data, AllHyperparameters(assign), training);
      break;
    }
    case v1::Model::XGBOOST:
    case v1::Model::RANDOM_FOREST: {
      absl::StatusOr<std::shared_ptr<const SplitDataset>> data = load_dataset();
      if (!data.ok()) {
        outcome = data.status();
        break;
      }
      XgboostRequest request;
      request.random_forest = assign.model().kind() == v1::Model::RANDOM_FOREST;
      for (const auto& [name, value] : assign.model().fixed()) {
        request.params.emplace_back(name, FormatFixedValue(value));
      }
      for (const auto& [name, value] : assign.params()) {
        request.params.emplace_back(name, FormatParameterValueExact(value));
      }
      request.threads = context.threads;
      request.cancelled = context.cancelled;
      request.progress = context.progress;
      request.measure_deployment = training.measure_deployment;
      start_measuring();
      absl::StatusOr<XgboostResult> trained = TrainXgboost(**data, request);
      if (trained.ok()) {
        Metrics trained_metrics{{"r2", trained->r2}, {"mse", trained->mse}};
        if (trained->deployment) AddDeploymentMetrics(*trained->deployment, trained_metrics);
        outcome = std::move(trained_metrics);
      } else {
        outcome = trained.status();
      }
      break;
    }
    default:
      break;
  }

  // Stopped in the reverse order of their start, so that the samplers' windows lie inside the
  // wall time the meter reports (energy never covers more time than the trial took).
  if (power_sampler) {
    const EnergyUsage energy = power_sampler->Stop();
    if (energy.joules) {
      metrics[std::string(kMetricEnergyJoules)] = *energy.joules;
      metrics[std::string(kMetricPowerAvgWatts)] = *energy.average_watts;
    }
  }
  if (gpu_sampler) AddGpuUsage(gpu_sampler->Stop(), options_.gpu->device(), metrics);
  if (meter) {
    ResourceUsage usage = meter->Stop();
    if (command_usage) {
      usage.cpu_seconds = command_usage->cpu_seconds;
      usage.cpu_utilization = usage.wall_seconds > 0 ? usage.cpu_seconds / usage.wall_seconds : 0;
      usage.peak_rss_bytes = command_usage->peak_rss_bytes;
    }
    metrics[std::string(kMetricWallSeconds)] = usage.wall_seconds;
    metrics[std::string(kMetricCpuSeconds)] = usage.cpu_seconds;
    metrics[std::string(kMetricCpuUtilization)] = usage.cpu_utilization;
    if (usage.peak_rss_bytes) metrics[std::string(kMetricPeakRssBytes)] = *usage.peak_rss_bytes;
  }
  if (outcome.ok()) {
    result.set_state(v1::Trial::COMPLETED);
    for (const auto& [name, value] : *outcome) metrics[name] = value;
  } else if (absl::IsCancelled(outcome.status())) {
    result.set_state(v1::Trial::CANCELLED);
    result.set_error(std::string(outcome.status().message()));
  } else {
    result.set_state(v1::Trial::FAILED);
    result.set_error(std::string(outcome.status().message()));
  }
  return result;
}

}  // namespace dhpt::worker
