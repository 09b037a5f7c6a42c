#include "services/cli/local_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "services/scheduler/placement.h"

namespace dhpt::cli {
namespace {

// Reads the child's first line, which starts with `prefix` ("listening on " for the scheduler,
// "dashboard at " for the dashboard), and returns the rest of it up to a space.
absl::StatusOr<std::string> ReadListenLine(int fd, ChildProcess& scheduler,
                                           absl::Duration timeout,
                                           absl::string_view prefix = "listening on ") {
  std::string text;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready > 0) {
      char buffer[256];
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
      if (size_t end = text.find('\n'); end != std::string::npos) {
        std::string line = text.substr(0, end);
        if (absl::StartsWith(line, prefix)) {
          line = line.substr(prefix.size());
          return line.substr(0, line.find(' '));
        }
        return absl::InternalError(absl::StrCat("unexpected ", scheduler.name(), " output: ", line));
      }
    }
    if (scheduler.Poll()) {
      return absl::InternalError(
          absl::StrCat(scheduler.name(), " exited during start-up (see its log above)"));
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat(scheduler.name(), " did not report its address in time"));
}

}  // namespace

std::vector<std::string> LocalDataRoots(const LocalClusterRequest& request) {
  std::vector<std::string> roots;
  std::error_code error;
  for (const std::string& root : request.data_roots) {
    if (!root.empty()) roots.push_back(std::filesystem::absolute(root, error).string());
  }
  if (roots.empty()) roots.push_back(std::filesystem::current_path(error).string());
  return roots;
}

std::vector<std::string> DataRootFlags(const std::vector<std::string>& roots) {
  std::vector<std::string> flags;
  for (const std::string& root : roots) flags.push_back("--data_root=" + root);
  return flags;
}

absl::StatusOr<LocalClusterOptions> ResolveLocalCluster(const v1::StudySpec& spec,
                                                        const LocalClusterRequest& request) {
  const bool autoencoder = spec.model().kind() == v1::Model::AUTOENCODER;
  LocalClusterOptions options;
  options.cpu_workers = request.cpu_workers >= 0 ? request.cpu_workers : autoencoder ? 0 : 2;
  options.gpu_workers = request.gpu_workers >= 0 ? request.gpu_workers : autoencoder ? 1 : 0;
  options.slots = request.slots;
  options.data_roots = LocalDataRoots(request);
  options.commands = request.commands;
  options.labels = request.labels;
  if (autoencoder && options.gpu_workers < 1) {
    return absl::InvalidArgumentError(
        "an AUTOENCODER study runs only on GPU workers: give --gpu-workers=1 or more");
  }
  const int workers = options.cpu_workers + options.gpu_workers;
  if (options.slots < 1 || workers < 1) {
    return absl::InvalidArgumentError("--slots and --workers + --gpu-workers must be at least 1");
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.threads_per_trial = request.threads_per_trial > 0
                                  ? request.threads_per_trial
                                  : std::max(1, cores / (workers * options.slots));
  return options;
}

absl::Status CheckLocalWorkersCanRun(const v1::StudySpec& spec,
                                     const std::vector<v1::WorkerCapabilities>& workers) {
  std::vector<const v1::WorkerCapabilities*> connected;
  for (const v1::WorkerCapabilities& worker : workers) {
    if (scheduler::CanRun(spec, worker)) return absl::OkStatus();
    connected.push_back(&worker);
  }
  // EXTERNAL studies are run by the user's client, never by these workers.
  if (spec.model().kind() == v1::Model::EXTERNAL) return absl::OkStatus();
  std::vector<std::string> fixes;
  if (spec.model().kind() == v1::Model::COMMAND &&
      std::none_of(workers.begin(), workers.end(), [&](const v1::WorkerCapabilities& w) {
        return scheduler::HasCommand(spec, w);
      })) {
    fixes.push_back(absl::StrCat(
        "give dhpt local --command=", spec.model().command(), "=PATH (quoted when the program "
        "takes arguments: --command='", spec.model().command(), "=/usr/bin/python3 train.py')"));
  }
  if (std::none_of(workers.begin(), workers.end(), [&](const v1::WorkerCapabilities& w) {
        return scheduler::MatchesSelector(spec, w);
      })) {
    const std::map<std::string, std::string> sorted(spec.worker_selector().begin(),
                                                    spec.worker_selector().end());
    fixes.push_back(absl::StrCat("give dhpt local --labels=",
                                 absl::StrJoin(sorted, ",", absl::PairFormatter("=")),
                                 " for its worker_selector"));
  }
  if (scheduler::NeedsGpu(spec) &&
      std::none_of(workers.begin(), workers.end(), [](const v1::WorkerCapabilities& w) {
        return w.device_kind() == v1::WorkerCapabilities::CUDA;
      })) {
    fixes.push_back(
        "this machine has no CUDA device: set allow_cpu_fallback: true in the study to train on "
        "the CPU, or run it where a CUDA GPU is");
  }
  if (fixes.empty()) {
    fixes.push_back("give --workers or --gpu-workers the kind of worker that runs it");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "none of the workers dhpt local started can run study \"", spec.name(), "\", which "
      "would be ", scheduler::WaitingForWorker(spec, connected), ": ", absl::StrJoin(fixes, "; ")));
}

std::string ExecutableDir() {
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? "." : self.parent_path().string();
}

