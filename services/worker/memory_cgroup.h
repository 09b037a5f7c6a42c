#pragma once

// The memory cgroup this worker runs in (Kubernetes puts a pod's containers in one; so does
// bench/edge_cluster.sh per emulated board), read so that a trial the kernel's OOM killer ended
// fails with "out of memory on node N" rather than a bare SIGKILL. cgroup v1 (memory
// controller) and v2 (unified) both; where neither is readable, nothing is known and trials
// fail as before.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace dhpt::worker {

// The directory of the memory cgroup named by /proc/self/cgroup's `text`, under `root`
// (normally /sys/fs/cgroup): the v1 memory controller's line if there is one, else the v2 line
// ("0::/path"); nullopt if neither.
std::optional<std::string> MemoryCgroupDir(absl::string_view proc_self_cgroup,
                                           absl::string_view root);

// The same for any v1 controller ("cpu"): its line's directory under root/CONTROLLER, else the
// v2 line's.
std::optional<std::string> CgroupDir(absl::string_view proc_self_cgroup, absl::string_view root,
                                     absl::string_view controller);

// Cores a CPU quota allows: a v1 cpu.cfs_quota_us over cpu.cfs_period_us (quota -1: none), or a
// v2 cpu.max ("QUOTA PERIOD", "max PERIOD": none); nullopt when none or unreadable.
std::optional<double> ParseCpuQuotaCores(absl::string_view quota_or_cpu_max,
                                         absl::string_view v1_period);

// The CPU quota of this process's cgroup in cores, the smallest of its group's and every
// enclosing group's (Kubernetes sets it on the container's and the pod's; bench/edge_cluster.sh
// per board); nullopt when none is set or none is readable. What placement takes a board's
// speed to be in proportion to before it has learnt it (speed_model.h in the scheduler).
std::optional<double> CpuQuotaCoresOfThisProcess();

// The `oom_kill N` count of a v1 memory.oom_control or a v2 memory.events file.
std::optional<int64_t> ParseOomKills(absl::string_view text);

class MemoryCgroup {
 public:
  // This process's memory cgroup, or one that knows nothing.
  static MemoryCgroup OfThisProcess();
  explicit MemoryCgroup(std::optional<std::string> dir) : dir_(std::move(dir)) {}

  // Processes the kernel's OOM killer has ended in this cgroup so far.
  std::optional<int64_t> OomKills() const;
  // The cgroup's memory limit in bytes; nullopt when unlimited or unknown.
  std::optional<int64_t> Limit() const;

 private:
  std::optional<std::string> dir_;
};

// Why a trial's command failed, when the OOM killer's count in its cgroup grew while it ran: "was killed by the kernel's OOM killer: out of memory on node pi4-1 (its
// memory limit is 256 MiB)"; "" when the count did not grow or is unknown.
std::string OomKillProblem(std::optional<int64_t> kills_before, std::optional<int64_t> kills_after,
                           std::optional<int64_t> limit_bytes, absl::string_view node_name);

}  // namespace dhpt::worker
