#pragma once

// The seam between the shared worker runtime and trainers that live in their own libraries
// (the AutoEncoder's libtorch, which the CPU worker never links).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"
#include "services/worker/datasets.h"

namespace dhpt::worker {

// How one trial runs: the threads its trainer may use, the flag that cancels it, and where its
// intermediate values (step, value) go.
struct TrialContext {
  int threads = 1;
  const std::atomic<bool>* cancelled = nullptr;
  std::function<void(int64_t step, double value)> progress;
  // Also measure what deploying the trained model would cost (inference_benchmark.h), once
  // training completes. The trial runner sets it; tests of training alone leave it off.
  bool measure_deployment = false;
};

// Tuned and fixed hyperparameters by name.
using Hyperparameters = std::map<std::string, v1::ParameterValue>;
// What a trainer reports: the objective among them (r2, mse, ...).
using TrainerMetrics = std::map<std::string, double>;

class ModelTrainer {
 public:
  virtual ~ModelTrainer() = default;
  // Where this trainer's trials run: "cpu", "cuda:0".
  virtual std::string device() const = 0;
  // Trains on data.train and scores on data.validation. Errors: INVALID_ARGUMENT for bad
  // hyperparameters or data, CANCELLED when `context.cancelled` was set, others for failures.
  virtual absl::StatusOr<TrainerMetrics> Train(const SplitDataset& data,
                                               const Hyperparameters& params,
                                               const TrialContext& context) = 0;
};

}  // namespace dhpt::worker
