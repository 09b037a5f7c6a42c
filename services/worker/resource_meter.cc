#include "services/worker/resource_meter.h"

#include "services/worker/gpu_telemetry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/numbers.h"

namespace dhpt::worker {

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Plain open/read: this runs twice per trial, so no stdio buffers.
std::optional<double> PeakRssBytes() {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char text[4096];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return std::nullopt;
  text[n] = '\0';
  const char* line = std::strstr(text, "VmHWM:");
  long kib = 0;
  if (line == nullptr || std::sscanf(line, "VmHWM: %ld kB", &kib) != 1) return std::nullopt;
  return static_cast<double>(kib) * 1024.0;
}

namespace {

// The highest VmHWM seen just before a reset within a trial, in bytes: 0 when none since the
// last meter started.
std::atomic<int64_t> peak_before_resets{0};

bool ResetPeakRss() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}
bool ResetPeakRssForMeter() {
  peak_before_resets.store(0);
  return ResetPeakRss();
}

}  // namespace

std::optional<double> ResetPeakRssWithinTrial() {
  if (std::optional<double> peak = PeakRssBytes()) {
    int64_t seen = peak_before_resets.load();
    const auto bytes = static_cast<int64_t>(*peak);
    while (seen < bytes && !peak_before_resets.compare_exchange_weak(seen, bytes)) {
    }
  }
  if (!ResetPeakRss()) return std::nullopt;
  return PeakRssBytes();
}

ResourceMeter::ResourceMeter()
    : wall_start_(std::chrono::steady_clock::now()),
      cpu_start_(ProcessCpuSeconds()),
      peak_reset_(ResetPeakRssForMeter()) {}

ResourceUsage ResourceMeter::Stop() const {
  ResourceUsage usage;
  usage.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  usage.cpu_seconds = ProcessCpuSeconds() - cpu_start_;
  usage.cpu_utilization = usage.wall_seconds > 0 ? usage.cpu_seconds / usage.wall_seconds : 0;
  if (peak_reset_) {
    if (std::optional<double> peak = PeakRssBytes()) {
      usage.peak_rss_bytes =
          std::max(*peak, static_cast<double>(peak_before_resets.load()));
    }
  }
  return usage;
}

namespace {

// The user and system time of this process's live descendants (a COMMAND trial's supervisor
// and every process under it), each with the time of the children it has reaped: utime, stime,
// cutime and cstime of /proc/PID/stat. A process counts here while it lives, and in its
// parent's reaped time once reaped (for the worker's supervisors, RUSAGE_CHILDREN): never in
// both. A process that leaves the tree (re-parented to init) stops counting.
double LiveDescendantsCpuSeconds() {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  std::unordered_map<pid_t, double> ticks;
  while (const dirent* entry = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // It ended meanwhile.
    char text[1024];
    const ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) continue;
    text[n] = '\0';
    // The command name (field 2) may hold spaces and parentheses: the fields after it follow
    // its last ')'.
    const char* after_name = std::strrchr(text, ')');
    char state = 0;
    int ppid = 0;
    unsigned long utime = 0, stime = 0;
    long cutime = 0, cstime = 0;
    if (after_name == nullptr ||
        std::sscanf(after_name + 1, " %c %d %*d %*d %*d %*d %*u %*lu %*lu %*lu %*lu %lu %lu %ld %ld",
                    &state, &ppid, &utime, &stime, &cutime, &cstime) != 6) {
      continue;
    }
    children[ppid].push_back(pid);
    ticks[pid] = static_cast<double>(utime + stime) + static_cast<double>(cutime + cstime);
  }
  closedir(proc);
  double total = 0;
  std::vector<pid_t> todo = {getpid()};
  std::unordered_set<pid_t> seen = {getpid()};  // /proc is read as it changes: no cycles.
  while (!todo.empty()) {
    const pid_t parent = todo.back();
    todo.pop_back();
    auto it = children.find(parent);
    if (it == children.end()) continue;
    for (pid_t child : it->second) {
      if (!seen.insert(child).second) continue;
      total += ticks[child];
      todo.push_back(child);
    }
  }
  return total / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// This process's, its reaped children's and its live descendants' user and system time: a
// COMMAND trial's processes count while they run, not only once they have ended.
double TreeCpuSeconds() {
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) +
         seconds(children.ru_stime) + LiveDescendantsCpuSeconds();
}

double CurrentRssBytes() {
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[4096];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  const char* line = std::strstr(text, "VmRSS:");
  long kib = 0;
  if (line == nullptr || std::sscanf(line, "VmRSS: %ld kB", &kib) != 1) return 0;
  return static_cast<double>(kib) * 1024.0;
}

}  // namespace

WorkerUtilisationMeter::WorkerUtilisationMeter(GpuReader* gpu)
    : gpu_(gpu), last_wall_(std::chrono::steady_clock::now()), last_cpu_(TreeCpuSeconds()) {}

WorkerUtilisationSample WorkerUtilisationMeter::Sample() {
  const auto now = std::chrono::steady_clock::now();
  const double cpu = TreeCpuSeconds();
  WorkerUtilisationSample sample;
  sample.interval = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_wall_);
  const double wall = std::chrono::duration<double>(now - last_wall_).count();
  sample.cpu_cores = wall > 0 ? std::max(0.0, cpu - last_cpu_) / wall : 0;
  sample.rss_bytes = CurrentRssBytes();
  if (gpu_ != nullptr) {
    if (absl::StatusOr<GpuSample> gpu = gpu_->Sample(); gpu.ok()) {
      sample.gpu_percent = std::clamp(gpu->utilization * 100, 0.0, 100.0);
    }
  }
  last_wall_ = now;
  last_cpu_ = cpu;
  return sample;
}

}  // namespace dhpt::worker
