#pragma once

// A worker's Prometheus metrics, declared once here and fed by WorkerCore through the
// WorkerObserver interface. Every series carries the worker's kind ("cpu", "gpu") and node;
// none carries a trial or worker id.

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "services/worker/worker_core.h"

namespace dhpt::worker {

class WorkerMetrics : public WorkerObserver {
 public:
  // `gpu_observed`: the worker reads a GPU, so the GPU gauges exist (absent otherwise).
  WorkerMetrics(const std::string& kind, const std::string& node, int slots, bool gpu_observed);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void TrialStarted(const v1::Assign& assign) override;
  void TrialFinished(const v1::Assign& assign, const v1::TrialResult& result) override;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  const prometheus::Labels labels_;
  prometheus::Family<prometheus::Counter>& trials_;
  absl::Mutex mutex_;  // Slots finish trials concurrently.
  std::map<std::pair<v1::Model::Kind, v1::Trial::State>, prometheus::Counter*> trial_counters_
      ABSL_GUARDED_BY(mutex_);
  prometheus::Counter& cpu_seconds_;
  prometheus::Counter& wall_seconds_;
  prometheus::Gauge& peak_rss_;
  prometheus::Gauge* gpu_utilization_ = nullptr;
  prometheus::Gauge* gpu_memory_ = nullptr;
  prometheus::Gauge& busy_slots_;
  prometheus::Gauge& slots_;
};

}  // namespace dhpt::worker
