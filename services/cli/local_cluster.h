#pragma once

// `dhpt local`: a scheduler and N workers as child processes of the CLI, on loopback.
// Children get SIGTERM when the CLI dies (PR_SET_PDEATHSIG), and Stop() ends them all, so no
// process is left behind, Ctrl-C included.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dhpt::cli {

struct LocalClusterOptions {
  std::string binary_dir;  // Where dhpt-scheduler and the worker binaries live.
  int cpu_workers = 2;
  int gpu_workers = 0;  // dhpt-gpu-worker with --device=auto (the CPU where no CUDA device is).
  int slots = 1;
  int threads_per_trial = 1;
  std::string log_file;  // The children's stderr; empty: inherit.
};

class LocalCluster {
 public:
  static absl::StatusOr<LocalCluster> Start(const LocalClusterOptions& options);
  LocalCluster(LocalCluster&& other) noexcept;
  ~LocalCluster();

  // "127.0.0.1:PORT".
  const std::string& scheduler_address() const { return address_; }
  // SIGTERM to every child, then SIGKILL to any still alive after `grace`.
  void Stop(absl::Duration grace = absl::Seconds(5));

 private:
  LocalCluster() = default;
  std::string address_;
  std::vector<pid_t> children_;
};

// The folder of the running executable (for finding sibling binaries).
std::string ExecutableDir();

}  // namespace dhpt::cli
