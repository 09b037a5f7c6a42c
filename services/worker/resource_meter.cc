#include "services/worker/resource_meter.h"

#include "services/worker/gpu_telemetry.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

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

// This process's and its reaped children's user and system time.
double TreeCpuSeconds() {
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return seconds(self.ru_utime) + seconds(self.ru_stime) + seconds(children.ru_utime) +
         seconds(children.ru_stime);
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
