#include "services/worker/worker_metrics.h"

#include "absl/strings/ascii.h"
#include "services/common/model_catalog.h"

namespace dhpt::worker {
namespace {

prometheus::Labels With(prometheus::Labels labels, const std::string& name, const std::string& value) {
  labels[name] = value;
  return labels;
}

}  // namespace

WorkerMetrics::WorkerMetrics(const std::string& kind, const std::string& node, int slots,
                             bool gpu_observed)
    : registry_(std::make_shared<prometheus::Registry>()),
      labels_({{"kind", kind}, {"node", node}}),
      trials_(prometheus::BuildCounter()
                  .Name("dhpt_worker_trials_total")
                  .Help("Trials this worker ran, by model and result state.")
                  .Register(*registry_)),
      cpu_seconds_(prometheus::BuildCounter()
                       .Name("dhpt_worker_trial_cpu_seconds_total")
                       .Help("CPU seconds the worker process spent in trials.")
                       .Register(*registry_)
                       .Add(labels_)),
      wall_seconds_(prometheus::BuildCounter()
                        .Name("dhpt_worker_trial_seconds_total")
                        .Help("Wall-clock seconds of the trials this worker ran.")
                        .Register(*registry_)
                        .Add(labels_)),
      peak_rss_(prometheus::BuildGauge()
                    .Name("dhpt_worker_trial_peak_rss_bytes")
                    .Help("Peak resident memory of the worker process during its last trial.")
                    .Register(*registry_)
                    .Add(labels_)),
      busy_slots_(prometheus::BuildGauge()
                      .Name("dhpt_worker_busy_slots")
                      .Help("Trial slots of this worker running a trial now.")
                      .Register(*registry_)
                      .Add(labels_)),
      slots_(prometheus::BuildGauge()
                 .Name("dhpt_worker_slots")
                 .Help("Trial slots of this worker.")
                 .Register(*registry_)
                 .Add(labels_)) {
  slots_.Set(slots);
  if (gpu_observed) {
    gpu_utilization_ = &prometheus::BuildGauge()
                            .Name("dhpt_worker_gpu_utilization_ratio")
                            .Help("Average GPU utilisation (0-1) during the worker's last trial.")
                            .Register(*registry_)
                            .Add(labels_);
    gpu_memory_ = &prometheus::BuildGauge()
                       .Name("dhpt_worker_gpu_memory_used_bytes")
                       .Help("Peak GPU memory used during the worker's last trial (0 where the device does not report it).")
                       .Register(*registry_)
                       .Add(labels_);
  }
}

void WorkerMetrics::TrialStarted(const v1::Assign&) { busy_slots_.Increment(); }

void WorkerMetrics::TrialFinished(const v1::Assign& assign, const v1::TrialResult& result) {
  busy_slots_.Decrement();
  {
    absl::MutexLock lock(&mutex_);
    prometheus::Counter*& counter = trial_counters_[{assign.model().kind(), result.state()}];
    if (counter == nullptr) {
      counter = &trials_.Add(
          With(With(labels_, "model", absl::AsciiStrToLower(v1::Model::Kind_Name(assign.model().kind()))),
               "state", absl::AsciiStrToLower(v1::Trial::State_Name(result.state()))));
    }
    counter->Increment();
  }
  const auto& metrics = result.metrics();
  auto find = [&](absl::string_view name) -> const double* {
    auto it = metrics.find(std::string(name));
    return it == metrics.end() ? nullptr : &it->second;
  };
  if (const double* v = find(kMetricCpuSeconds)) cpu_seconds_.Increment(*v);
  if (const double* v = find(kMetricWallSeconds)) wall_seconds_.Increment(*v);
  if (const double* v = find(kMetricPeakRssBytes)) peak_rss_.Set(*v);
  if (const double* v = find(kMetricGpuUtilizationAvg); v && gpu_utilization_) gpu_utilization_->Set(*v);
  if (const double* v = find(kMetricGpuMemoryUsedPeak); v && gpu_memory_) gpu_memory_->Set(*v);
}

}  // namespace dhpt::worker
