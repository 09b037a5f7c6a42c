#include "services/worker/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/logging.h"

namespace dhpt::worker {
namespace {

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

// What the supervisor tells the worker: one record per write, so each arrives whole (a pipe
// write under PIPE_BUF is atomic).
struct Report {
  enum Kind : int32_t { kStarted = 1, kMainExited = 2, kUsage = 3 };
  int32_t kind = 0;
  int32_t value = 0;               // kStarted: the main pid; kMainExited: its wait status.
  int64_t max_rss_kilobytes = 0;   // kUsage: the largest ru_maxrss of the reaped processes.
};

// Everything below up to the next comment runs in the supervisor or the main process before
// exec: forks of a multi-threaded process, so async-signal-safe calls only (no allocation, no
// locks, no stdio).

struct ProcStat {
  pid_t ppid = 0;
  long rss_pages = 0;
};

// The parent and resident size of `pid` from /proc/PID/stat; false once it is gone.
bool ReadProcStat(pid_t pid, ProcStat& stat) {
  char path[32] = "/proc/";
  char digits[16];
  int count = 0;
  for (pid_t rest = pid; count == 0 || rest > 0; rest /= 10) digits[count++] = '0' + rest % 10;
  char* end_of_path = path + 6;
  while (count > 0) *end_of_path++ = digits[--count];
  std::memcpy(end_of_path, "/stat", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[2048];
  ssize_t n;
  do {
    n = read(fd, text, sizeof text);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return false;
  // The fields after the command name, which may hold spaces and ends at the last ')':
  // state, ppid (1), pgrp, ..., rss in pages (21).
  const char* end = text + n;
  const char* p = end;
  while (p > text && p[-1] != ')') --p;
  if (p == text) return false;
  long fields[22];
  int index = 0;
  while (index < 22) {
    while (p < end && *p == ' ') ++p;
    if (p == end || *p == '\n') return false;
    const bool negative = *p == '-';
    long value = 0;
    for (p += negative; p < end && *p != ' ' && *p != '\n'; ++p) {
      if (*p >= '0' && *p <= '9') value = value * 10 + (*p - '0');
    }
    fields[index++] = negative ? -value : value;
  }
  stat.ppid = static_cast<pid_t>(fields[1]);
  stat.rss_pages = fields[21];
  return true;
}

// Calls visit(pid) for every process in /proc.
template <typename Visit>
void ForEachProcess(Visit&& visit) {
  const int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  alignas(dirent64) char buffer[8192];
  ssize_t n;
  while ((n = getdents64(fd, buffer, sizeof buffer)) > 0) {
    for (ssize_t offset = 0; offset < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer + offset);
      offset += entry->d_reclen;
      const char* c = entry->d_name;
      if (*c < '1' || *c > '9') continue;
      pid_t pid = 0;
      for (; *c >= '0' && *c <= '9'; ++c) pid = pid * 10 + (*c - '0');
      if (*c == '\0') visit(pid);
    }
  }
  close(fd);
}

// Whether `root` is an ancestor of `pid`, up to kMaxProcessTreeDepth parent links away.
bool IsDescendant(pid_t pid, pid_t root) {
  for (int depth = 0; depth < kMaxProcessTreeDepth && pid > 1; ++depth) {
    ProcStat stat;
    if (!ReadProcStat(pid, stat)) return false;
    if (stat.ppid == root) return true;
    pid = stat.ppid;
  }
  return false;
}

void SignalDescendants(pid_t root, int signal) {
  ForEachProcess([&](pid_t pid) {
    if (pid != root && IsDescendant(pid, root)) kill(pid, signal);
  });
}

// Closes every descriptor from 3 up but those in `keep`.
void CloseAllBut(int* keep, int count, int max_fd) {
  std::sort(keep, keep + count);
  int low = 3;
  for (int i = 0; i <= count; ++i) {
    const bool last = i == count;
    const int high = last ? max_fd : keep[i] - 1;
    if (high >= low && close_range(low, last ? ~0U : static_cast<unsigned>(high), 0) != 0) {
      for (int fd = low; fd <= high; ++fd) close(fd);
    }
    if (!last) low = std::max(low, keep[i] + 1);
  }
}

void Send(int fd, const Report& report) { (void)!write(fd, &report, sizeof report); }

extern "C" void NoteChildExit(int) {}  // Only to interrupt ppoll.

// The main process. Never returns.
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
  if (getppid() != parent) _exit(127);  // The supervisor died before prctl took effect.
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

// The supervisor: starts the main process, reaps every process of the tree, forwards the
// worker's signals to all of them, and exits when none is left. Never returns.
[[noreturn]] void RunSupervisor(const ProcessSpec& spec, char* const* argv, char* const* envp,
                                int control_fd, int report_fd, int null_fd, int out_fd,
                                int err_fd, int status_fd, int max_fd) {
  const pid_t self = getpid();
  // The worker's handlers must never run here (they would act on the worker's descriptors),
  // and no signal but SIGKILL ends the supervisor early: it goes when its tree has gone.
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &action, nullptr);
  action.sa_handler = NoteChildExit;
  action.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &action, nullptr);
  sigset_t waiting = all;  // What ppoll unblocks: SIGCHLD alone.
  sigdelset(&waiting, SIGCHLD);
  // Out of the worker's group: a signal to that group (a terminal's Ctrl-C) leaves the
  // supervisor to clean up after the worker.
  setpgid(0, 0);
  auto fail = [&status_fd] {
    const int error = errno;
    (void)!write(status_fd, &error, sizeof error);
    _exit(127);
  };
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) fail();
  // Not the worker's other descriptors: another trial's pipes would never see their end.
  int keep[] = {control_fd, report_fd, null_fd, out_fd, err_fd, status_fd};
  CloseAllBut(keep, 6, max_fd);
  // _Fork: no atfork handlers, no malloc locks, which other threads of the worker may have held.
  const pid_t main_pid = _Fork();
  if (main_pid == 0) {
    ExecChild(self, spec, argv, envp, null_fd, out_fd, err_fd, status_fd, max_fd);
  }
  if (main_pid < 0) fail();
  Send(report_fd, {.kind = Report::kStarted, .value = main_pid});
  for (int fd : {null_fd, out_fd, err_fd, status_fd}) close(fd);
  bool killing = false;
  while (true) {
    while (true) {
      int status = 0;
      const pid_t reaped = waitpid(-1, &status, WNOHANG);
      if (reaped == main_pid) Send(report_fd, {.kind = Report::kMainExited, .value = status});
      if (reaped > 0 || (reaped < 0 && errno == EINTR)) continue;
      if (reaped == 0) break;
      // ECHILD: no process of the tree is left.
      rusage usage{};
      getrusage(RUSAGE_CHILDREN, &usage);
      Send(report_fd, {.kind = Report::kUsage, .max_rss_kilobytes = usage.ru_maxrss});
      _exit(0);
    }
    if (killing) {
      // Again after every exit: what was forked during the last pass, or re-parented here.
      SignalDescendants(self, SIGKILL);
      const timespec tick = {.tv_sec = 0, .tv_nsec = 10'000'000};
      ppoll(nullptr, 0, &tick, &waiting);
      continue;
    }
    pollfd control{.fd = control_fd, .events = POLLIN, .revents = 0};
    if (ppoll(&control, 1, nullptr, &waiting) <= 0) continue;  // A child exited.
    unsigned char signals[64];
    const ssize_t n = read(control_fd, signals, sizeof signals);
    if (n == 0 || (n < 0 && errno != EINTR)) killing = true;  // The worker is gone.
    for (ssize_t i = 0; i < n; ++i) {
      if (signals[i] == SIGKILL) {
        killing = true;
      } else {
        SignalDescendants(self, signals[i]);
      }
    }
  }
}

