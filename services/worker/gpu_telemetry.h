#pragma once

// GPU telemetry without a build dependency on any NVIDIA library: NVML is loaded at run time
// with dlopen("libnvidia-ml.so.1") (discrete GPUs, the amd64 CUDA image), and Jetson boards,
// where NVML is absent or reports no utilisation, are read from the GPU load file in sysfs.
// A GpuSampler polls a reader on a PeriodicSampler while a trial runs (about 10 Hz) and
// reports the average and the peak. Readers are safe to call from several threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/worker/periodic_sampler.h"

namespace dhpt::worker {

struct GpuDevice {
  std::string name;                          // "NVIDIA H200", "NVIDIA Jetson Orin Nano ..."
  std::optional<uint64_t> memory_total_bytes;  // Shared with the CPU on Jetson boards.
  std::string source;                        // "nvml" or "jetson-sysfs"
};

struct GpuSample {
  double utilization = 0;                      // 0..1, busy share of the last interval
  std::optional<double> memory_used_bytes;     // Absent where the device does not report it.
};

class GpuReader {
 public:
  virtual ~GpuReader() = default;
  virtual const GpuDevice& device() const = 0;
  virtual absl::StatusOr<GpuSample> Sample() = 0;
};

// NVML device `index` (0 in a container that sees only its own GPU). UNAVAILABLE when the
// library cannot be loaded or NVML finds no such device; the message says why.
absl::StatusOr<std::unique_ptr<GpuReader>> OpenNvmlReader(
    const std::string& library = "libnvidia-ml.so.1", unsigned index = 0);

// A Jetson board under `root` ("/" on the board; a fake tree in tests): the GPU load file
// (per mille) of the Nano (gpu.0) or the Orin (17000000.gpu / 17000000.ga10b), the board's
// name from the device tree and the shared memory from /proc/meminfo. NOT_FOUND when `root`
// has no load file.
absl::StatusOr<std::unique_ptr<GpuReader>> OpenJetsonReader(const std::string& root = "/");

// Jetson first, then NVML. NOT_FOUND, naming both reasons, when neither is there.
absl::StatusOr<std::unique_ptr<GpuReader>> DetectGpuReader(
    const std::string& sysfs_root = "/", const std::string& nvml_library = "libnvidia-ml.so.1");

struct GpuUsage {
  int samples = 0;
  double utilization_avg = 0;
  double utilization_peak = 0;
  std::optional<double> memory_used_avg_bytes;
  std::optional<double> memory_used_peak_bytes;
};

// Samples `reader` every `interval` from construction until Stop (or destruction). Samples
// that fail are skipped; with none at all, Stop returns samples == 0. The figures are the
// device's, so trials sharing a GPU see each other's load.
class GpuSampler {
 public:
  explicit GpuSampler(GpuReader* reader, absl::Duration interval = absl::Milliseconds(100));
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  GpuUsage Stop();

 private:
  void Take() ABSL_LOCKS_EXCLUDED(mutex_);

  GpuReader* const reader_;
  absl::Mutex mutex_;
  GpuUsage usage_ ABSL_GUARDED_BY(mutex_);
  double utilization_sum_ ABSL_GUARDED_BY(mutex_) = 0;
  double memory_sum_ ABSL_GUARDED_BY(mutex_) = 0;
  int memory_samples_ ABSL_GUARDED_BY(mutex_) = 0;
  PeriodicSampler sampler_;  // Last: it samples into the members above.
};

}  // namespace dhpt::worker
