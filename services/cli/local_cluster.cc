#include "services/cli/local_cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dhpt::cli {
namespace {

// Starts `argv` with stdout to `stdout_fd` (or inherited when -1) and stderr to `stderr_fd`.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int stdout_fd, int stderr_fd) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // The parent died before prctl took effect.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Ctrl-C reaches the CLI, which stops the children in order; not the children directly.
    setpgid(0, 0);
    if (stdout_fd >= 0) dup2(stdout_fd, STDOUT_FILENO);
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// Reads the scheduler's "listening on HOST:PORT" line.
absl::StatusOr<std::string> ReadListenLine(int fd, pid_t pid, absl::Duration timeout) {
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
        if (absl::StartsWith(line, "listening on ")) return line.substr(13);
        return absl::InternalError(absl::StrCat("unexpected scheduler output: ", line));
      }
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return absl::InternalError("dhpt-scheduler exited during start-up (see its log above)");
    }
  }
  return absl::DeadlineExceededError("dhpt-scheduler did not report its port in time");
}

}  // namespace

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
  absl::StatusOr<pid_t> pid =
      Spawn({scheduler, "--listen=127.0.0.1:0", "--heartbeat_interval=1s"}, pipe_fds[1], log_fd);
  close(pipe_fds[1]);
  if (!pid.ok()) {
    close(pipe_fds[0]);
    if (log_fd >= 0) close(log_fd);
    return pid.status();
  }
  cluster.children_.push_back(*pid);
  absl::StatusOr<std::string> address = ReadListenLine(pipe_fds[0], *pid, absl::Seconds(15));
  close(pipe_fds[0]);
  if (!address.ok()) {
    if (log_fd >= 0) close(log_fd);
    cluster.Stop();
    return address.status();
  }
  cluster.address_ = *address;
  struct WorkerBinary {
    const char* binary;
    const char* id_prefix;
    int count;
  };
  for (const WorkerBinary& kind : {WorkerBinary{"dhpt-cpu-worker", "local-cpu-", options.cpu_workers},
                                   WorkerBinary{"dhpt-gpu-worker", "local-gpu-", options.gpu_workers}}) {
    for (int i = 1; i <= kind.count; ++i) {
      absl::StatusOr<pid_t> worker_pid =
          Spawn({absl::StrCat(options.binary_dir, "/", kind.binary), "--scheduler=" + cluster.address_,
                 absl::StrCat("--slots=", options.slots),
                 absl::StrCat("--threads_per_trial=", options.threads_per_trial),
                 absl::StrCat("--worker_id=", kind.id_prefix, i)},
                -1, log_fd);
      if (!worker_pid.ok()) {
        if (log_fd >= 0) close(log_fd);
        cluster.Stop();
        return worker_pid.status();
      }
      cluster.children_.push_back(*worker_pid);
    }
  }
  if (log_fd >= 0) close(log_fd);
  return cluster;
}

LocalCluster::LocalCluster(LocalCluster&& other) noexcept
    : address_(std::move(other.address_)), children_(std::move(other.children_)) {
  other.children_.clear();
}

LocalCluster::~LocalCluster() { Stop(); }

void LocalCluster::Stop(absl::Duration grace) {
  if (children_.empty()) return;
  // Workers first, so that they give back their trials while the scheduler still listens.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) kill(*it, SIGTERM);
  const absl::Time deadline = absl::Now() + grace;
  std::vector<pid_t> alive = children_;
  while (!alive.empty() && absl::Now() < deadline) {
    std::erase_if(alive, [](pid_t pid) {
      int status = 0;
      return waitpid(pid, &status, WNOHANG) == pid;
    });
    if (!alive.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  for (pid_t pid : alive) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  children_.clear();
}

}  // namespace dhpt::cli