// Back in the worker from here on.

}  // namespace

absl::Status HideFromCommands() {
  if (prctl(PR_SET_DUMPABLE, 0) != 0) {
    return absl::InternalError(absl::StrCat("prctl(PR_SET_DUMPABLE): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProcessTree>> ProcessTree::Start(const ProcessSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("no program to run");
  // Everything the supervisor and the main process need is built before fork: they may not
  // allocate.
  std::vector<char*> argv, envp;
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (const std::string& var : spec.env) envp.push_back(const_cast<char*>(var.c_str()));
  envp.push_back(nullptr);
  const int max_fd = static_cast<int>(std::min<long>(sysconf(_SC_OPEN_MAX), 1 << 16));

  // control: a socket, so that a signal sent after the supervisor has gone is EPIPE, never
  // SIGPIPE (MSG_NOSIGNAL).
  int out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1}, control[2] = {-1, -1},
      report[2] = {-1, -1};
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  auto close_all = [&] {
    for (int fd : {out[0], out[1], err[0], err[1], status[0], status[1], control[0], control[1],
                   report[0], report[1], null_fd}) {
      if (fd >= 0) close(fd);
    }
  };
  if (null_fd < 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
      pipe2(status, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    const int error = errno;
    close_all();
    return absl::InternalError(absl::StrCat("cannot make pipes: ", std::strerror(error)));
  }
  const pid_t supervisor = fork();
  if (supervisor == 0) {
    RunSupervisor(spec, argv.data(), envp.data(), control[0], report[1], null_fd, out[1], err[1],
                  status[1], max_fd);
  }
  if (supervisor < 0) {
    const int error = errno;
    close_all();
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", std::strerror(error)));
  }
  for (int* fd : {&out[1], &err[1], &status[1], &control[0], &report[1]}) {
    close(*fd);
    *fd = -1;
  }
  auto wait_for_supervisor = [&] {
    int ignored = 0;
    while (waitpid(supervisor, &ignored, 0) < 0 && errno == EINTR) {
    }
  };
  // EOF: exec succeeded (the descriptor is close-on-exec); an int: the errno it failed with.
  int error = 0;
  ssize_t n;
  do {
    n = read(status[0], &error, sizeof error);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof error) {
    close_all();  // The supervisor reaps the main process and exits.
    wait_for_supervisor();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", spec.argv[0], ": ", std::strerror(error)));
  }
  // Written before the supervisor closed its end of `status`.
  Report started;
  do {
    n = read(report[0], &started, sizeof started);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof started || started.kind != Report::kStarted) {
    close_all();
    wait_for_supervisor();
    return absl::InternalError("the trial's supervisor process did not start it");
  }
  close(status[0]);
  close(null_fd);
  for (int fd : {out[0], err[0], report[0]}) fcntl(fd, F_SETFL, O_NONBLOCK);
  return std::unique_ptr<ProcessTree>(
      new ProcessTree(supervisor, started.value, control[1], report[0], out[0], err[0]));
}

ProcessTree::~ProcessTree() {
  Signal(SIGKILL);
  close(control_fd_);  // Says the same, should the signal not have been read.
  const absl::Time deadline = absl::Now() + kProcessTreeKillTimeout;
  Reap();
  while (!Empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
    Reap();
  }
  if (!Empty()) {
    DHPT_LOG_WARNING(
        "process tree of %d still has processes %s after SIGKILL; its supervisor %d goes on "
        "killing them",
        main_pid_, absl::FormatDuration(kProcessTreeKillTimeout), supervisor_);
  }
  close(report_fd_);
  close(stdout_fd_);
  close(stderr_fd_);
}

void ProcessTree::Reap() {
  if (!supervisor_reaped_) {
    int status = 0;
    rusage usage{};
    pid_t reaped;
    do {
      reaped = wait4(supervisor_, &status, WNOHANG, &usage);
    } while (reaped < 0 && errno == EINTR);
    if (reaped == supervisor_) {
      supervisor_reaped_ = true;
      // Every process of the tree, reaped by the supervisor, and the supervisor's own (small)
      // time.
      cpu_seconds_ = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
    }
  }
  // After the wait: what the supervisor wrote before it exited is all in the pipe.
  ReadReports();
}

void ProcessTree::ReadReports() {
  Report report;
  while (read(report_fd_, &report, sizeof report) == sizeof report) {
    if (report.kind == Report::kMainExited) main_status_ = report.value;
    if (report.kind == Report::kUsage) {
      max_reaped_rss_bytes_ = static_cast<double>(report.max_rss_kilobytes) * 1024.0;
    }
  }
}

void ProcessTree::Signal(int signal) const {
  const auto byte = static_cast<unsigned char>(signal);
  (void)send(control_fd_, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void ProcessTree::SampleMemory() {
  if (supervisor_reaped_) return;
  std::unordered_multimap<pid_t, std::pair<pid_t, long>> children;  // ppid -> (pid, rss)
  ForEachProcess([&](pid_t pid) {
    ProcStat stat;
    if (ReadProcStat(pid, stat)) children.emplace(stat.ppid, std::make_pair(pid, stat.rss_pages));
  });
  long pages = 0;
  std::vector<pid_t> parents = {supervisor_};  // Its own memory is the worker's copy: not counted.
  size_t budget = children.size();  // Parent links read at different times cannot loop it.
  while (!parents.empty() && budget > 0) {
    const pid_t parent = parents.back();
    parents.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      pages += it->second.second;
      parents.push_back(it->second.first);
      --budget;
    }
  }
  max_sampled_rss_bytes_ =
      std::max(max_sampled_rss_bytes_, static_cast<double>(pages) * sysconf(_SC_PAGESIZE));
}

ProcessTreeUsage ProcessTree::usage() const {
  return {.cpu_seconds = cpu_seconds_,
          .peak_rss_bytes = std::max(max_reaped_rss_bytes_, max_sampled_rss_bytes_)};
}

}  // namespace dhpt::worker
