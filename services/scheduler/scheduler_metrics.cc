#include "services/scheduler/scheduler_metrics.h"

#include <array>
#include <iterator>

#include "absl/strings/ascii.h"

namespace dhpt::scheduler {
namespace {

using prometheus::Histogram;

std::string Lower(const std::string& name) { return absl::AsciiStrToLower(name); }
std::string ModelLabel(const v1::StudySpec& spec) { return Lower(v1::Model::Kind_Name(spec.model().kind())); }
std::string AlgorithmLabel(v1::Algorithm::Name name) {
  return Lower(v1::Algorithm::Name_Name(name == v1::Algorithm::NAME_UNSPECIFIED ? v1::Algorithm::RANDOM : name));
}

// Trial durations from 10 ms to ~3 h; suggestions from 10 µs to ~40 s.
Histogram::BucketBoundaries Exponential(double start, double factor, int count) {
  Histogram::BucketBoundaries bounds;
  for (double b = start; count-- > 0; b *= factor) bounds.push_back(b);
  return bounds;
}
const Histogram::BucketBoundaries& TrialBuckets() {
  static const auto* const bounds = new Histogram::BucketBoundaries(Exponential(0.01, 2.5, 15));
  return *bounds;
}
const Histogram::BucketBoundaries& SuggestionBuckets() {
  static const auto* const bounds = new Histogram::BucketBoundaries(Exponential(1e-5, 3, 15));
  return *bounds;
}

prometheus::MetricFamily GaugeFamily(const char* name, const char* help) {
  return {name, help, prometheus::MetricType::Gauge, {}};
}
void AddGauge(prometheus::MetricFamily& family, std::vector<prometheus::ClientMetric::Label> labels,
              double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

SchedulerMetrics::SchedulerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      trials_(prometheus::BuildCounter()
                  .Name("dhpt_trials_total")
                  .Help("Trials that ended, by study, model, algorithm and final state.")
                  .Register(*registry_)),
      assignments_(prometheus::BuildCounter()
                       .Name("dhpt_trial_assignments_total")
                       .Help("Trial attempts assigned to workers, by model and device kind.")
                       .Register(*registry_)),
      trial_duration_(prometheus::BuildHistogram()
                          .Name("dhpt_trial_duration_seconds")
                          .Help("Time a trial's last attempt spent on a worker, by model and device kind.")
                          .Register(*registry_)),
      queue_wait_(prometheus::BuildHistogram()
                      .Name("dhpt_trial_queue_wait_seconds")
                      .Help("Time from a trial joining the queue to its assignment, by model and device kind.")
                      .Register(*registry_)),
      suggestion_duration_(prometheus::BuildHistogram()
                               .Name("dhpt_suggestion_duration_seconds")
                               .Help("Time an optimiser took for one suggestion, by algorithm.")
                               .Register(*registry_)),
      requeues_(prometheus::BuildCounter()
                    .Name("dhpt_trial_requeues_total")
                    .Help("Running trials sent back to the queue (worker lost or gave it back), by model.")
                    .Register(*registry_)),
      duplicates_(prometheus::BuildCounter()
                      .Name("dhpt_trial_duplicates_total")
                      .Help("Duplicates of a slow worker's trial started on a faster one at a "
                            "study's end (placement by learnt speed), by model.")
                      .Register(*registry_)),
      steps_saved_(prometheus::BuildCounter()
                       .Name("dhpt_pruned_steps_saved_total")
                       .Help("Training steps (rounds, trees, epochs) pruned trials did not run: "
                             "the study's longest completed trial's steps minus the step each "
                             "was stopped at, by study.")
                       .Register(*registry_)),
      early_stopping_duration_(prometheus::BuildHistogram()
                                   .Name("dhpt_early_stopping_decision_seconds")
                                   .Help("Time the scheduler took to judge one progress report "
                                         "against its study's early-stopping rule.")
                                   .Register(*registry_)),
      connections_(prometheus::BuildCounter()
                       .Name("dhpt_worker_connections_total")
                       .Help("Worker streams opened (first connections and reconnects), by device kind.")
                       .Register(*registry_)) {
  // Counters of rare events start at 0 for every known label value, so that rate() and
  // increase() show 0 rather than nothing.
  for (int kind = v1::Model::XGBOOST; kind <= v1::Model::EXTERNAL; ++kind) {
    requeues_.Add({{"model", Lower(v1::Model::Kind_Name(static_cast<v1::Model::Kind>(kind)))}});
  }
  for (const char* kind : {"cpu", "cuda"}) connections_.Add({{"kind", kind}});
  // Decisions from 1 µs to ~60 ms.
  early_stopping_decisions_ = &early_stopping_duration_.Add({}, Exponential(1e-6, 3, 11));
}

SchedulerMetrics::PerModelDevice& SchedulerMetrics::ForModelDevice(v1::Model::Kind model,
                                                                    absl::string_view device) {
  auto [it, added] = per_model_device_.try_emplace(ModelDevice(model, std::string(device)));
  if (added) {
    const prometheus::Labels labels = {{"model", Lower(v1::Model::Kind_Name(model))},
                                       {"device", std::string(device)}};
    it->second = {&assignments_.Add(labels), &trial_duration_.Add(labels, TrialBuckets()),
                  &queue_wait_.Add(labels, TrialBuckets())};
  }
  return it->second;
}

void SchedulerMetrics::TrialStarted(const v1::StudySpec& spec, absl::string_view device,
                                    absl::Duration queue_wait) {
  PerModelDevice& metrics = ForModelDevice(spec.model().kind(), device);
  metrics.assignments->Increment();
  metrics.queue_wait->Observe(absl::ToDoubleSeconds(queue_wait));
}

void SchedulerMetrics::TrialEnded(const v1::StudySpec& spec, v1::Trial::State state,
                                  absl::string_view device, absl::Duration run_time) {
  prometheus::Counter*& ended = ended_[{spec.name(), state}];
  if (ended == nullptr) {
    ended = &trials_.Add({{"study", spec.name()},
                          {"model", ModelLabel(spec)},
                          {"algorithm", AlgorithmLabel(spec.algorithm().name())},
                          {"state", Lower(v1::Trial::State_Name(state))}});
  }
  ended->Increment();
  if (!device.empty() && device != "unknown") {
    ForModelDevice(spec.model().kind(), device).duration->Observe(absl::ToDoubleSeconds(run_time));
  }
}

void SchedulerMetrics::EarlyStoppingDecided(const v1::StudySpec& spec, absl::Duration took,
                                            bool stopped, int64_t steps_saved) {
  early_stopping_decisions_->Observe(absl::ToDoubleSeconds(took));
  if (!stopped) return;
  prometheus::Counter*& counter = steps_saved_counters_[spec.name()];
  if (counter == nullptr) counter = &steps_saved_.Add({{"study", spec.name()}});
  counter->Increment(static_cast<double>(steps_saved));
}

void SchedulerMetrics::TrialRequeued(const v1::StudySpec& spec) {
  prometheus::Counter*& counter = requeue_counters_[spec.model().kind()];
  if (counter == nullptr) counter = &requeues_.Add({{"model", ModelLabel(spec)}});
  counter->Increment();
}

void SchedulerMetrics::TrialDuplicated(const v1::StudySpec& spec) {
  prometheus::Counter*& counter = duplicate_counters_[spec.model().kind()];
  if (counter == nullptr) counter = &duplicates_.Add({{"model", ModelLabel(spec)}});
  counter->Increment();
}

void SchedulerMetrics::SuggestionMade(v1::Algorithm::Name algorithm, absl::Duration took) {
  Histogram*& histogram = suggestions_[algorithm];
  if (histogram == nullptr) {
    histogram = &suggestion_duration_.Add({{"algorithm", AlgorithmLabel(algorithm)}}, SuggestionBuckets());
  }
  histogram->Observe(absl::ToDoubleSeconds(took));
}

void SchedulerMetrics::WorkerConnected(const v1::WorkerCapabilities& worker) {
  connections_.Add({{"kind", Lower(v1::WorkerCapabilities::DeviceKind_Name(worker.device_kind()))}}).Increment();
}

std::vector<prometheus::MetricFamily> SchedulerStateCollector::Collect() const {
  auto studies_by_state = GaugeFamily("dhpt_studies", "Studies by state.");
  auto trials = GaugeFamily("dhpt_study_trials", "Trials of each study by state (pending counts those not yet created).");
  auto max_trials = GaugeFamily("dhpt_study_max_trials", "Each study's trial budget.");
  auto best = GaugeFamily("dhpt_study_best_objective", "Each study's best objective value so far.");
  auto front_size = GaugeFamily("dhpt_study_pareto_front_size", "Multi-objective studies: trials on the Pareto front (non-dominated, feasible).");
  auto hypervolume = GaugeFamily("dhpt_study_hypervolume", "Multi-objective studies: the hypervolume of the Pareto front from the study's reference point.");
  std::map<std::string, int> by_state;
  for (int s = v1::Study::PENDING; s <= v1::Study::FAILED; ++s) {
    by_state[Lower(v1::Study::State_Name(static_cast<v1::Study::State>(s)))] = 0;
  }
  std::vector<v1::Study> studies;
  for (std::string token;;) {
    absl::StatusOr<ListPage<v1::Study>> page = core_->ListStudies(kMaxStudyPageSize, token);
    if (!page.ok()) break;
    std::move(page->items.begin(), page->items.end(), std::back_inserter(studies));
    if ((token = std::move(page->next_page_token)).empty()) break;
  }
  for (const v1::Study& study : studies) {
    ++by_state[Lower(v1::Study::State_Name(study.state()))];
    const std::string& name = study.spec().name();
    for (const auto& [state, count] :
         {std::pair<const char*, int>{"pending", study.trials_pending()},
          {"running", study.trials_running()}, {"completed", study.trials_completed()},
          {"failed", study.trials_failed()}, {"cancelled", study.trials_cancelled()},
          {"pruned", study.trials_pruned()}}) {
      AddGauge(trials, {{"study", name}, {"state", state}}, count);
    }
    AddGauge(max_trials, {{"study", name}}, study.spec().max_trials());
    if (study.spec().objectives_size() >= 2) {
      AddGauge(front_size, {{"study", name}}, study.pareto_front_size());
      AddGauge(hypervolume, {{"study", name}}, study.hypervolume());
    } else if (study.best_trial().has_objective_value()) {
      AddGauge(best, {{"metric", study.spec().objective().metric()}, {"study", name}},
               study.best_trial().objective_value());
    }
  }
  for (const auto& [state, count] : by_state) AddGauge(studies_by_state, {{"state", state}}, count);

  auto importance = GaugeFamily(
      "dhpt_study_param_importance",
      "Each study's most important parameters for its (first) objective by PED-ANOVA, a share "
      "of 0 to 1 (at most 5 per study; recomputed when the study's completed trials change).");
  {
    absl::MutexLock lock(&mutex_);
    std::map<std::string, CachedImportance> kept;
    for (const v1::Study& study : studies) {
      const std::string& name = study.spec().name();
      CachedImportance cached = importances_.contains(name) ? importances_[name] : CachedImportance();
      if (cached.completed != study.trials_completed()) {
        cached.completed = study.trials_completed();
        cached.top.clear();
        v1::GetParamImportancesRequest request;
        request.set_study(name);
        // Too few trials, or none varied: no gauge until there is something to say.
        // An ended study evicted from memory is not read back: a scrape must not read the
        // whole history from the store (it keeps the gauge it had, if any).
        if (absl::StatusOr<v1::GetParamImportancesResponse> response =
                core_->GetParamImportances(request, /*read_back=*/false);
            response.ok()) {
          for (const v1::ParamImportance& p : response->importances()) {
            if (static_cast<int>(cached.top.size()) >= kMaxImportanceParamsPerStudy) break;
            cached.top.emplace_back(p.name(), p.importance());
          }
        }
      }
      for (const auto& [param, share] : cached.top) {
        AddGauge(importance, {{"study", name}, {"param", param}}, share);
      }
      kept[name] = std::move(cached);
    }
    importances_ = std::move(kept);  // Deleted studies' entries go.
  }

  auto workers = GaugeFamily("dhpt_workers_connected", "Connected workers by device kind.");
  auto slots = GaugeFamily("dhpt_worker_slots", "Trial slots of the connected workers by device kind and state.");
  // Each connected worker's last heartbeat utilisation (issue 31); one series per worker, as
  // many as are connected.
  auto worker_cpu = GaugeFamily("dhpt_worker_recent_cpu_cores", "The scheduler's view: CPU cores the worker's process and its trials' processes (running or ended) used over its last heartbeat interval.");
  auto worker_memory = GaugeFamily("dhpt_worker_recent_memory_bytes", "The scheduler's view: resident memory of the worker process at its last heartbeat.");
  auto worker_gpu = GaugeFamily("dhpt_worker_recent_gpu_utilization_ratio", "The scheduler's view: busy share (0-1) of the worker's GPU at its last heartbeat, for workers that observe one.");
  std::map<std::string, std::array<int, 3>> by_kind = {{"cpu", {}}, {"cuda", {}}};  // workers, busy, free
  for (const v1::Worker& worker : core_->ListWorkers()) {
    auto& counts = by_kind[Lower(v1::WorkerCapabilities::DeviceKind_Name(worker.capabilities().device_kind()))];
    const int running = worker.running_trials_size();
    ++counts[0];
    counts[1] += running;
    counts[2] += std::max(0, worker.capabilities().slots() - running);
    if (worker.has_utilisation()) {
      const std::vector<prometheus::ClientMetric::Label> labels = {
          {"worker", worker.worker_id()}, {"node", worker.capabilities().node_name()}};
      AddGauge(worker_cpu, labels, worker.utilisation().cpu_cores());
      AddGauge(worker_memory, labels, static_cast<double>(worker.utilisation().memory_bytes()));
      if (worker.utilisation().has_gpu_percent()) {
        AddGauge(worker_gpu, labels, worker.utilisation().gpu_percent() / 100);
      }
    }
  }
  for (const auto& [kind, counts] : by_kind) {
    AddGauge(workers, {{"kind", kind}}, counts[0]);
    AddGauge(slots, {{"kind", kind}, {"state", "busy"}}, counts[1]);
    AddGauge(slots, {{"kind", kind}, {"state", "free"}}, counts[2]);
  }
  // Learnt speeds (speed_model.h): node classes are board labels, else worker ids, at most
  // kMaxSpeedClasses of them.
  auto speed = GaugeFamily(
      "dhpt_node_speed_relative",
      "Each node class's learnt speed per model kind, relative to the cluster's median class "
      "(2: twice as fast), from its last completed trials; absent until it completed one.");
  auto seconds_per_unit = GaugeFamily(
      "dhpt_node_seconds_per_work_unit",
      "Each node class's learnt seconds per work unit (rounds, trees or epochs times training "
      "rows; one per COMMAND or function trial) per model kind.");
  for (const SpeedModel::Estimate& estimate : core_->SpeedEstimates()) {
    const std::string model = Lower(v1::Model::Kind_Name(estimate.kind));
    AddGauge(speed, {{"model", model}, {"node_class", estimate.node_class}}, estimate.relative_speed);
    AddGauge(seconds_per_unit, {{"model", model}, {"node_class", estimate.node_class}},
             estimate.seconds_per_unit);
  }
  auto store_bytes = GaugeFamily("dhpt_store_bytes", "Bytes of the scheduler's database on disk (file and write-ahead log).");
  AddGauge(store_bytes, {}, static_cast<double>(core_->store_bytes()));
  auto store_writable = GaugeFamily("dhpt_store_writable", "1 while the database accepts writes; 0 while they fail (disk full, read-only): nothing new is acknowledged.");
  AddGauge(store_writable, {}, core_->store_health().ok() ? 1 : 0);
  return {studies_by_state, trials, max_trials, best, front_size, hypervolume, importance,
          workers, slots, speed, seconds_per_unit, worker_cpu, worker_memory, worker_gpu,
          store_bytes, store_writable};
}

}  // namespace dhpt::scheduler
