#include "services/worker/resource_meter.h"

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

}  // namespace dhpt::worker
