#pragma once

// Per-trial measurements of the worker process (DESIGN.md §5): wall and CPU seconds from
// getrusage deltas, CPU utilisation (CPU seconds per wall second: 1.0 is one core busy), and the
// peak resident set of the trial, after resetting the high-water mark with
// /proc/self/clear_refs (value 5) and reading VmHWM. When trials share a worker (--slots > 1)
// these are the process's figures over the trial's span, which includes its neighbours.

#include <chrono>
#include <optional>

namespace dhpt::worker {

struct ResourceUsage {
  double wall_seconds = 0;
  double cpu_seconds = 0;
  double cpu_utilization = 0;
  std::optional<double> peak_rss_bytes;  // Absent when the high-water mark cannot be reset.
};

class ResourceMeter {
 public:
  // Starts measuring now (and resets the process's peak RSS).
  ResourceMeter();
  ResourceUsage Stop() const;

 private:
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_ = 0;
  bool peak_reset_ = false;
};

double ProcessCpuSeconds();
// VmHWM of this process in bytes, or nullopt when /proc is not readable.
std::optional<double> PeakRssBytes();

// Resets VmHWM in the middle of a trial (to measure one step's peak, as MeasureInference does)
// and returns it as it is right after the reset: the current RSS; nullopt when it cannot be
// reset. The peak before the reset is remembered, so a ResourceMeter spanning it still reports
// the trial's whole peak. Process-wide, like the meters themselves.
std::optional<double> ResetPeakRssWithinTrial();

// --- The worker's recent utilisation (issue 31: sent in each heartbeat) ---
class GpuReader;

struct WorkerUtilisationSample {
  // CPU seconds per wall second since the last sample: this process's and its descendants'
  // (a COMMAND trial's process tree counts while it runs, read from /proc, and once reaped).
  double cpu_cores = 0;
  double rss_bytes = 0;                // This process's resident memory now (VmRSS).
  std::optional<double> gpu_percent;   // 0-100; absent without a GPU reader or a reading.
  std::chrono::milliseconds interval{0};
};

// Measures between calls of Sample; the first call measures since construction.
// Used by one thread (the heartbeat loop).
class WorkerUtilisationMeter {
 public:
  explicit WorkerUtilisationMeter(GpuReader* gpu = nullptr);
  WorkerUtilisationSample Sample();

 private:
  GpuReader* const gpu_;  // Not owned; may be null.
  std::chrono::steady_clock::time_point last_wall_;
  double last_cpu_ = 0;
};

}  // namespace dhpt::worker
