#include "services/cli/compare_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/child_process.h"
#include "services/cli/compare_plots.h"
#include "services/cli/compare_report.h"
#include "services/cli/demo_studies.h"
#include "services/cli/local_cluster.h"
#include "services/cli/study_client.h"
#include "services/cli/study_file.h"
#include "services/common/status_macros.h"
#include "services/study/spec_validation.h"
#include "services/study/trial_outcome.h"

namespace dhpt::cli {
namespace {

using google::protobuf::util::TimeUtil;

google::protobuf::Timestamp Now() {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

std::string StudyProgress(const std::string& mode, const v1::Study& study, int running) {
  std::string line = absl::StrFormat("%-10s %d/%d trials", mode,
                                     study.trials_completed() + study.trials_pruned() +
                                         study.trials_failed(),
                                     study.spec().max_trials());
  if (study.trials_pruned() > 0) absl::StrAppend(&line, " (", study.trials_pruned(), " pruned)");
  if (study.trials_failed() > 0) absl::StrAppend(&line, " (", study.trials_failed(), " failed)");
  if (running > 0) absl::StrAppend(&line, ", ", running, " running");
  if (study.has_best_trial() && study.best_trial().has_objective_value()) {
    absl::StrAppendFormat(&line, ", best %s %.5g", study.spec().objective().metric(),
                          study.best_trial().objective_value());
  }
  return line;
}

// What `binary --version` prints (its first line), or empty.
std::string VersionOf(const std::string& binary) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("version", {binary, "--version"}, fds[1], fds[1]);
  close(fds[1]);
  std::string out;
  char buffer[256];
  ssize_t n;
  while (child.ok() && (n = read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, n);
  close(fds[0]);
  if (child.ok()) (*child)->Wait();
  return std::string(absl::StripAsciiWhitespace(out.substr(0, out.find('\n'))));
}

// The worker binary that runs the study sequentially: the one with its trainer.
std::string SequentialBinary(const v1::StudySpec& spec) {
  return spec.model().kind() == v1::Model::AUTOENCODER ? "dhpt-gpu-worker" : "dhpt-cpu-worker";
}

std::string CellName(const v1::StudySpec& spec, v1::Algorithm::Name algorithm) {
  std::string name = absl::StrCat(spec.name(), "-", v1::Algorithm::Name_Name(algorithm));
  absl::AsciiStrToLower(&name);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

absl::StatusOr<v1::CompareMatrix> ReadMatrixFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, kMaxStudyFileBytes));
  v1::CompareMatrix matrix;
  if (absl::Status parsed = ParseYamlMessage(text, "compare matrix", matrix); !parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", parsed.message()));
  }
  if (matrix.studies_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": studies is empty; list at least one, e.g. studies: [{demo: xgboost}]"));
  }
  for (int i = 0; i < matrix.studies_size(); ++i) {
    if (matrix.studies(i).source_case() == v1::CompareMatrix::Study::SOURCE_NOT_SET) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": studies[", i, "] needs one of demo, file or spec"));
    }
  }
  if (matrix.max_trials() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": max_trials must be positive"));
  }
  return matrix;
}

Comparison::Comparison(CompareOptions options) : options_(std::move(options)) {}
Comparison::~Comparison() = default;

void Comparison::Cancel() {
  cancelled_ = true;
  absl::MutexLock lock(&mutex_);
  if (sequential_ != nullptr) sequential_->Signal(SIGTERM);
  if (client_ != nullptr) client_->Cancel();
}

void Comparison::Progress(const std::string& line, bool final) const {
  if (options_.progress) options_.progress(line, final);
}

