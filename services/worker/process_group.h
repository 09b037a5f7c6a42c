#pragma once

// A child process in a process group of its own, with every process it starts: what a
// COMMAND trial runs. The group is the unit that is signalled, reaped and measured, so that a
// program's helpers (a shell's children, data loader workers) never outlive its trial. The
// worker is a child subreaper (BecomeChildSubreaper), so members orphaned by their parent's
// exit are re-parented to it and reaped here, their CPU time counted. A process that leaves
// the group (setsid, setpgid) escapes all of this; only cgroups would hold it.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dhpt::worker {

// How long the group may take to vanish after SIGKILL (a process in uninterruptible sleep,
// or an orphan that init rather than this process reaps) before the worker stops waiting.
inline constexpr absl::Duration kProcessGroupKillTimeout = absl::Seconds(5);

// Makes orphaned descendants of this process its children rather than init's (prctl
// PR_SET_CHILD_SUBREAPER), so that process groups can be reaped whole. Once, at start-up.
absl::Status BecomeChildSubreaper();
// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0): a command running as the same
// (non-root) user can then neither read its memory nor /proc/<worker>/environ. Once, at
// start-up, by a worker that runs commands.
absl::Status HideFromCommands();

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path.
  std::vector<std::string> env;   // NAME=VALUE: the whole environment.
  std::string workdir;
};

// What the group cost: every reaped member's user and system time (its own reaped children's
// included, as wait4 reports them), and the larger of the largest ru_maxrss and the largest
// sampled sum of the members' resident sizes (pages shared after fork count once per process).
struct ProcessTreeUsage {
  double cpu_seconds = 0;
  double peak_rss_bytes = 0;
};

class ProcessGroup {
 public:
  // Starts the process: its own group, stdin /dev/null, stdout and stderr to pipes, no other
  // descriptor, no blocked or ignored signal, and SIGKILL when the starting thread dies.
  // An exec failure is an error here, with its errno's text.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Start(const ProcessSpec& spec);
  // Kills and reaps whatever is left of the group.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  pid_t pid() const { return pid_; }  // Also the group's id.
  // Non-blocking read ends, open until this object goes.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }

  // Reaps every member that has exited, without blocking.
  void Reap();
  // The main process's wait status, once it is reaped.
  std::optional<int> main_status() const { return main_status_; }
  // True when no process of the group is left, zombies included.
  bool Empty() const;
  void Signal(int signal) const;
  // Adds up the resident sizes of the group's processes (/proc) towards the peak.
  void SampleMemory();
  ProcessTreeUsage usage() const;

 private:
  ProcessGroup(pid_t pid, int stdout_fd, int stderr_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

  const pid_t pid_;
  const int stdout_fd_;
  const int stderr_fd_;
  std::optional<int> main_status_;
  double cpu_seconds_ = 0;
  double max_reaped_rss_bytes_ = 0;
  double max_sampled_rss_bytes_ = 0;
};

}  // namespace dhpt::worker
