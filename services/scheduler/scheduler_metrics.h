#pragma once

// The scheduler's Prometheus metrics, declared once here. Events (trials started and ended,
// suggestions, requeues, connections) arrive through the SchedulerObserver interface; the
// state (studies by state, trials per study, best objective, connected workers and slots) is
// read from the core at every scrape by SchedulerStateCollector.
//
// Names use base units and bounded labels: study names, model kinds, algorithms, device kinds
// ("cpu", "cuda") and states; never a trial or worker id.

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/scheduler_observer.h"

namespace dhpt::scheduler {

class SchedulerMetrics : public SchedulerObserver {
 public:
  SchedulerMetrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void TrialStarted(const v1::StudySpec& spec, absl::string_view device,
                    absl::Duration queue_wait) override;
  void TrialEnded(const v1::StudySpec& spec, v1::Trial::State state, absl::string_view device,
                  absl::Duration run_time) override;
  void EarlyStoppingDecided(const v1::StudySpec& spec, absl::Duration took, bool stopped,
                            int64_t steps_saved) override;
  void TrialRequeued(const v1::StudySpec& spec) override;
  void TrialDuplicated(const v1::StudySpec& spec) override;
  void SuggestionMade(v1::Algorithm::Name algorithm, absl::Duration took) override;
  void WorkerConnected(const v1::WorkerCapabilities& worker) override;

 private:
  // The core serialises every call under its mutex, so these caches of metric handles (which
  // spare a label lookup per event) need no lock of their own.
  using ModelDevice = std::pair<v1::Model::Kind, std::string>;
  struct PerModelDevice {
    prometheus::Counter* assignments;
    prometheus::Histogram* duration;
    prometheus::Histogram* queue_wait;
  };
  PerModelDevice& ForModelDevice(v1::Model::Kind model, absl::string_view device);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& trials_;
  prometheus::Family<prometheus::Counter>& assignments_;
  prometheus::Family<prometheus::Histogram>& trial_duration_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Family<prometheus::Histogram>& suggestion_duration_;
  prometheus::Family<prometheus::Counter>& requeues_;
  prometheus::Family<prometheus::Counter>& duplicates_;
  prometheus::Family<prometheus::Counter>& steps_saved_;
  prometheus::Family<prometheus::Histogram>& early_stopping_duration_;
  prometheus::Family<prometheus::Counter>& connections_;
  std::map<ModelDevice, PerModelDevice> per_model_device_;
  std::map<std::pair<std::string, v1::Trial::State>, prometheus::Counter*> ended_;
  std::map<v1::Model::Kind, prometheus::Counter*> requeue_counters_;
  std::map<v1::Model::Kind, prometheus::Counter*> duplicate_counters_;
  std::map<std::string, prometheus::Counter*> steps_saved_counters_;  // By study.
  prometheus::Histogram* early_stopping_decisions_ = nullptr;
  std::map<v1::Algorithm::Name, prometheus::Histogram*> suggestions_;
};

// dhpt_study_param_importance: each study's most important parameters (PED-ANOVA, the first
// objective), at most this many per study so the label set stays small.
inline constexpr int kMaxImportanceParamsPerStudy = 5;

// Gauges of the scheduler's state, computed from the core when Prometheus scrapes.
class SchedulerStateCollector : public prometheus::Collectable {
 public:
  // Importances read an evicted ended study back from the store, hence not const.
  explicit SchedulerStateCollector(SchedulerCore* core) : core_(core) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // A study's importances as of its count of completed trials: recomputed only when it grows.
  struct CachedImportance {
    int completed = -1;
    std::vector<std::pair<std::string, double>> top;
  };
  SchedulerCore* const core_;
  mutable absl::Mutex mutex_;
  mutable std::map<std::string, CachedImportance> importances_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::scheduler
