#pragma once

// Runs one assigned trial to a TrialResult: loads the (cached) dataset, trains or evaluates,
// measures, and turns every error into a FAILED result with the reason. Used by the worker
// runtime and, with no scheduler at all, by sequential runs.

#include <atomic>
#include <functional>
#include <string>

#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/datasets.h"

namespace dhpt::worker {

struct TrialContext {
  int threads = 1;
  const std::atomic<bool>* cancelled = nullptr;
  std::function<void(int64_t step, double value)> progress;
};

class TrialRunner {
 public:
  // `device` is reported with every result ("cpu").
  explicit TrialRunner(std::string device = "cpu") : device_(std::move(device)) {}
  v1::TrialResult Run(const v1::Assign& assign, const TrialContext& context);

 private:
  std::string device_;
  DatasetCache datasets_;
};

}  // namespace dhpt::worker
