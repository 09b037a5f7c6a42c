#pragma once

// A child process with every process it starts, however they re-group themselves (setpgid,
// setsid, a daemon's double fork): what a COMMAND trial runs. The tree is the unit that is
// signalled, reaped and measured, so that nothing of a trial outlives it.
//
// Each tree has a supervisor: a process forked from the worker (never exec'd, so it runs
// async-signal-safe code only) that is a child subreaper (PR_SET_CHILD_SUBREAPER) and the
// parent of the trial's main process. Every descendant orphaned by its parent's exit is
// re-parented to the supervisor, not to the worker or init, so the tree is "the supervisor's
// descendants" whatever their process groups or sessions, and one trial's supervisor never
// sees another trial's processes. The supervisor signals every descendant when told to
// (/proc's parent links), reaps all of them, and exits once it has no child left; SIGKILL, or
// the worker's end of its control pipe closing (the worker died), makes it kill the whole tree.
// The worker itself reaps only its supervisors.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dhpt::worker {

// How long the tree may take to vanish after SIGKILL (a process in uninterruptible sleep)
// before the worker stops waiting for it.
inline constexpr absl::Duration kProcessTreeKillTimeout = absl::Seconds(5);
// How deep below the supervisor a process is looked for by walking /proc parent links; a
// deeper one is found once its ancestors are killed (it is then re-parented higher up).
inline constexpr int kMaxProcessTreeDepth = 64;

// Makes this process non-dumpable (prctl PR_SET_DUMPABLE 0): a command running as the same
// (non-root) user can then neither read its memory nor /proc/<worker>/environ. Once, at
// start-up, by a worker that runs commands.
absl::Status HideFromCommands();

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path.
  std::vector<std::string> env;   // NAME=VALUE: the whole environment.
  std::string workdir;
};

// What the tree cost: the user and system time of every process the supervisor reaped (with
// their own reaped children's, as wait4 reports them), and the larger of the largest ru_maxrss
// and the largest sampled sum of the processes' resident sizes (pages shared after fork count
// once per process). The supervisor's own memory (a copy of the worker's) is not counted.
struct ProcessTreeUsage {
  double cpu_seconds = 0;
  double peak_rss_bytes = 0;
};

class ProcessTree {
 public:
  // Starts the process: its own group, stdin /dev/null, stdout and stderr to pipes, no other
  // descriptor, no blocked or ignored signal, and SIGKILL when the supervisor dies.
  // An exec failure is an error here, with its errno's text.
  static absl::StatusOr<std::unique_ptr<ProcessTree>> Start(const ProcessSpec& spec);
  // Kills and reaps whatever is left of the tree (up to kProcessTreeKillTimeout).
  ~ProcessTree();
  ProcessTree(const ProcessTree&) = delete;
  ProcessTree& operator=(const ProcessTree&) = delete;

  pid_t pid() const { return main_pid_; }  // The main process; also its group's id.
  // Non-blocking read ends, open until this object goes.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }

  // Readable (or closed) when the supervisor has news for Reap: poll it with the output, so
  // that the main process's exit is seen at once. -1 once the supervisor is reaped.
  int event_fd() const { return supervisor_reaped_ ? -1 : report_fd_; }
  // Collects what the supervisor reported, and the supervisor once it has exited; no blocking.
  void Reap();
  // The main process's wait status, once it is reaped.
  std::optional<int> main_status() const { return main_status_; }
  // True when no process of the tree is left, zombies included (the supervisor is reaped).
  bool Empty() const { return supervisor_reaped_; }
  // To every process of the tree; SIGKILL also makes the supervisor kill until none is left.
  void Signal(int signal) const;
  // Adds up the resident sizes of the tree's processes (/proc) towards the peak.
  void SampleMemory();
  ProcessTreeUsage usage() const;

 private:
  ProcessTree(pid_t supervisor, pid_t main_pid, int control_fd, int report_fd, int stdout_fd,
              int stderr_fd)
      : supervisor_(supervisor),
        main_pid_(main_pid),
        control_fd_(control_fd),
        report_fd_(report_fd),
        stdout_fd_(stdout_fd),
        stderr_fd_(stderr_fd) {}
  void ReadReports();

  const pid_t supervisor_;
  const pid_t main_pid_;
  int control_fd_;  // Signals to the supervisor; closing it kills the tree.
  const int report_fd_;
  const int stdout_fd_;
  const int stderr_fd_;
  bool supervisor_reaped_ = false;
  bool usage_reported_ = false;
  std::optional<int> main_status_;
  double cpu_seconds_ = 0;
  double max_reaped_rss_bytes_ = 0;
  double max_sampled_rss_bytes_ = 0;
};

}  // namespace dhpt::worker
