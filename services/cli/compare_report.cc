#include "services/cli/compare_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/text_table.h"
#include "services/common/model_catalog.h"
#include "services/optimizer/pareto.h"

namespace dhpt::cli {
namespace {

constexpr double kMiB = 1 << 20;

std::optional<double> MetricOf(const v1::Trial& trial, absl::string_view name) {
  auto it = trial.metrics().find(std::string(name));
  if (it == trial.metrics().end()) return std::nullopt;
  return it->second;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + middle, values.end());
  if (values.size() % 2 == 1) return values[middle];
  const double upper = values[middle];
  return (upper + *std::max_element(values.begin(), values.begin() + middle)) / 2;
}

// The value after "KEY:" (or "KEY=") on the first line of `path` that starts with KEY.
std::string FileField(const std::string& path, absl::string_view key, char separator) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (!absl::StartsWith(line, key)) continue;
    const size_t at = line.find(separator);
    if (at == std::string::npos) continue;
    std::string value(absl::StripAsciiWhitespace(line.substr(at + 1)));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return "";
}

bool TrialRan(const v1::Trial& trial) {
  return trial.state() == v1::Trial::COMPLETED || trial.state() == v1::Trial::FAILED ||
         trial.state() == v1::Trial::CANCELLED;
}

std::string PointKey(const v1::Trial& trial) {
  std::map<std::string, std::string> sorted;
  for (const auto& [name, value] : trial.params()) sorted[name] = value.SerializeAsString();
  std::string key;
  for (const auto& [name, value] : sorted) absl::StrAppend(&key, name, "=", value, ";");
  return key;
}

std::string Seconds(double s) { return absl::StrFormat("%.2f", s); }
std::string MiB(double bytes) { return absl::StrFormat("%.0f", bytes / kMiB); }
std::string Objective(const std::optional<double>& v) {
  return v ? absl::StrFormat("%.5g", *v) : "-";
}
std::optional<double> Optional(bool has, double value) {
  return has ? std::optional<double>(value) : std::nullopt;
}
std::string Ratio(double framework, double sequential) {
  return sequential > 0 ? absl::StrFormat("%.2fx", framework / sequential) : "";
}

std::string Where(const v1::RunReport& run) {
  return absl::StrCat(run.where(), ": ", run.workers(), " x ", run.slots_per_worker(),
                      " trial slots x ", run.threads_per_trial(), " threads");
}

std::string AlgorithmName(const v1::StudySpec& spec) {
  return v1::Algorithm::Name_Name(spec.algorithm().name());
}

// A row per node: the listing fields of the rows the run came with (its workers at the start,
// so that a node that ran nothing still shows, all idle), the rest from the trials that ran
// there. Recomputed from scratch on every call.
void SummarizeNodes(v1::RunReport& run) {
  std::map<std::string, v1::NodeUsage> nodes;
  for (const v1::NodeUsage& listed : run.nodes()) {
    v1::NodeUsage& row = nodes[listed.node()];
    row.set_node(listed.node());
    row.set_board(listed.board());
    row.set_slots(listed.slots());
    row.set_memory_bytes(listed.memory_bytes());
  }
  std::map<std::string, std::set<std::string>> devices;
  for (const v1::Trial& trial : run.trials()) {
    if (!TrialRan(trial) && trial.state() != v1::Trial::PRUNED) continue;
    const std::string& name = trial.node_name().empty() ? trial.worker_id() : trial.node_name();
    if (name.empty()) continue;  // Never given to a worker.
    v1::NodeUsage& row = nodes[name];
    row.set_node(name);
    row.set_trials(row.trials() + 1);
    std::optional<double> wall = MetricOf(trial, kMetricWallSeconds);
    if (!wall && trial.has_start_time() && trial.has_end_time()) {
      // A trial that failed before measuring itself: the scheduler's times.
      wall = google::protobuf::util::TimeUtil::DurationToNanoseconds(trial.end_time() -
                                                                     trial.start_time()) / 1e9;
    }
    row.set_busy_seconds(row.busy_seconds() + wall.value_or(0));
    row.set_cpu_seconds(row.cpu_seconds() + MetricOf(trial, kMetricCpuSeconds).value_or(0));
    row.set_peak_rss_bytes(
        std::max(row.peak_rss_bytes(), MetricOf(trial, kMetricPeakRssBytes).value_or(0)));
    if (!trial.device().empty()) devices[name].insert(trial.device());
  }
  run.clear_nodes();
  for (auto& [name, row] : nodes) {
    row.set_devices(absl::StrJoin(devices[name], ","));
    row.set_idle_seconds(std::max(0.0, run.wall_seconds() * row.slots() - row.busy_seconds()));
    if (run.wall_seconds() > 0) row.set_cpu_utilization(row.cpu_seconds() / run.wall_seconds());
    *run.add_nodes() = std::move(row);
  }
}

}  // namespace

