#include "services/worker/inference_benchmark.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

namespace dhpt::worker {
namespace {

using Clock = std::chrono::steady_clock;

Dataset Rows(int64_t rows, int64_t cols) {
  Dataset data;
  data.rows = rows;
  data.cols = cols;
  data.features.assign(static_cast<size_t>(rows * cols), 1.0f);
  return data;
}

// Work proportional to the rows, as a model's inference is; the sum keeps it from being elided.
absl::Status Compute(const float* features, int64_t rows, int64_t cols, int64_t work_per_row) {
  volatile double sink = 0;
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t k = 0; k < work_per_row; ++k) sink = sink + features[row * cols + k % cols];
  }
  return absl::OkStatus();
}

// Spins (a model slower than the budget), never sleeps: the point is CPU time passing.
absl::Status Spin(std::chrono::milliseconds duration) {
  const Clock::time_point end = Clock::now() + duration;
  while (Clock::now() < end) {
  }
  return absl::OkStatus();
}

TEST(InferenceBenchmarkTest, MoreWorkPerRowTakesLonger) {
  const Dataset data = Rows(50, 4);
  auto measure = [&](int64_t work) {
    absl::StatusOr<InferenceCosts> costs = MeasureInference(
        data, [&](const float* f, int64_t rows) { return Compute(f, rows, 4, work); });
    EXPECT_TRUE(costs.ok()) << costs.status();
    return *costs;
  };
  const InferenceCosts light = measure(100);
  const InferenceCosts heavy = measure(100000);
  EXPECT_GT(light.latency_us, 0);
  EXPECT_GT(heavy.latency_us, 10 * light.latency_us);
  EXPECT_GT(heavy.batch_latency_us, 10 * light.batch_latency_us);
  EXPECT_EQ(light.single_row_calls, kDefaultSingleRowCalls);
  EXPECT_EQ(light.batch_calls, kDefaultBatchCalls);
}

TEST(InferenceBenchmarkTest, BatchesCycleThroughFewRowsAndReportPerRow) {
  const Dataset data = Rows(3, 2);  // Fewer rows than a batch.
  int64_t largest_call = 0;
  absl::StatusOr<InferenceCosts> costs =
      MeasureInference(data, [&](const float* f, int64_t rows) {
        largest_call = std::max(largest_call, rows);
        return Compute(f, rows, 2, 10000);
      });
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_EQ(largest_call, kDeploymentBatchRows);
  // The same work per row, so the per-row figures are of one order (not 256 times apart, as an
  // undivided batch time would be); the bound leaves room for a loaded machine.
  EXPECT_LT(costs->batch_latency_us, 16 * costs->latency_us);
  EXPECT_GT(costs->batch_latency_us, costs->latency_us / 16);
}

TEST(InferenceBenchmarkTest, ASlowModelCostsFewCallsNotTheFullCounts) {
  const Dataset data = Rows(10, 2);
  InferenceBenchmarkOptions options;
  options.budget = absl::Milliseconds(40);
  const Clock::time_point start = Clock::now();
  absl::StatusOr<InferenceCosts> costs = MeasureInference(
      data, [](const float*, int64_t) { return Spin(std::chrono::milliseconds(25)); }, options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(costs.ok()) << costs.status();
  EXPECT_GE(costs->single_row_calls, kMinMeasuredCalls);
  EXPECT_GE(costs->batch_calls, kMinMeasuredCalls);
  EXPECT_LT(costs->single_row_calls + costs->batch_calls, 4);
  EXPECT_GE(costs->latency_us, 25000);
  // A warm-up call and one measured call per batch size at most, each 25 ms.
  EXPECT_LT(seconds, 0.4);
}

TEST(InferenceBenchmarkTest, SeesMemoryTheInferenceAllocates) {
  const Dataset data = Rows(10, 2);
  InferenceBenchmarkOptions few;
  few.warmup_calls = 1;
  few.single_row_calls = 2;
  few.batch_calls = 2;
  absl::StatusOr<InferenceCosts> costs = MeasureInference(
      data,
      [](const float*, int64_t) {
        std::vector<char> scratch(32 << 20, 1);  // Touched: resident.
        volatile char sink = scratch[scratch.size() / 2];
        (void)sink;
        return absl::OkStatus();
      },
      few);
  ASSERT_TRUE(costs.ok()) << costs.status();
  ASSERT_TRUE(costs->peak_rss_bytes.has_value()) << "clear_refs not writable here";
  EXPECT_GE(*costs->peak_rss_bytes, 24 << 20);
}

TEST(InferenceBenchmarkTest, CancelErrorsAndEmptyData) {
  const Dataset data = Rows(10, 2);
  std::atomic<bool> cancelled = true;
  InferenceBenchmarkOptions options;
  options.cancelled = &cancelled;
  auto ok = [](const float*, int64_t) { return absl::OkStatus(); };
  EXPECT_TRUE(absl::IsCancelled(MeasureInference(data, ok, options).status()));
  EXPECT_EQ(MeasureInference(data,
                             [](const float*, int64_t) { return absl::InternalError("boom"); })
                .status()
                .message(),
            "boom");
  EXPECT_EQ(MeasureInference(Rows(0, 2), ok).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(InferenceBenchmarkTest, MetricsCarryTheCatalogNames) {
  DeploymentCosts costs;
  costs.model_bytes = 1234;
  costs.inference.latency_us = 5;
  costs.inference.batch_latency_us = 0.5;
  TrainerMetrics metrics;
  AddDeploymentMetrics(costs, metrics);
  EXPECT_EQ(metrics.at("model_bytes"), 1234);
  EXPECT_EQ(metrics.at("inference_latency_us"), 5);
  EXPECT_EQ(metrics.at("inference_latency_batch256_us"), 0.5);
  EXPECT_FALSE(metrics.contains("inference_peak_rss_bytes"));  // Absent, not zero.
}

}  // namespace
}  // namespace dhpt::worker
