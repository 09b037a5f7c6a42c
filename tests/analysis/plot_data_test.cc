// The plots' data: bounded by kMaxPointsPerSeries, axes covering every trial, and clear
// answers to plots a study cannot have.

#include "services/analysis/plot_data.h"

#include <gtest/gtest.h>

namespace dhpt::analysis {
namespace {

TEST(DownsampleTest, KeepsAtMostMaxEvenlyPlusTheKeptOnes) {
  const std::vector<size_t> kept = Downsample(100'000, 100, {77'777});
  EXPECT_LE(kept.size(), 101u);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), 99'999u);
  EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), 77'777u));
  EXPECT_EQ(Downsample(5, 100).size(), 5u);
}

}  // namespace
}  // namespace dhpt::analysis
