#include "services/worker/resource_meter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace dhpt::worker {
namespace {

TEST(ResourceMeterTest, MeasuresCpuBusyWork) {
  ResourceMeter meter;
  volatile double sink = 0;
  for (int round = 0; round < 100000 && meter.Stop().cpu_seconds < 0.05; ++round) {
    for (int i = 0; i < 100000; ++i) sink = sink + i * 0.5;
  }
  ResourceUsage usage = meter.Stop();
  EXPECT_GE(usage.cpu_seconds, 0.05);
  EXPECT_GT(usage.wall_seconds, 0);
  EXPECT_GT(usage.cpu_utilization, 0.1);
}

TEST(ResourceMeterTest, PeakRssSeesAnAllocationMadeDuringTheTrial) {
  ResourceMeter before;
  const double baseline = before.Stop().peak_rss_bytes.value_or(0);
  ResourceMeter meter;
  std::vector<char> block(64 << 20);
  std::memset(block.data(), 1, block.size());
  ResourceUsage usage = meter.Stop();
  ASSERT_TRUE(usage.peak_rss_bytes.has_value()) << "clear_refs not writable here";
  EXPECT_GE(*usage.peak_rss_bytes, baseline + (60 << 20));
  block.clear();
  block.shrink_to_fit();
  // After the reset, a new measurement no longer carries the old peak.
  ResourceMeter after;
  EXPECT_LT(*after.Stop().peak_rss_bytes, *usage.peak_rss_bytes - (32 << 20));
}

// An inference measurement resets the mark mid-trial; the trial still reports its training peak.
TEST(ResourceMeterTest, AResetWithinTheTrialKeepsTheTrialsPeak) {
  ResourceMeter meter;
  const double baseline = PeakRssBytes().value_or(0);
  {
    std::vector<char> block(64 << 20);
    std::memset(block.data(), 1, block.size());
  }
  const std::optional<double> after_reset = ResetPeakRssWithinTrial();
  ASSERT_TRUE(after_reset.has_value()) << "clear_refs not writable here";
  EXPECT_LT(*after_reset, baseline + (32 << 20));  // The block is gone from the new mark.
  EXPECT_GE(*meter.Stop().peak_rss_bytes, baseline + (60 << 20));
  // A new trial starts afresh.
  ResourceMeter next;
  EXPECT_LT(*next.Stop().peak_rss_bytes, baseline + (32 << 20));
}

}  // namespace
}  // namespace dhpt::worker
