#pragma once

// The shared main of the worker binaries: flags, capabilities, signal handling and shutdown.
// Each binary adds its own flags and a setup step that decides its device and trainers.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/trial_runner.h"

namespace dhpt::worker {

// What a worker binary announces and runs, decided once its flags are parsed.
struct WorkerSetup {
  v1::WorkerCapabilities::DeviceKind device_kind = v1::WorkerCapabilities::CPU;
  std::string device_name = "cpu";
  uint64_t device_memory_bytes = 0;
  std::string gpu_telemetry;  // "nvml", "jetson-sysfs" or empty
  std::vector<v1::Model::Kind> models;
  TrialRunnerOptions runner;
};

struct WorkerKind {
  const char* binary = "";   // "dhpt-cpu-worker"
  const char* purpose = "";  // One line for --help.
  const char* label = "cpu";  // The `kind` label of its metrics: "cpu" or "gpu".
  // Libraries of its own for --version, after gRPC's and XGBoost's: ", libtorch 1.13.0".
  std::string library_versions;
  // The binary's own flags that DHPT_<FLAG> variables may set.
  std::vector<absl::string_view> own_flags;
  // Called after the flags are parsed. An error is printed and the worker exits with status 1
  // (FAILED_PRECONDITION: the node cannot host this worker) or 2 (a bad flag).
  std::function<absl::StatusOr<WorkerSetup>()> setup;
};

int WorkerMain(int argc, char** argv, const WorkerKind& kind);

}  // namespace dhpt::worker