absl::StatusOr<v1::CompareReport> Comparison::Run(const v1::StudySpec& request,
                                                  const std::string& dir) {
  ASSIGN_OR_RETURN(v1::StudySpec spec, study::NormalizeStudySpec(request));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("cannot create ", dir, ": ", error.message()));

  v1::CompareReport report;
  report.set_dhpt_version(DHPT_VERSION);
  *report.mutable_create_time() = Now();
  *report.mutable_machine() = DescribeMachine();
  *report.mutable_spec() = spec;

  if (!options_.scheduler.empty()) {
    // Before the sequential run, which may take long: a cluster that cannot run the study
    // should say so at once.
    absl::StatusOr<std::vector<v1::Worker>> workers =
        StudyClient(options_.scheduler, options_.security).ListWorkers();
    if (!workers.ok()) {
      return absl::Status(workers.status().code(),
                          absl::StrCat("scheduler ", options_.scheduler, ": ",
                                       workers.status().message()));
    }
    if (workers->empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no worker is connected to the scheduler at ", options_.scheduler));
    }
  }
  RETURN_IF_ERROR(RunSequential(spec, dir, *report.mutable_sequential()));
  if (cancelled()) return absl::CancelledError("interrupted");
  RETURN_IF_ERROR(RunFramework(spec, *report.mutable_framework()));
  if (cancelled()) return absl::CancelledError("interrupted");

  // The binaries that ran here: the sequential run's worker and the local cluster's.
  std::set<std::string> binaries = {SequentialBinary(spec)};
  if (options_.scheduler.empty()) {
    binaries.insert("dhpt-scheduler");
    absl::StatusOr<LocalClusterOptions> local = ResolveLocalCluster(spec, options_.local);
    if (local.ok() && local->cpu_workers > 0) binaries.insert("dhpt-cpu-worker");
    if (local.ok() && local->gpu_workers > 0) binaries.insert("dhpt-gpu-worker");
  }
  for (const std::string& binary : binaries) {
    const std::string version = VersionOf(absl::StrCat(options_.binary_dir, "/", binary));
    if (!version.empty()) (*report.mutable_versions())[binary] = version;
  }
  Conclude(report, options_.scheduler.empty() ? report.machine().cores() : 0);

  std::vector<std::string> plots;
  absl::StatusOr<std::vector<std::string>> drawn = DrawPlots(report, dir);
  if (drawn.ok()) {
    plots = *drawn;
  } else {
    report.add_warnings(std::string(drawn.status().message()));
  }
  const std::filesystem::path root(dir);
  ASSIGN_OR_RETURN(const std::string report_json, ToJson(report));
  RETURN_IF_ERROR(WriteTextFile((root / "report.json").string(), report_json));
  RETURN_IF_ERROR(WriteTextFile((root / "report.md").string(), CompareMarkdown(report, plots)));
  return report;
}

absl::Status Comparison::RunSequential(const v1::StudySpec& spec, const std::string& dir,
                                       v1::RunReport& run) {
  int threads = options_.local.threads_per_trial;
  if (options_.scheduler.empty()) {
    // As the framework's local workers will have.
    ASSIGN_OR_RETURN(LocalClusterOptions local, ResolveLocalCluster(spec, options_.local));
    threads = local.threads_per_trial;
  } else if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  const std::string spec_path = (std::filesystem::path(dir) / "spec.json").string();
  ASSIGN_OR_RETURN(const std::string spec_json, ToJson(spec));
  RETURN_IF_ERROR(WriteTextFile(spec_path, spec_json));

  run.set_mode(v1::RunReport::SEQUENTIAL);
  run.set_where("one process on this machine");
  run.set_workers(1);
  run.set_slots_per_worker(1);
  run.set_threads_per_trial(threads);
  const std::string binary = absl::StrCat(options_.binary_dir, "/", SequentialBinary(spec));
  int log_fd = -1;
  if (!options_.log_file.empty()) {
    log_fd = open(options_.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  PeakRssSampler sampler;
  std::vector<std::string> args = {binary, "--sequential_study=" + spec_path,
                                   absl::StrCat("--threads_per_trial=", threads),
                                   "--worker_id=sequential"};
  // The same data roots as the local cluster's workers.
  for (std::string& flag : DataRootFlags(LocalDataRoots(options_.local))) {
    args.push_back(std::move(flag));
  }
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("sequential", args, fds[1], log_fd, &sampler);
  close(fds[1]);
  if (log_fd >= 0) close(log_fd);
  if (!child.ok()) {
    close(fds[0]);
    return child.status();
  }
  {
    absl::MutexLock lock(&mutex_);
    sequential_ = child->get();
  }
  if (cancelled()) (*child)->Signal(SIGTERM);

  // One JSON StudyEvent per line: the study as it starts, each ended trial, the study as it
  // ended. The clock runs from the first to the last, as the framework's runs from submission
  // to the end: process start-up is not the study's (the framework's workers are long-lived).
  std::string pending;
  bool ended = false;
  absl::Time start = absl::Now();
  double cpu_at_start = 0;
  char buffer[1 << 16];
  v1::Study progress;
  *progress.mutable_spec() = spec;
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      v1::StudyEvent event;
      if (!google::protobuf::util::JsonStringToMessage(line, &event).ok()) continue;
      if (event.has_trial()) {
        *run.add_trials() = event.trial();
        const v1::Trial& trial = event.trial();
        if (trial.state() == v1::Trial::COMPLETED) {
          progress.set_trials_completed(progress.trials_completed() + 1);
          if (!progress.has_best_trial() ||
              study::IsBetterTrial(spec, trial, progress.best_trial())) {
            *progress.mutable_best_trial() = trial;
          }
        } else if (trial.state() == v1::Trial::FAILED) {
          progress.set_trials_failed(progress.trials_failed() + 1);
        } else if (trial.state() == v1::Trial::PRUNED) {
          progress.set_trials_pruned(progress.trials_pruned() + 1);
        }
        Progress(StudyProgress("sequential", progress, 0), false);
      } else if (event.has_study() && event.study().state() == v1::Study::RUNNING) {
        start = absl::Now();
        *run.mutable_start_time() = Now();
        cpu_at_start = (*child)->CpuSecondsSoFar();
      } else if (event.has_study()) {
        run.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
        run.set_state(event.study().state());
        run.set_state_reason(event.study().state_reason());
        run.set_trials_pruned_within_reach(event.study().trials_pruned_within_reach());
        ended = true;
      }
    }
  }
  close(fds[0]);
  (*child)->Wait();
  v1::ProcessUsage& usage = *run.add_processes();
  usage = (*child)->Usage();
  usage.set_cpu_seconds(usage.cpu_seconds() - cpu_at_start);
  usage.set_wall_seconds(run.wall_seconds());
  {
    absl::MutexLock lock(&mutex_);
    sequential_ = nullptr;
  }
  Progress(StudyProgress("sequential", progress, 0), true);
  if (cancelled()) return absl::CancelledError("interrupted");
  const int status = (*child)->wait_status();
  if (!ended || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(
        "the sequential run (", binary, " --sequential_study) did not finish",
        options_.log_file.empty() ? "" : "; see its log in " + options_.log_file));
  }
  return absl::OkStatus();
}

