#pragma once

// `dhpt local`: a scheduler and N workers as child processes of the CLI, on loopback.
// Children get SIGTERM when the CLI dies (PR_SET_PDEATHSIG), and Stop() ends them all, so no
// process is left behind, Ctrl-C included.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"  // WorkerCapabilities
#include "services/cli/child_process.h"

namespace dhpt::cli {

struct LocalClusterOptions {
  std::string binary_dir;  // Where dhpt-scheduler and the worker binaries live.
  int cpu_workers = 2;
  int gpu_workers = 0;  // dhpt-gpu-worker with --device=auto (the CPU where no CUDA device is).
  int slots = 1;
  int threads_per_trial = 1;
  // Each worker's --data_root: the directories its CSV datasets may be read from.
  std::vector<std::string> data_roots;
  // Each worker's --command registrations (NAME=PATH [ARG ...]) and --labels (k=v,...): a
  // local run of one's own program, or of a study with a worker_selector.
  std::vector<std::string> commands;
  std::string labels;
  // Also dhpt-dashboard on 127.0.0.1 (a free port), when its binary is in binary_dir.
  bool dashboard = false;
  std::string log_file;  // The children's stderr; empty: inherit.
  PeakRssSampler* sampler = nullptr;  // Watches the children's memory when set.
};

// What a user asked of a local cluster; -1 (workers) and 0 (threads) take the defaults.
struct LocalClusterRequest {
  int cpu_workers = -1;
  int gpu_workers = -1;
  int slots = 1;
  int threads_per_trial = 0;
  // Where the workers may read CSV datasets (--data_root); empty: the current directory.
  std::vector<std::string> data_roots;
  std::vector<std::string> commands;  // Passed on to every worker as --command.
  std::string labels;                 // Passed on to every worker as --labels.
};

// The request's data roots as absolute paths, the current directory when it names none: a
// local study's CSV files are usually beside the user.
std::vector<std::string> LocalDataRoots(const LocalClusterRequest& request);

// "--data_root=DIR" for each root, for a worker's command line.
std::vector<std::string> DataRootFlags(const std::vector<std::string>& roots);

// The cluster a request makes for `spec`: 2 CPU workers and no GPU worker, or 1 GPU worker and
// no CPU worker for an AUTOENCODER study; threads per trial the cores shared among the trial
// slots; the data roots of LocalDataRoots. INVALID_ARGUMENT for an AUTOENCODER study without
// GPU workers, no workers or no slots.
// binary_dir, log_file and sampler are left to the caller.
absl::StatusOr<LocalClusterOptions> ResolveLocalCluster(const v1::StudySpec& spec,
                                                        const LocalClusterRequest& request);

// How long `dhpt local` waits for the workers it started to connect before it checks that
// they can run the study.
inline constexpr absl::Duration kLocalWorkersConnectTimeout = absl::Seconds(30);

// Whether one of the workers a local cluster started (all of them, connected) can run `spec`.
// A study that none can run would wait for ever: FAILED_PRECONDITION instead, with what the
// scheduler would say it waits for and what to give `dhpt local` (--command, --labels) or
// change in the study (allow_cpu_fallback where this machine has no CUDA device).
absl::Status CheckLocalWorkersCanRun(const v1::StudySpec& spec,
                                     const std::vector<v1::WorkerCapabilities>& workers);

class LocalCluster {
 public:
  static absl::StatusOr<LocalCluster> Start(const LocalClusterOptions& options);
  LocalCluster(LocalCluster&& other) noexcept;
  ~LocalCluster();

  // "127.0.0.1:PORT".
  const std::string& scheduler_address() const { return address_; }
  // "http://127.0.0.1:PORT/", or "" when no dashboard was started.
  const std::string& dashboard_url() const { return dashboard_url_; }
  // The name of a child that has exited ("local-cpu-1"), or "" while all run.
  std::string ExitedChild();
  // Each child's CPU seconds so far, in the order Stop() reports them.
  std::vector<double> CpuSecondsSoFar() const;
  // SIGTERM to every child, then SIGKILL to any still alive after `grace`. Returns what each
  // child cost, the scheduler first (empty when already stopped).
  std::vector<v1::ProcessUsage> Stop(absl::Duration grace = absl::Seconds(5));

 private:
  LocalCluster() = default;
  std::string address_;
  std::string dashboard_url_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
};

// The folder of the running executable (for finding sibling binaries).
std::string ExecutableDir();

}  // namespace dhpt::cli