absl::StatusOr<LocalCluster> LocalCluster::Start(const LocalClusterOptions& options) {
  LocalCluster cluster;
  int log_fd = -1;
  if (!options.log_file.empty()) {
    log_fd = open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      return absl::InternalError(absl::StrCat("cannot open ", options.log_file, ": ",
                                              std::strerror(errno)));
    }
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const std::string scheduler = options.binary_dir + "/dhpt-scheduler";
  absl::StatusOr<std::unique_ptr<ChildProcess>> scheduler_process = ChildProcess::Start(
      // A local run is one study, over when the command ends: nothing to keep.
      "scheduler", {scheduler, "--listen=127.0.0.1:0", "--heartbeat_interval=1s", "--db=:memory:"},
      pipe_fds[1],
      log_fd, options.sampler);
  close(pipe_fds[1]);
  if (!scheduler_process.ok()) {
    close(pipe_fds[0]);
    if (log_fd >= 0) close(log_fd);
    return scheduler_process.status();
  }
  cluster.children_.push_back(std::move(*scheduler_process));
  absl::StatusOr<std::string> address =
      ReadListenLine(pipe_fds[0], *cluster.children_.front(), absl::Seconds(15));
  close(pipe_fds[0]);
  if (!address.ok()) {
    if (log_fd >= 0) close(log_fd);
    cluster.Stop();
    return address.status();
  }
  cluster.address_ = *address;
  const std::string dashboard = options.binary_dir + "/dhpt-dashboard";
  if (options.dashboard && access(dashboard.c_str(), X_OK) == 0) {
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
    absl::StatusOr<std::unique_ptr<ChildProcess>> dashboard_process = ChildProcess::Start(
        "dashboard", {dashboard, "--scheduler=" + cluster.address_, "--listen=127.0.0.1:0"},
        pipe_fds[1], log_fd, options.sampler);
    close(pipe_fds[1]);
    if (!dashboard_process.ok()) {
      close(pipe_fds[0]);
      if (log_fd >= 0) close(log_fd);
      cluster.Stop();
      return dashboard_process.status();
    }
    cluster.children_.push_back(std::move(*dashboard_process));
    absl::StatusOr<std::string> url = ReadListenLine(pipe_fds[0], *cluster.children_.back(),
                                                     absl::Seconds(15), "dashboard at ");
    close(pipe_fds[0]);
    if (!url.ok()) {
      if (log_fd >= 0) close(log_fd);
      cluster.Stop();
      return url.status();
    }
    cluster.dashboard_url_ = *url;
  }
  struct WorkerBinary {
    const char* binary;
    const char* id_prefix;
    int count;
  };
  for (const WorkerBinary& kind : {WorkerBinary{"dhpt-cpu-worker", "local-cpu-", options.cpu_workers},
                                   WorkerBinary{"dhpt-gpu-worker", "local-gpu-", options.gpu_workers}}) {
    for (int i = 1; i <= kind.count; ++i) {
      const std::string id = absl::StrCat(kind.id_prefix, i);
      std::vector<std::string> args = {
          absl::StrCat(options.binary_dir, "/", kind.binary), "--scheduler=" + cluster.address_,
          absl::StrCat("--slots=", options.slots),
          absl::StrCat("--threads_per_trial=", options.threads_per_trial),
          absl::StrCat("--worker_id=", id)};
      for (std::string& flag : DataRootFlags(options.data_roots)) args.push_back(std::move(flag));
      // One argument each, never split by a shell: "NAME=PATH ARG" arrives whole.
      for (const std::string& command : options.commands) args.push_back("--command=" + command);
      if (!options.labels.empty()) args.push_back("--labels=" + options.labels);
      absl::StatusOr<std::unique_ptr<ChildProcess>> worker =
          ChildProcess::Start(id, args, -1, log_fd, options.sampler);
      if (!worker.ok()) {
        if (log_fd >= 0) close(log_fd);
        cluster.Stop();
        return worker.status();
      }
      cluster.children_.push_back(std::move(*worker));
    }
  }
  if (log_fd >= 0) close(log_fd);
  return cluster;
}

LocalCluster::LocalCluster(LocalCluster&& other) noexcept
    : address_(std::move(other.address_)),
      dashboard_url_(std::move(other.dashboard_url_)),
      children_(std::move(other.children_)) {
  other.children_.clear();
}

LocalCluster::~LocalCluster() { Stop(); }

std::string LocalCluster::ExitedChild() {
  for (auto& child : children_) {
    if (child->Poll()) return child->name();
  }
  return "";
}

std::vector<double> LocalCluster::CpuSecondsSoFar() const {
  std::vector<double> seconds;
  for (const auto& child : children_) seconds.push_back(child->CpuSecondsSoFar());
  return seconds;
}

std::vector<v1::ProcessUsage> LocalCluster::Stop(absl::Duration grace) {
  if (children_.empty()) return {};
  // Workers first, so that they give back their trials while the scheduler still listens.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) (*it)->Signal(SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  auto all_exited = [&] {
    bool exited = true;
    for (auto& child : children_) exited = child->Poll() && exited;
    return exited;
  };
  while (!all_exited() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  std::vector<v1::ProcessUsage> usage;
  for (auto& child : children_) {
    if (!child->exited()) {
      child->Signal(SIGKILL);
      child->Wait();
    }
    usage.push_back(child->Usage());
  }
  children_.clear();
  return usage;
}

}  // namespace dhpt::cli
