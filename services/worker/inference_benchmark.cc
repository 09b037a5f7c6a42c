#include "services/worker/inference_benchmark.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/worker/resource_meter.h"

namespace dhpt::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> values) {
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(middle), values.end());
  double median = values[middle];
  if (values.size() % 2 == 0) {
    median = (median + *std::max_element(values.begin(),
                                         values.begin() + static_cast<ptrdiff_t>(middle))) / 2;
  }
  return median;
}

// Times calls of `call(i)` until `max_calls` are measured or `deadline` has passed (with at least
// kMinMeasuredCalls), after `warmup` untimed calls. Returns each measured call's microseconds.
absl::StatusOr<std::vector<double>> TimeCalls(const std::function<absl::Status(int)>& call,
                                              int warmup, int max_calls, Clock::time_point deadline,
                                              const std::atomic<bool>* cancelled) {
  auto check_cancel = [cancelled] {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError("cancelled while measuring inference");
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < warmup && Clock::now() < deadline; ++i) {
    RETURN_IF_ERROR(check_cancel());
    RETURN_IF_ERROR(call(i));
  }
  std::vector<double> micros;
  const int calls = std::max(max_calls, kMinMeasuredCalls);
  for (int i = 0; i < calls; ++i) {
    if (static_cast<int>(micros.size()) >= kMinMeasuredCalls && Clock::now() >= deadline) break;
    RETURN_IF_ERROR(check_cancel());
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(call(warmup + i));
    micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return micros;
}

}  // namespace

absl::StatusOr<InferenceCosts> MeasureInference(const Dataset& validation,
                                                const PredictRows& predict,
                                                const InferenceBenchmarkOptions& options) {
  if (validation.rows < 1 || validation.cols < 1) {
    return absl::InvalidArgumentError("no validation rows to measure inference on");
  }
  const int64_t cols = validation.cols;
  const int64_t batch_rows = std::max(1, options.batch_rows);
  // The batch is built before the peak is reset: it is the harness's memory, not the model's.
  std::vector<float> batch(static_cast<size_t>(batch_rows * cols));
  for (int64_t row = 0; row < batch_rows; ++row) {
    const float* source = validation.features.data() + (row % validation.rows) * cols;
    std::copy(source, source + cols, batch.begin() + row * cols);
  }

  const std::optional<double> rss_at_start = ResetPeakRssWithinTrial();
  const Clock::time_point start = Clock::now();
  const auto budget = absl::ToChronoNanoseconds(options.budget);
  InferenceCosts costs;
  ASSIGN_OR_RETURN(
      std::vector<double> single,
      TimeCalls(
          [&](int i) {
            return predict(validation.features.data() + (i % validation.rows) * cols, 1);
          },
          options.warmup_calls, options.single_row_calls, start + budget / 2, options.cancelled));
  ASSIGN_OR_RETURN(std::vector<double> batched,
                   TimeCalls([&](int) { return predict(batch.data(), batch_rows); },
                             options.warmup_calls, options.batch_calls, start + budget,
                             options.cancelled));
  if (rss_at_start) {
    if (std::optional<double> peak = PeakRssBytes()) {
      costs.peak_rss_bytes = std::max(0.0, *peak - *rss_at_start);
    }
  }
  costs.single_row_calls = static_cast<int>(single.size());
  costs.batch_calls = static_cast<int>(batched.size());
  costs.latency_us = Median(std::move(single));
  costs.batch_latency_us = Median(std::move(batched)) / static_cast<double>(batch_rows);
  return costs;
}

void AddDeploymentMetrics(const DeploymentCosts& costs, TrainerMetrics& metrics) {
  metrics[std::string(kMetricModelBytes)] = costs.model_bytes;
  metrics[std::string(kMetricInferenceLatencyUs)] = costs.inference.latency_us;
  metrics[std::string(kMetricInferenceLatencyBatchUs)] = costs.inference.batch_latency_us;
  if (costs.inference.peak_rss_bytes) {
    metrics[std::string(kMetricInferencePeakRssBytes)] = *costs.inference.peak_rss_bytes;
  }
}

}  // namespace dhpt::worker
