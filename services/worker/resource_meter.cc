#include "services/worker/resource_meter.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace dhpt::worker {

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::optional<double> PeakRssBytes() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return std::nullopt;
  char line[256];
  std::optional<double> peak;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    long kib = 0;
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) {
      peak = static_cast<double>(kib) * 1024.0;
      break;
    }
  }
  std::fclose(status);
  return peak;
}

namespace {
bool ResetPeakRss() {
  FILE* clear_refs = std::fopen("/proc/self/clear_refs", "w");
  if (clear_refs == nullptr) return false;
  const bool ok = std::fputs("5", clear_refs) >= 0;
  return std::fclose(clear_refs) == 0 && ok;
}
}  // namespace

ResourceMeter::ResourceMeter()
    : wall_start_(std::chrono::steady_clock::now()),
      cpu_start_(ProcessCpuSeconds()),
      peak_reset_(ResetPeakRss()) {}

ResourceUsage ResourceMeter::Stop() const {
  ResourceUsage usage;
  usage.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  usage.cpu_seconds = ProcessCpuSeconds() - cpu_start_;
  usage.cpu_utilization = usage.wall_seconds > 0 ? usage.cpu_seconds / usage.wall_seconds : 0;
  if (peak_reset_) usage.peak_rss_bytes = PeakRssBytes();
  return usage;
}

}  // namespace dhpt::worker
