#include "services/cli/child_process.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace dhpt::cli {
namespace {

// The resident size from /proc/PID/statm (its second field, in pages); 0 when unreadable.
double ResidentBytes(pid_t pid) {
  std::ifstream statm(absl::StrCat("/proc/", pid, "/statm"));
  long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double Seconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

}  // namespace

PeakRssSampler::PeakRssSampler(absl::Duration interval)
    : interval_(interval), thread_([this] {
        while (!stop_.WaitForNotificationWithTimeout(interval_)) SampleAll();
      }) {}

PeakRssSampler::~PeakRssSampler() {
  stop_.Notify();
  thread_.join();
}

void PeakRssSampler::Watch(pid_t pid) {
  absl::MutexLock lock(&mutex_);
  peaks_.try_emplace(pid, 0.0);
}

double PeakRssSampler::Peak(pid_t pid) {
  absl::MutexLock lock(&mutex_);
  auto it = peaks_.find(pid);
  return it == peaks_.end() ? 0 : it->second;
}

void PeakRssSampler::Forget(pid_t pid) {
  absl::MutexLock lock(&mutex_);
  peaks_.erase(pid);
}

void PeakRssSampler::SampleAll() {
  absl::MutexLock lock(&mutex_);
  for (auto& [pid, peak] : peaks_) peak = std::max(peak, ResidentBytes(pid));
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    std::string name, const std::vector<std::string>& argv, int stdout_fd, int stderr_fd,
    PeakRssSampler* sampler) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);  // The parent died before prctl took effect.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
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
  if (sampler != nullptr) sampler->Watch(pid);
  return std::unique_ptr<ChildProcess>(new ChildProcess(std::move(name), pid, sampler));
}

ChildProcess::~ChildProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    Wait();
  }
  if (sampler_ != nullptr) sampler_->Forget(pid_);
}

void ChildProcess::Signal(int signal) const {
  if (!exited_) kill(pid_, signal);
}

bool ChildProcess::Poll() {
  if (exited_) return true;
  int status = 0;
  ::rusage usage{};
  if (wait4(pid_, &status, WNOHANG, &usage) == pid_) Reaped(status, usage);
  return exited_;
}

void ChildProcess::Wait() {
  while (!exited_) {
    int status = 0;
    ::rusage usage{};
    const pid_t reaped = wait4(pid_, &status, 0, &usage);
    if (reaped == pid_) {
      Reaped(status, usage);
    } else if (reaped < 0 && errno != EINTR) {
      exited_ = true;  // Not our child any more (reaped elsewhere): nothing to measure.
      end_ = absl::Now();
    }
  }
}

void ChildProcess::Reaped(int status, const ::rusage& usage) {
  exited_ = true;
  wait_status_ = status;
  end_ = absl::Now();
  cpu_seconds_ = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
  peak_rss_bytes_ = static_cast<double>(usage.ru_maxrss) * 1024.0;  // ru_maxrss is in KiB.
  if (sampler_ != nullptr) peak_rss_bytes_ = std::max(peak_rss_bytes_, sampler_->Peak(pid_));
}

double ChildProcess::CpuSecondsSoFar() const {
  std::ifstream file(absl::StrCat("/proc/", pid_, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // Fields after the command name, which may hold spaces and ends at the last ')': state is
  // field 3, utime and stime are fields 14 and 15.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(name_end + 2), ' ');
  double utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) ||
      !absl::SimpleAtod(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

v1::ProcessUsage ChildProcess::Usage() const {
  v1::ProcessUsage usage;
  usage.set_name(name_);
  usage.set_cpu_seconds(cpu_seconds_);
  usage.set_peak_rss_bytes(peak_rss_bytes_);
  usage.set_wall_seconds(absl::ToDoubleSeconds((exited_ ? end_ : absl::Now()) - start_));
  return usage;
}

}  // namespace dhpt::cli
