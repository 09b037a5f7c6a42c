#pragma once

// The shared main of the worker binaries: flags, capabilities, signal handling and shutdown.

#include <vector>

#include "dhpt/v1/worker_service.pb.h"

namespace dhpt::worker {

struct WorkerKind {
  const char* binary;  // "dhpt-cpu-worker"
  v1::WorkerCapabilities::DeviceKind device_kind;
  const char* device_name;
  std::vector<v1::Model::Kind> models;
};

int WorkerMain(int argc, char** argv, const WorkerKind& kind);

}  // namespace dhpt::worker
