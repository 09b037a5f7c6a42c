#include "services/worker/process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "services/common/logging.h"

namespace dhpt::worker {
namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

// The process group and resident size of `pid` from /proc/PID/stat; false once it is gone.
bool ReadStat(const char* pid, pid_t& group, double& resident_bytes) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  // Fields after the command name, which may hold spaces and ends at the last ')': pgrp is
  // field 5, rss (pages) field 24.
  absl::string_view stat(text, static_cast<size_t>(n));
  const size_t name_end = stat.rfind(')');
  if (name_end == absl::string_view::npos || name_end + 2 > stat.size()) return false;
  std::vector<absl::string_view> fields = absl::StrSplit(stat.substr(name_end + 2), ' ');
  long pgrp = 0, rss = 0;
  if (fields.size() < 22 || !absl::SimpleAtoi(fields[2], &pgrp) ||
      !absl::SimpleAtoi(fields[21], &rss)) {
    return false;
  }
  group = static_cast<pid_t>(pgrp);
  resident_bytes = static_cast<double>(rss) * static_cast<double>(sysconf(_SC_PAGESIZE));
  return true;
}

// Between fork and exec: async-signal-safe calls only. Never returns.
[[noreturn]] void ExecChild(pid_t parent, const ProcessSpec& spec, char* const* argv,
                            char* const* envp, int null_fd, int out_fd, int err_fd, int status_fd,
                            int max_fd) {
  auto fail = [&status_fd] {
    const int error = errno;
    (void)!write(status_fd, &error, sizeof error);
    _exit(127);
  };
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // The worker died before prctl took effect.
  // The worker blocks SIGTERM and SIGINT in every thread and gRPC ignores SIGPIPE; a program
  // must start as if from a shell.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
  // Out of the way of 0..3 first, whichever numbers the pipes got.
  const int fds[] = {fcntl(null_fd, F_DUPFD, 10), fcntl(out_fd, F_DUPFD, 10),
                     fcntl(err_fd, F_DUPFD, 10), fcntl(status_fd, F_DUPFD_CLOEXEC, 10)};
  status_fd = fds[3];
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || fds[3] < 0) fail();
  if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0) fail();
  if (dup3(status_fd, 3, O_CLOEXEC) < 0) fail();
  status_fd = 3;
  if (close_range(4, ~0U, 0) != 0) {
    for (int fd = 4; fd < max_fd; ++fd) close(fd);
  }
  if (chdir(spec.workdir.c_str()) != 0) fail();
  execve(argv[0], argv, envp);
  fail();
  _exit(127);  // fail() has: this tells the compiler.
}

}  // namespace

absl::Status BecomeChildSubreaper() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    return absl::InternalError(
        absl::StrCat("prctl(PR_SET_CHILD_SUBREAPER): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status HideFromCommands() {
  if (prctl(PR_SET_DUMPABLE, 0) != 0) {
    return absl::InternalError(absl::StrCat("prctl(PR_SET_DUMPABLE): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("no program to run");
  // Everything the child needs is built before fork: it may not allocate.
  std::vector<char*> argv, envp;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (const std::string& var : spec.env) envp.push_back(const_cast<char*>(var.c_str()));
  envp.push_back(nullptr);
  const int max_fd = static_cast<int>(std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16));

  int out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto close_all = [&] {
    for (int fd : {out[0], out[1], err[0], err[1], status[0], status[1], null_fd}) {
      if (fd >= 0) close(fd);
    }
  };
  if (null_fd < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(status, O_CLOEXEC) != 0) {
    const int error = errno;
    close_all();
    return absl::InternalError(absl::StrCat("cannot make pipes: ", std::strerror(error)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    ExecChild(parent, spec, argv.data(), envp.data(), null_fd, out[1], err[1], status[1], max_fd);
  }
  if (pid < 0) {
    const int error = errno;
    close_all();
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(error)));
  }
  // Also set here, so that no signal to the group can race the child's own setpgid.
  setpgid(pid, pid);
  for (int* fd : {&out[1], &err[1], &status[1]}) {
    close(*fd);
    *fd = -1;
  }
  // EOF: exec succeeded (the descriptor is close-on-exec); an int: the errno it failed with.
  int error = 0;
  ssize_t n;
  do {
    n = read(status[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof error) {
    close_all();
    int ignored = 0;
    while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", spec.argv[0], ": ", std::strerror(error)));
  }
  close(status[0]);
  close(null_fd);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(pid, out[0], err[0]));
}

ProcessGroup::~ProcessGroup() {
  const absl::Time deadline = absl::Now() + kProcessGroupKillTimeout;
  Signal(SIGKILL);
  Reap();
  while (!Empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    Reap();
  }
  if (!Empty()) {
    DHPT_LOG_WARNING("process group %d still has processes %s after SIGKILL; leaving them", pid_,
                     absl::FormatDuration(kProcessGroupKillTimeout));
  }
  close(stdout_fd_);
  close(stderr_fd_);
}

void ProcessGroup::Reap() {
  while (true) {
    int status = 0;
    rusage usage{};
    const pid_t reaped = wait4(-pid_, &status, WNOHANG, &usage);
    if (reaped <= 0) {
      if (reaped < 0 && errno == EINTR) continue;
      return;  // None exited yet, or no child left in the group (ECHILD).
    }
    cpu_seconds_ += Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
    max_reaped_rss_bytes_ =
        std::max(max_reaped_rss_bytes_, static_cast<double>(usage.ru_maxrss) * 1024.0);
    if (reaped == pid_) main_status_ = status;
  }
}

bool ProcessGroup::Empty() const { return kill(-pid_, 0) != 0 && errno == ESRCH; }

void ProcessGroup::Signal(int signal) const { kill(-pid_, signal); }

void ProcessGroup::SampleMemory() {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  double total = 0;
  while (const dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    pid_t group = 0;
    double resident = 0;
    if (ReadStat(entry->d_name, group, resident) && group == pid_) total += resident;
  }
  closedir(proc);
  max_sampled_rss_bytes_ = std::max(max_sampled_rss_bytes_, total);
}

ProcessTreeUsage ProcessGroup::usage() const {
  return {.cpu_seconds = cpu_seconds_,
          .peak_rss_bytes = std::max(max_reaped_rss_bytes_, max_sampled_rss_bytes_)};
}

}  // namespace dhpt::worker
