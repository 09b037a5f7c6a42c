#pragma once

// What deploying a trained model would cost on this worker, measured one way for every trainer
// (docs/deployment-costs.md): the model's serialised size (each trainer's own format), the
// median time per row of single-threaded inference at batch 1 and at batch kDeploymentBatchRows
// on validation rows after a warm-up, and how much the process's peak memory grew during that
// inference. Only completed trials are measured; a cancel stops the measurement between calls.
//
// Bounded: a model so large that one call takes longer than the budget is measured by
// kMinMeasuredCalls calls at each batch size, so it costs a few calls, never the full counts.
//
// The peak memory is the process's (VmHWM after resetting it through /proc/self/clear_refs, as
// ResourceMeter does): with --slots > 1, or with a telemetry sampler running, what other threads
// allocate during the inference counts too.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/worker/datasets.h"
#include "services/worker/model_trainer.h"

namespace dhpt::worker {

// Rows per call of the batched measurement: kMetricInferenceLatencyBatchUs names it.
inline constexpr int kDeploymentBatchRows = 256;
// Measured calls at most, after the warm-up: single rows (each a different validation row),
// then full batches.
inline constexpr int kDefaultSingleRowCalls = 200;
inline constexpr int kDefaultBatchCalls = 10;
// Unmeasured calls before each batch size: first-call allocations, caches, lazy set-up.
inline constexpr int kDefaultWarmupCalls = 3;
// Measuring stops taking more calls once this much time is spent: half for single rows, the
// rest for batches. Small models finish their counts well within it.
inline constexpr absl::Duration kDefaultInferenceBudget = absl::Milliseconds(500);
// However slow the model, each batch size gets at least this many measured calls.
inline constexpr int kMinMeasuredCalls = 1;

struct InferenceBenchmarkOptions {
  int single_row_calls = kDefaultSingleRowCalls;
  int batch_calls = kDefaultBatchCalls;
  int warmup_calls = kDefaultWarmupCalls;
  int batch_rows = kDeploymentBatchRows;
  absl::Duration budget = kDefaultInferenceBudget;
  const std::atomic<bool>* cancelled = nullptr;
};

// Predicts `rows` consecutive rows of row-major features (the data's `cols` floats each).
using PredictRows = std::function<absl::Status(const float* features, int64_t rows)>;

struct InferenceCosts {
  double latency_us = 0;        // Median microseconds per row, one row per call.
  double batch_latency_us = 0;  // Median microseconds per call / batch_rows.
  int single_row_calls = 0;     // Calls measured (after the warm-up).
  int batch_calls = 0;
  std::optional<double> peak_rss_bytes;  // Growth of VmHWM; absent when /proc is not writable.
};

// Calls `predict` on rows of `validation` (batches cycle through its rows when it has fewer
// than batch_rows). INVALID_ARGUMENT for an empty validation split; CANCELLED when cancelled;
// the first error of `predict` as it is.
absl::StatusOr<InferenceCosts> MeasureInference(const Dataset& validation,
                                                const PredictRows& predict,
                                                const InferenceBenchmarkOptions& options = {});

struct DeploymentCosts {
  double model_bytes = 0;
  InferenceCosts inference;
};

// Writes the deployment metrics (model_catalog.h) into `metrics`.
void AddDeploymentMetrics(const DeploymentCosts& costs, TrainerMetrics& metrics);

}  // namespace dhpt::worker