absl::Status Comparison::RunFramework(const v1::StudySpec& spec, v1::RunReport& run) {
  run.set_mode(v1::RunReport::FRAMEWORK);
  v1::StudySpec submitted = spec;
  std::optional<LocalCluster> cluster;
  PeakRssSampler sampler;
  std::string address = options_.scheduler;
  int expected_workers = 0;
  if (address.empty()) {
    ASSIGN_OR_RETURN(LocalClusterOptions local, ResolveLocalCluster(spec, options_.local));
    local.binary_dir = options_.binary_dir;
    const int workers = local.cpu_workers + local.gpu_workers;
    local.log_file = options_.log_file;
    local.sampler = &sampler;
    ASSIGN_OR_RETURN(LocalCluster started, LocalCluster::Start(local));
    cluster.emplace(std::move(started));
    address = cluster->scheduler_address();
    expected_workers = workers;
    run.set_where(absl::StrCat("local scheduler, ", local.cpu_workers, " CPU and ",
                               local.gpu_workers, " GPU workers"));
    run.set_workers(workers);
    run.set_slots_per_worker(local.slots);
    run.set_threads_per_trial(local.threads_per_trial);
  } else {
    // A shared scheduler keeps its studies: a name of its own for this comparison.
    submitted.set_name(absl::StrCat(spec.name(), "-compare-",
                                    absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(),
                                                     absl::UTCTimeZone())));
    run.set_where(absl::StrCat("scheduler at ", address, ", study ", submitted.name()));
    run.set_threads_per_trial(options_.local.threads_per_trial);  // 0: each worker's own.
  }

  // Local services listen on loopback in plaintext; a remote scheduler as the flags say.
  auto owned_client =
      std::make_unique<StudyClient>(address, cluster ? ChannelSecurity{} : options_.security);
  StudyClient& client = *owned_client;
  {
    absl::MutexLock lock(&mutex_);
    client_ = &client;
  }
  // Workers connect before the clock starts: on a cluster they are long-lived.
  const absl::Time connect_deadline = absl::Now() + absl::Seconds(60);
  absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
  while (!cancelled() && workers.ok() && expected_workers > 0 &&
         static_cast<int>(workers->size()) < expected_workers && absl::Now() < connect_deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    workers = client.ListWorkers();
  }
  absl::Status status = workers.status();
  if (status.ok() && workers->empty()) {
    status = absl::FailedPreconditionError(absl::StrCat("no worker is connected to ", address));
  }
  if (status.ok()) {
    // A row per node from the start, so that a node that runs nothing shows, all idle; its
    // slots are those of its workers that run the study's model (a Jetson's GPU worker is no
    // idle slot for a Random Forest study).
    std::map<std::string, v1::NodeUsage> nodes;
    for (const v1::Worker& worker : *workers) {
      const v1::WorkerCapabilities& caps = worker.capabilities();
      const std::string& name = caps.node_name().empty() ? worker.worker_id() : caps.node_name();
      v1::NodeUsage& row = nodes[name];
      row.set_node(name);
      if (auto board = caps.labels().find("board"); board != caps.labels().end()) {
        row.set_board(board->second);
      }
      if (std::find(caps.models().begin(), caps.models().end(), spec.model().kind()) !=
          caps.models().end()) {
        row.set_slots(row.slots() + caps.slots());
      }
      row.set_memory_bytes(std::max(row.memory_bytes(), static_cast<double>(caps.memory_bytes())));
    }
    for (auto& [name, row] : nodes) *run.add_nodes() = std::move(row);
  }
  if (status.ok() && !cluster) {
    // The workers that can run the study (a cluster's GPU workers take no XGBoost trial);
    // all of them when none can yet.
    int slots = 0, able = 0, all_slots = 0;
    for (const v1::Worker& worker : *workers) {
      const v1::WorkerCapabilities& caps = worker.capabilities();
      all_slots += caps.slots();
      if (std::find(caps.models().begin(), caps.models().end(), spec.model().kind()) !=
          caps.models().end()) {
        slots += caps.slots();
        ++able;
      }
    }
    if (able == 0) {
      able = static_cast<int>(workers->size());
      slots = all_slots;
    }
    run.set_workers(able);
    run.set_slots_per_worker(std::max(1, slots / able));
  }
  std::vector<double> cpu_before, cpu_after;
  if (status.ok() && !cancelled()) {
    *run.mutable_start_time() = Now();
    if (cluster) cpu_before = cluster->CpuSecondsSoFar();
    const absl::Time start = absl::Now();
    status = client.CreateStudy(submitted).status();
    if (status.ok()) status = WatchFramework(client, submitted.name(), run);
    run.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    if (cluster) cpu_after = cluster->CpuSecondsSoFar();
  }
  if (status.ok()) {
    absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(submitted.name());
    if (trials.ok()) {
      for (v1::Trial& trial : *trials) *run.add_trials() = std::move(trial);
    }
    status = trials.status();
  }
  {
    absl::MutexLock lock(&mutex_);
    client_ = nullptr;
  }
  // Our channel closed first: the scheduler's shutdown waits for open connections' calls.
  owned_client.reset();
  if (cluster) {
    std::vector<v1::ProcessUsage> usage = cluster->Stop();
    // The services' CPU while the study ran, not their start-up and shutdown: on a cluster
    // they are long-lived.
    for (size_t i = 0; i < usage.size(); ++i) {
      if (i < cpu_after.size() && i < cpu_before.size()) {
        usage[i].set_cpu_seconds(cpu_after[i] - cpu_before[i]);
        usage[i].set_wall_seconds(run.wall_seconds());
      }
      *run.add_processes() = std::move(usage[i]);
    }
  }
  if (cancelled()) return absl::CancelledError("interrupted");
  return status;
}

