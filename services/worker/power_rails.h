#pragma once

// The energy of a trial on Jetson boards, from the INA3221 power monitors NVIDIA wires to the
// module's rails, read from sysfs like the GPU load (gpu_telemetry.h); tests use fake trees.
//
// Two driver layouts, under `root`:
//   L4T 32 (Nano, TX1, TX2, Xavier), NVIDIA's ina3221x IIO driver:
//     sys/bus/i2c/drivers/ina3221x/<bus>-<addr>/iio:device<N>/rail_name_<i>  ("POM_5V_IN")
//                                                             in_power<i>_input (mW), i = 0..2
//   L4T 34+ (Orin), the kernel's ina3221 hwmon driver:
//     sys/bus/i2c/drivers/ina3221/<bus>-<addr>/hwmon/hwmon<N>/in<i>_label  ("VDD_IN")
//                                                            in<i>_input (mV), curr<i>_input (mA),
//                                                            i = 1..3; power is their product.
// The board's power is its input rail when one is monitored (a label ending in "_IN": the
// module's whole input, VDD_IN on Orin, POM_5V_IN on the Nano), else the sum of every rail.
// Neither counts the carrier board. Where no INA3221 is found, nothing is reported: absent,
// never zero.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/worker/periodic_sampler.h"

namespace dhpt::worker {

// What capabilities.energy_telemetry announces when rails are found.
inline constexpr char kEnergyTelemetryIna3221[] = "ina3221";
// A board has two or three INA3221s of three channels each; more is not a board we know.
inline constexpr int kMaxPowerRails = 16;

class PowerRails {
 public:
  virtual ~PowerRails() = default;
  // "ina3221".
  virtual std::string source() const = 0;
  // What the total is, for the start-up log: "VDD_IN" or "sum of VDD_CPU_GPU_CV, VDD_SOC".
  virtual std::string description() const = 0;
  // The board's power now, in watts. UNAVAILABLE when a file cannot be read or parsed.
  virtual absl::StatusOr<double> TotalWatts() = 0;
};

// The INA3221 rails under `root` ("/" on the board). NOT_FOUND when there are none.
absl::StatusOr<std::unique_ptr<PowerRails>> OpenPowerRails(const std::string& root = "/");

struct EnergyUsage {
  int samples = 0;
  // Absent with fewer than two samples over a positive time: no energy can be integrated.
  std::optional<double> joules;
  std::optional<double> average_watts;
};

// Samples `rails` every `interval` from construction until Stop (once more at Stop, so that the
// integral spans the whole trial), and integrates the power over time with the trapezoid rule.
// Failed samples are skipped. The figures are the board's: trials sharing it share its power.
class PowerSampler {
 public:
  explicit PowerSampler(PowerRails* rails, absl::Duration interval = absl::Milliseconds(100));
  ~PowerSampler() { sampler_.Stop(); }
  PowerSampler(const PowerSampler&) = delete;
  PowerSampler& operator=(const PowerSampler&) = delete;

  EnergyUsage Stop();

 private:
  void Take() ABSL_LOCKS_EXCLUDED(mutex_);

  PowerRails* const rails_;
  absl::Mutex mutex_;
  int samples_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Time first_ ABSL_GUARDED_BY(mutex_);
  absl::Time last_ ABSL_GUARDED_BY(mutex_);
  double last_watts_ ABSL_GUARDED_BY(mutex_) = 0;
  double joules_ ABSL_GUARDED_BY(mutex_) = 0;
  PeriodicSampler sampler_;  // Last: it samples into the members above.
};

}  // namespace dhpt::worker