v1::MachineInfo DescribeMachine() {
  v1::MachineInfo machine;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  machine.set_hostname(host);
  std::string cpu = FileField("/proc/cpuinfo", "model name", ':');
  if (cpu.empty()) cpu = FileField("/proc/cpuinfo", "Model", ':');  // Raspberry Pi, Jetson.
  machine.set_cpu_model(cpu);
  machine.set_cores(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  double kib = 0;
  const std::string mem = FileField("/proc/meminfo", "MemTotal", ':');
  if (absl::SimpleAtod(absl::StripSuffix(mem, " kB"), &kib)) machine.set_memory_bytes(kib * 1024);
  machine.set_os(FileField("/etc/os-release", "PRETTY_NAME", '='));
  utsname names{};
  uname(&names);
  machine.set_kernel(names.release);
  machine.set_arch(names.machine);
  return machine;
}

void Summarize(const v1::StudySpec& spec, v1::RunReport& run) {
  v1::RunSummary& summary = *run.mutable_summary();
  summary.Clear();
  const bool maximize = spec.objective().goal() == v1::Objective::MAXIMIZE;
  std::vector<double> objectives;
  std::vector<double> trial_seconds;
  std::map<std::string, double> worker_peaks;
  double gpu_weighted = 0, gpu_weight = 0;
  for (const v1::Trial& trial : run.trials()) {
    if (trial.state() == v1::Trial::COMPLETED) {
      summary.set_trials_completed(summary.trials_completed() + 1);
      objectives.push_back(trial.objective_value());
    } else if (trial.state() == v1::Trial::FAILED) {
      summary.set_trials_failed(summary.trials_failed() + 1);
    } else if (trial.state() == v1::Trial::PRUNED) {
      summary.set_trials_pruned(summary.trials_pruned() + 1);
    }
    const std::optional<double> wall = MetricOf(trial, kMetricWallSeconds);
    if (wall) trial_seconds.push_back(*wall);
    summary.set_trial_cpu_seconds_sum(summary.trial_cpu_seconds_sum() +
                                      MetricOf(trial, kMetricCpuSeconds).value_or(0));
    if (std::optional<double> rss = MetricOf(trial, kMetricPeakRssBytes)) {
      double& peak = worker_peaks[trial.worker_id()];
      peak = std::max(peak, *rss);
    }
    if (std::optional<double> gpu = MetricOf(trial, kMetricGpuUtilizationAvg)) {
      gpu_weighted += *gpu * wall.value_or(1);
      gpu_weight += wall.value_or(1);
    }
    if (std::optional<double> peak = MetricOf(trial, kMetricGpuUtilizationPeak)) {
      summary.set_gpu_utilization_peak(std::max(summary.gpu_utilization_peak(), *peak));
    }
    if (std::optional<double> memory = MetricOf(trial, kMetricGpuMemoryUsedPeak)) {
      summary.set_gpu_memory_peak_bytes(std::max(summary.gpu_memory_peak_bytes(), *memory));
    }
  }
  if (!objectives.empty()) {
    summary.set_best_objective(maximize ? *std::max_element(objectives.begin(), objectives.end())
                                        : *std::min_element(objectives.begin(), objectives.end()));
    summary.set_median_objective(Median(objectives));
  }
  if (gpu_weight > 0) summary.set_gpu_utilization_avg(gpu_weighted / gpu_weight);
  for (double s : trial_seconds) summary.set_trial_seconds_sum(summary.trial_seconds_sum() + s);
  summary.set_trial_seconds_median(Median(trial_seconds));

  summary.set_processes_measured(run.processes_size() > 0);
  if (summary.processes_measured()) {
    for (const v1::ProcessUsage& process : run.processes()) {
      summary.set_cpu_seconds(summary.cpu_seconds() + process.cpu_seconds());
      summary.set_peak_rss_bytes_max(std::max(summary.peak_rss_bytes_max(), process.peak_rss_bytes()));
      summary.set_peak_rss_bytes_sum(summary.peak_rss_bytes_sum() + process.peak_rss_bytes());
    }
  } else {
    // A remote cluster: only what the workers measured of their trials is known.
    summary.set_cpu_seconds(summary.trial_cpu_seconds_sum());
    for (const auto& [worker, peak] : worker_peaks) {
      summary.set_peak_rss_bytes_max(std::max(summary.peak_rss_bytes_max(), peak));
      summary.set_peak_rss_bytes_sum(summary.peak_rss_bytes_sum() + peak);
    }
  }
  if (run.wall_seconds() > 0) summary.set_cpu_utilization(summary.cpu_seconds() / run.wall_seconds());
  const int slots = std::max(1, run.workers() * run.slots_per_worker());
  summary.set_overhead_seconds(run.wall_seconds() * slots - summary.trial_seconds_sum());
  SummarizeNodes(run);
}

bool SamePoints(const v1::RunReport& a, const v1::RunReport& b) {
  auto keys = [](const v1::RunReport& run) {
    std::vector<std::string> out;
    for (const v1::Trial& trial : run.trials()) {
      if (TrialRan(trial)) out.push_back(PointKey(trial));
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  return keys(a) == keys(b);
}

void SummarizeFronts(v1::CompareReport& report) {
  const v1::StudySpec& spec = report.spec();
  const int m = spec.objectives_size();
  if (m < 2) return;
  std::vector<bool> minimize;
  for (const v1::Objective& objective : spec.objectives()) {
    minimize.push_back(objective.goal() != v1::Objective::MAXIMIZE);
  }
  // Losses of each run's feasible completed trials.
  std::array<std::vector<std::vector<double>>, 2> losses;
  std::vector<double> reference(m, -std::numeric_limits<double>::infinity());
  for (int run = 0; run < 2; ++run) {
    const v1::RunReport& report_run = run == 0 ? report.sequential() : report.framework();
    for (const v1::Trial& trial : report_run.trials()) {
      if (trial.state() != v1::Trial::COMPLETED || trial.infeasible() ||
          trial.objective_values_size() != m) {
        continue;
      }
      losses[run].push_back(optimizer::ToLosses(
          std::vector<double>(trial.objective_values().begin(), trial.objective_values().end()),
          minimize));
      for (int i = 0; i < m; ++i) reference[i] = std::max(reference[i], losses[run].back()[i]);
    }
  }
  for (int i = 0; i < m; ++i) {
    const v1::Objective& objective = spec.objectives(i);
    if (objective.has_reference()) {
      reference[i] = minimize[i] ? objective.reference() : -objective.reference();
    }
  }
  // Neither run completed a feasible trial and no reference was given: nothing to measure.
  if (!std::all_of(reference.begin(), reference.end(), [](double r) { return std::isfinite(r); })) {
    return;
  }
  for (int i = 0; i < m; ++i) report.add_pareto_reference_point(minimize[i] ? reference[i] : -reference[i]);
  for (int run = 0; run < 2; ++run) {
    v1::RunSummary& summary =
        *(run == 0 ? report.mutable_sequential() : report.mutable_framework())->mutable_summary();
    std::vector<std::vector<double>> front;
    std::vector<bool> all_minimised(m, true);
    for (int index : optimizer::ParetoFrontIndices(losses[run], all_minimised)) {
      front.push_back(losses[run][index]);
    }
    summary.set_pareto_front_size(static_cast<int32_t>(front.size()));
    if (!front.empty()) summary.set_hypervolume(optimizer::Hypervolume(front, reference));
  }
}

void Conclude(v1::CompareReport& report, int cores) {
  const v1::StudySpec& spec = report.spec();
  Summarize(spec, *report.mutable_sequential());
  Summarize(spec, *report.mutable_framework());
  SummarizeFronts(report);
  const v1::RunReport& sequential = report.sequential();
  const v1::RunReport& framework = report.framework();
  report.set_speedup(framework.wall_seconds() > 0
                         ? sequential.wall_seconds() / framework.wall_seconds()
                         : 0);
  report.set_same_points(SamePoints(sequential, framework));

  auto warn = [&](std::string text) { report.add_warnings(std::move(text)); };
  const int slots = framework.workers() * framework.slots_per_worker();
  if (cores > 0 && slots > cores) {
    warn(absl::StrCat("the framework ran ", slots, " trial slots on ", cores,
                      " cores: trials competed for CPU, so its speedup is bounded by the cores, "
                      "not by the workers"));
  }
  if (cores > 0 && slots * framework.threads_per_trial() > cores) {
    warn(absl::StrCat(slots, " slots x ", framework.threads_per_trial(), " threads = ",
                      slots * framework.threads_per_trial(), " threads on ", cores,
                      " cores: the framework's trials were oversubscribed"));
  }
  for (const v1::RunReport* run : {&sequential, &framework}) {
    const std::string mode = run == &sequential ? "sequential" : "framework";
    if (run->state() != v1::Study::COMPLETED) {
      warn(absl::StrCat("the ", mode, " run ended ", v1::Study::State_Name(run->state()),
                        run->state_reason().empty() ? "" : ": " + run->state_reason()));
    }
    if (run->summary().trials_failed() > 0) {
      warn(absl::StrCat(run->summary().trials_failed(), " trials of the ", mode,
                        " run failed (see report.json for their errors)"));
    }
  }
  if (sequential.summary().trials_completed() != framework.summary().trials_completed()) {
    warn(absl::StrCat("the runs completed different numbers of trials (",
                      sequential.summary().trials_completed(), " sequential, ",
                      framework.summary().trials_completed(), " framework)"));
  }
  const v1::Algorithm::Name algorithm = spec.algorithm().name();
  if (!report.same_points() &&
      (algorithm == v1::Algorithm::RANDOM || algorithm == v1::Algorithm::GRID)) {
    warn(absl::StrCat("the runs tried different parameter points although ",
                      AlgorithmName(spec), " does not depend on results: check for failed or "
                      "missing trials"));
  }
}

std::string RunsLines(const v1::CompareReport& report) {
  return absl::StrCat("sequential: ", Where(report.sequential()), "\nframework:  ",
                      Where(report.framework()), "\n");
}

std::string ComparisonTable(const v1::CompareReport& report, bool markdown) {
  const v1::RunReport& seq = report.sequential();
  const v1::RunReport& fw = report.framework();
  const v1::RunSummary& s = seq.summary();
  const v1::RunSummary& f = fw.summary();
  const std::string metric = report.spec().objective().metric();
  const int cores = std::max(1, report.machine().cores());
  TextTable table({"", "sequential", "framework", "framework/sequential"});
  table.Add({"wall time (s)", Seconds(seq.wall_seconds()), Seconds(fw.wall_seconds()),
             Ratio(fw.wall_seconds(), seq.wall_seconds())});
  table.Add({"speedup", "1.00x", absl::StrFormat("%.2fx", report.speedup()), ""});
  table.Add({"CPU time (s)", Seconds(s.cpu_seconds()), Seconds(f.cpu_seconds()),
             Ratio(f.cpu_seconds(), s.cpu_seconds())});
  const auto per_trial = [](const v1::RunSummary& r) {
    const int n = r.trials_completed() + r.trials_pruned() + r.trials_failed();
    return n > 0 ? r.trial_cpu_seconds_sum() / n : 0.0;
  };
  table.Add({"CPU time per trial (s)", Seconds(per_trial(s)), Seconds(per_trial(f)),
             Ratio(per_trial(f), per_trial(s))});
  table.Add({"CPU utilisation (cores busy)",
             absl::StrFormat("%.2f (%.0f%%)", s.cpu_utilization(), 100 * s.cpu_utilization() / cores),
             absl::StrFormat("%.2f (%.0f%%)", f.cpu_utilization(), 100 * f.cpu_utilization() / cores),
             Ratio(f.cpu_utilization(), s.cpu_utilization())});
  table.Add({"peak memory, largest process (MiB)", MiB(s.peak_rss_bytes_max()),
             MiB(f.peak_rss_bytes_max()), Ratio(f.peak_rss_bytes_max(), s.peak_rss_bytes_max())});
  table.Add({"peak memory, all processes (MiB)", MiB(s.peak_rss_bytes_sum()),
             MiB(f.peak_rss_bytes_sum()), Ratio(f.peak_rss_bytes_sum(), s.peak_rss_bytes_sum())});
  if (s.has_gpu_utilization_avg() || f.has_gpu_utilization_avg()) {
    auto gpu = [](const v1::RunSummary& r) {
      return r.has_gpu_utilization_avg()
                 ? absl::StrFormat("%.0f%% avg, %.0f%% peak", r.gpu_utilization_avg(),
                                   r.gpu_utilization_peak())
                 : std::string("-");
    };
    table.Add({"GPU utilisation", gpu(s), gpu(f), ""});
    table.Add({"GPU memory peak (MiB)", MiB(s.gpu_memory_peak_bytes()),
               MiB(f.gpu_memory_peak_bytes()), ""});
  }
  if (report.spec().objectives_size() >= 2) {
    table.Add({"Pareto front (trials)", absl::StrCat(s.pareto_front_size()),
               absl::StrCat(f.pareto_front_size()), ""});
    table.Add({"hypervolume (same reference)",
               Objective(Optional(s.has_hypervolume(), s.hypervolume())),
               Objective(Optional(f.has_hypervolume(), f.hypervolume())),
               s.has_hypervolume() && f.has_hypervolume() ? Ratio(f.hypervolume(), s.hypervolume())
                                                           : ""});
  } else {
    table.Add({absl::StrCat("best ", metric),
               Objective(Optional(s.has_best_objective(), s.best_objective())),
               Objective(Optional(f.has_best_objective(), f.best_objective())), ""});
    table.Add({absl::StrCat("median ", metric),
               Objective(Optional(s.has_median_objective(), s.median_objective())),
               Objective(Optional(f.has_median_objective(), f.median_objective())), ""});
  }
  table.Add({"trials completed / pruned / failed",
             absl::StrCat(s.trials_completed(), " / ", s.trials_pruned(), " / ", s.trials_failed()),
             absl::StrCat(f.trials_completed(), " / ", f.trials_pruned(), " / ", f.trials_failed()),
             ""});
  if (s.trials_pruned() > 0 || f.trials_pruned() > 0) {
    // Many pruned trials level with the best when stopped: the rule may cost the best model.
    table.Add({"pruned within reach of the best", absl::StrCat(seq.trials_pruned_within_reach()),
               absl::StrCat(fw.trials_pruned_within_reach()), ""});
  }
  table.Add({"trial time, sum (s)", Seconds(s.trial_seconds_sum()), Seconds(f.trial_seconds_sum()),
             Ratio(f.trial_seconds_sum(), s.trial_seconds_sum())});
  table.Add({"trial time, median (s)", absl::StrFormat("%.3f", s.trial_seconds_median()),
             absl::StrFormat("%.3f", f.trial_seconds_median()),
             Ratio(f.trial_seconds_median(), s.trial_seconds_median())});
  auto overhead = [](const v1::RunReport& run) {
    const double slot_seconds =
        run.wall_seconds() * std::max(1, run.workers() * run.slots_per_worker());
    return absl::StrFormat("%.2f (%.0f%%)", run.summary().overhead_seconds(),
                           slot_seconds > 0 ? 100 * run.summary().overhead_seconds() / slot_seconds : 0);
  };
  table.Add({"overhead: slot time not training (s)", overhead(seq), overhead(fw), ""});
  return markdown ? table.RenderMarkdown() : table.Render();
}

std::string CompareMarkdown(const v1::CompareReport& report,
                            const std::vector<std::string>& plot_files) {
  using google::protobuf::util::TimeUtil;
  const v1::StudySpec& spec = report.spec();
  const v1::MachineInfo& machine = report.machine();
  std::string md = absl::StrCat("# dhpt compare: ", spec.name(), "\n\n");
  absl::StrAppendFormat(
      &md, "%s, dhpt %s, on %s: %s, %d cores, %.1f GiB, %s (%s, Linux %s).\n\n",
      TimeUtil::ToString(report.create_time()), report.dhpt_version(), machine.hostname(),
      machine.cpu_model().empty() ? "unknown CPU" : machine.cpu_model(), machine.cores(),
      machine.memory_bytes() / (1 << 30), machine.os(), machine.arch(), machine.kernel());
  absl::StrAppendFormat(&md,
                        "Study: %s tuned by %s, seed %d, %d trials, objective %s (%s)%s.\n\n",
                        v1::Model::Kind_Name(spec.model().kind()), AlgorithmName(spec),
                        spec.algorithm().seed(), spec.max_trials(), spec.objective().metric(),
                        v1::Objective::Goal_Name(spec.objective().goal()),
                        spec.has_dataset() ? ", dataset " + spec.dataset().ShortDebugString() : "");
  absl::StrAppend(&md, "## Results\n\n- ", Where(report.sequential()), " (sequential)\n- ",
                  Where(report.framework()), " (framework)\n\n",
                  ComparisonTable(report, /*markdown=*/true), "\n");
  absl::StrAppend(&md, report.same_points()
                           ? "Both runs tried the same set of parameter points.\n\n"
                           : "The runs tried different parameter points: a model-based algorithm "
                             "sees results in another order when trials run in parallel, so its "
                             "suggestions differ; compare the best values, not the points.\n\n");

  absl::StrAppend(&md, "## Processes\n\n");
  if (report.framework().processes_size() == 0) {
    absl::StrAppend(&md, "The framework ran on a remote cluster: its processes were out of reach, "
                         "so its CPU time and memory are the sums of what the workers measured "
                         "of their trials.\n\n");
  }
  TextTable processes({"run", "process", "CPU s", "peak MiB", "wall s"});
  for (const v1::RunReport* run : {&report.sequential(), &report.framework()}) {
    for (const v1::ProcessUsage& p : run->processes()) {
      processes.Add({run == &report.sequential() ? "sequential" : "framework", p.name(),
                     Seconds(p.cpu_seconds()), MiB(p.peak_rss_bytes()), Seconds(p.wall_seconds())});
    }
  }
  absl::StrAppend(&md, processes.RenderMarkdown(), "\n");

  if (report.framework().nodes_size() > 0) {
    // Which nodes worked and which waited: on unlike boards the fast ones run out of trials.
    absl::StrAppend(&md, "## Framework nodes\n\n",
                    "From the trials' own measurements: busy is their wall time, idle the "
                    "run's wall time times the node's slots less busy.\n\n");
    TextTable nodes({"node", "board", "devices", "slots", "memory MiB", "trials", "busy s",
                     "idle s", "busy %", "trial CPU s", "cores busy", "peak MiB"});
    const double wall = report.framework().wall_seconds();
    for (const v1::NodeUsage& n : report.framework().nodes()) {
      const double capacity = wall * n.slots();
      nodes.Add({n.node(), n.board(), n.devices(), absl::StrCat(n.slots()),
                 n.memory_bytes() > 0 ? MiB(n.memory_bytes()) : "",
                 absl::StrCat(n.trials()), Seconds(n.busy_seconds()), Seconds(n.idle_seconds()),
                 absl::StrFormat("%.0f", capacity > 0 ? 100 * n.busy_seconds() / capacity : 0),
                 Seconds(n.cpu_seconds()), absl::StrFormat("%.2f", n.cpu_utilization()),
                 MiB(n.peak_rss_bytes())});
    }
    absl::StrAppend(&md, nodes.RenderMarkdown(), "\n");
  }

  absl::StrAppend(&md, "## How the runs were made\n\n",
                  "- The same study, seed and trial budget in both runs; the sequential run is "
                  "one worker process running the study's optimiser itself, trial after trial, "
                  "with the same trainer code and no scheduler.\n",
                  absl::StrFormat("- %d threads per trial in both runs.\n",
                                  report.framework().threads_per_trial()),
                  "- Datasets are generated or read once per process in both runs (the first "
                  "trial of each process pays it; its trials report `dataset_seconds`).\n",
                  "- Wall time runs from the study's start to its end in both runs: the "
                  "sequential process's first line (after its start-up) and the framework's "
                  "submission (with the workers already connected). Start-up is counted in "
                  "neither: on a cluster the services are long-lived.\n",
                  "- CPU time is every thread of every process of the run over the same "
                  "interval (/proc and wait4); peak memory is each process's largest resident "
                  "size (the kernel's high-water mark and a 10 Hz sample).\n",
                  absl::StrFormat("- This machine has %d cores.\n\n", machine.cores()));
  if (report.warnings_size() > 0) {
    absl::StrAppend(&md, "## Warnings\n\n");
    for (const std::string& w : report.warnings()) absl::StrAppend(&md, "- ", w, "\n");
    absl::StrAppend(&md, "\n");
  }
  if (!plot_files.empty()) {
    absl::StrAppend(&md, "## Plots\n\n");
    for (const std::string& file : plot_files) {
      if (absl::EndsWith(file, ".svg")) absl::StrAppend(&md, "![", file, "](", file, ")\n\n");
    }
  }
  return md;
}

v1::MatrixCell MatrixCellOf(const std::string& name, const v1::CompareReport& report) {
  v1::MatrixCell cell;
  cell.set_name(name);
  cell.set_model(report.spec().model().kind());
  cell.set_algorithm(report.spec().algorithm().name());
  cell.set_objective_metric(report.spec().objective().metric());
  cell.set_sequential_wall_seconds(report.sequential().wall_seconds());
  cell.set_framework_wall_seconds(report.framework().wall_seconds());
  cell.set_speedup(report.speedup());
  *cell.mutable_sequential() = report.sequential().summary();
  *cell.mutable_framework() = report.framework().summary();
  *cell.mutable_warnings() = report.warnings();
  return cell;
}

std::string MatrixTable(const v1::MatrixReport& matrix, bool markdown) {
  TextTable table({"cell", "seq wall s", "fw wall s", "speedup", "seq cores busy",
                   "fw cores busy", "seq MiB", "fw MiB", "seq best", "fw best",
                   "seq done/pruned/failed", "fw done/pruned/failed"});
  for (const v1::MatrixCell& cell : matrix.cells()) {
    const v1::RunSummary& s = cell.sequential();
    const v1::RunSummary& f = cell.framework();
    table.Add({cell.name(), Seconds(cell.sequential_wall_seconds()),
               Seconds(cell.framework_wall_seconds()), absl::StrFormat("%.2fx", cell.speedup()),
               absl::StrFormat("%.2f", s.cpu_utilization()),
               absl::StrFormat("%.2f", f.cpu_utilization()), MiB(s.peak_rss_bytes_sum()),
               MiB(f.peak_rss_bytes_sum()),
               Objective(Optional(s.has_best_objective(), s.best_objective())),
               Objective(Optional(f.has_best_objective(), f.best_objective())),
               absl::StrCat(s.trials_completed(), "/", s.trials_pruned(), "/", s.trials_failed()),
               absl::StrCat(f.trials_completed(), "/", f.trials_pruned(), "/", f.trials_failed())});
  }
  return markdown ? table.RenderMarkdown() : table.Render();
}

std::string MatrixMarkdown(const v1::MatrixReport& matrix) {
  using google::protobuf::util::TimeUtil;
  const v1::MachineInfo& machine = matrix.machine();
  std::string md = "# dhpt compare --matrix\n\n";
  absl::StrAppendFormat(&md, "%s, dhpt %s, on %s: %s, %d cores, %.1f GiB.\n\n",
                        TimeUtil::ToString(matrix.create_time()), matrix.dhpt_version(),
                        machine.hostname(), machine.cpu_model(), machine.cores(),
                        machine.memory_bytes() / (1 << 30));
  absl::StrAppend(&md, "MiB: peak memory of all the run's processes together. Best: the "
                       "objective of each cell's study (its metric is in the cell's report). "
                       "Each cell's report, with plots, is in cells/NAME/report.md.\n\n",
                  MatrixTable(matrix, /*markdown=*/true), "\n");
  bool any_warning = false;
  for (const v1::MatrixCell& cell : matrix.cells()) {
    for (const std::string& w : cell.warnings()) {
      if (!any_warning) absl::StrAppend(&md, "## Warnings\n\n");
      any_warning = true;
      absl::StrAppend(&md, "- ", cell.name(), ": ", w, "\n");
    }
  }
  return md;
}

}  // namespace dhpt::cli
