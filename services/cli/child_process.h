#pragma once

// Child processes of the CLI (a local cluster, a sequential run) and what they cost. CPU time
// comes from wait4() once a child exits: every thread, exactly. Peak memory is the larger of
// the kernel's high-water mark at exit and a 10 Hz sample of the resident size, because the
// workers reset the kernel's mark at every trial (ResourceMeter) and the mark alone would
// miss the peaks between trials, dataset loading among them.

#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dhpt/v1/compare.pb.h"

namespace dhpt::cli {

// Samples the resident size of the processes it is told of, every `interval`, on its thread.
class PeakRssSampler {
 public:
  explicit PeakRssSampler(absl::Duration interval = absl::Milliseconds(100));
  ~PeakRssSampler();
  void Watch(pid_t pid);
  // The largest resident size seen for `pid`, in bytes (0 before the first sample).
  double Peak(pid_t pid);
  void Forget(pid_t pid);

 private:
  void SampleAll();

  const absl::Duration interval_;
  absl::Mutex mutex_;
  absl::flat_hash_map<pid_t, double> peaks_ ABSL_GUARDED_BY(mutex_);
  absl::Notification stop_;
  std::thread thread_;
};

class ChildProcess {
 public:
  // Starts `argv` (argv[0] a path) with stdout to `stdout_fd` and stderr to `stderr_fd` (-1:
  // inherited). The child gets SIGTERM if the CLI dies, runs in its own process group (Ctrl-C
  // reaches the CLI, which stops children in order) and starts with no signal blocked.
  // `sampler` (may be null, must outlive the child) watches its memory.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(std::string name,
                                                             const std::vector<std::string>& argv,
                                                             int stdout_fd, int stderr_fd,
                                                             PeakRssSampler* sampler = nullptr);
  ~ChildProcess();  // SIGKILLs and reaps a child still running.

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  void Signal(int signal) const;
  // Reaps the child if it has exited; true once it has.
  bool Poll();
  // Blocks until the child exits.
  void Wait();
  bool exited() const { return exited_; }
  // The raw wait status (valid once exited).
  int wait_status() const { return wait_status_; }
  // CPU and peak memory once exited; wall time from start to exit (or to now).
  v1::ProcessUsage Usage() const;
  // User + system time of every thread so far, from /proc (0 once exited or unreadable).
  double CpuSecondsSoFar() const;

 private:
  ChildProcess(std::string name, pid_t pid, PeakRssSampler* sampler)
      : name_(std::move(name)), pid_(pid), sampler_(sampler), start_(absl::Now()) {}
  void Reaped(int status, const ::rusage& usage);

  const std::string name_;
  const pid_t pid_;
  PeakRssSampler* const sampler_;
  const absl::Time start_;
  bool exited_ = false;
  int wait_status_ = 0;
  absl::Time end_;
  double cpu_seconds_ = 0;
  double peak_rss_bytes_ = 0;
};

}  // namespace dhpt::cli