absl::Status Comparison::WatchFramework(StudyClient& client, const std::string& name,
                                        v1::RunReport& run) {
  absl::Status watched = client.Watch(
      name,
      [&](const v1::StudyEvent& event) {
        Progress(StudyProgress("framework", event.study(), event.study().trials_running()), false);
      },
      /*summaries_only=*/true);
  if (!watched.ok()) return watched;
  ASSIGN_OR_RETURN(v1::Study study, client.GetStudy(name));
  run.set_state(study.state());
  run.set_state_reason(study.state_reason());
  run.set_trials_pruned_within_reach(study.trials_pruned_within_reach());
  Progress(StudyProgress("framework", study, 0), true);
  return absl::OkStatus();
}

absl::StatusOr<v1::MatrixReport> Comparison::RunMatrix(const v1::CompareMatrix& matrix,
                                                       const std::string& matrix_dir,
                                                       const std::string& dir) {
  std::vector<v1::StudySpec> studies;
  for (const v1::CompareMatrix::Study& study : matrix.studies()) {
    absl::StatusOr<v1::StudySpec> spec;
    switch (study.source_case()) {
      case v1::CompareMatrix::Study::kDemo:
        spec = DemoStudy(study.demo());
        break;
      case v1::CompareMatrix::Study::kFile: {
        std::filesystem::path path(study.file());
        if (path.is_relative()) path = std::filesystem::path(matrix_dir) / path;
        spec = ReadStudyFile(path.string());
        break;
      }
      default:
        spec = study.spec();
    }
    if (!spec.ok()) return spec.status();
    studies.push_back(*std::move(spec));
  }
  std::vector<v1::Algorithm::Name> algorithms;
  for (int algorithm : matrix.algorithms()) {
    algorithms.push_back(static_cast<v1::Algorithm::Name>(algorithm));
  }
  if (algorithms.empty()) {
    algorithms = {v1::Algorithm::RANDOM, v1::Algorithm::GRID, v1::Algorithm::BAYESIAN,
                  v1::Algorithm::TPE, v1::Algorithm::HILL_CLIMBING};
  }

  // Every cell's spec first, so that a bad one is reported before hours of running.
  struct Cell {
    std::string name;
    v1::StudySpec spec;
  };
  std::vector<Cell> cells;
  for (const v1::StudySpec& study : studies) {
    for (v1::Algorithm::Name algorithm : algorithms) {
      v1::StudySpec spec = study;
      // The study's own algorithm settings (grid points, TPE options...) only for its own
      // algorithm: another algorithm would refuse them.
      if (study.algorithm().name() != algorithm) {
        spec.clear_algorithm();
        spec.mutable_algorithm()->set_seed(study.algorithm().seed());
      }
      spec.mutable_algorithm()->set_name(algorithm);
      if (matrix.seed() != 0) spec.mutable_algorithm()->set_seed(matrix.seed());
      if (matrix.max_trials() > 0) spec.set_max_trials(matrix.max_trials());
      const std::string name = CellName(study, algorithm);
      spec.set_name(name);
      absl::StatusOr<v1::StudySpec> normalized = study::NormalizeStudySpec(spec);
      if (!normalized.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cell ", name, ": ", normalized.status().message()));
      }
      cells.push_back({name, *std::move(normalized)});
    }
  }

  v1::MatrixReport summary;
  summary.set_dhpt_version(DHPT_VERSION);
  *summary.mutable_create_time() = Now();
  *summary.mutable_machine() = DescribeMachine();
  absl::Status failures;
  for (size_t i = 0; i < cells.size() && !cancelled(); ++i) {
    const Cell& cell = cells[i];
    const std::filesystem::path cell_dir = std::filesystem::path(dir) / "cells" / cell.name;
    Progress(absl::StrFormat("cell %d/%d: %s", i + 1, cells.size(), cell.name), true);
    // A finished cell of the same spec is kept: the matrix resumes where it stopped.
    v1::CompareReport kept;
    absl::StatusOr<std::string> text = ReadTextFile((cell_dir / "report.json").string(), kMaxExportFileBytes);
    if (text.ok() && google::protobuf::util::JsonStringToMessage(*text, &kept).ok() &&
        google::protobuf::util::MessageDifferencer::Equals(kept.spec(), cell.spec)) {
      Progress("  kept from an earlier run", true);
      *summary.add_cells() = MatrixCellOf(cell.name, kept);
      continue;
    }
    absl::StatusOr<v1::CompareReport> report = Run(cell.spec, cell_dir.string());
    if (!report.ok()) {
      if (absl::IsCancelled(report.status())) break;
      Progress(absl::StrCat("  failed: ", report.status().message()), true);
      failures = absl::InternalError(absl::StrCat(
          "cell ", cell.name, " failed (", report.status().message(),
          "); run the same command again to retry the cells that did not finish"));
      continue;
    }
    *summary.add_cells() = MatrixCellOf(cell.name, *report);
  }
  const std::filesystem::path root(dir);
  ASSIGN_OR_RETURN(const std::string summary_json, ToJson(summary));
  RETURN_IF_ERROR(WriteTextFile((root / "report.json").string(), summary_json));
  RETURN_IF_ERROR(WriteTextFile((root / "report.md").string(), MatrixMarkdown(summary)));
  if (cancelled()) return absl::CancelledError("interrupted; run the same command to resume");
  if (!failures.ok()) return failures;
  return summary;
}

}  // namespace dhpt::cli
