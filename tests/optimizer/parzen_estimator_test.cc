#include "services/optimizer/parzen_estimator.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dhpt::optimizer {
namespace {

SearchSpace Unit() {
  return SearchSpace({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
}

TEST(TpeObservationWeightsTest, FlatForRecentRampForOld) {
  EXPECT_EQ(TpeObservationWeights(10), std::vector<double>(10, 1.0));
  std::vector<double> w = TpeObservationWeights(30);
  EXPECT_NEAR(w[0], 1.0 / 30, 1e-12);
  EXPECT_NEAR(w[4], 1.0, 1e-12);
  for (int i = 5; i < 30; ++i) EXPECT_EQ(w[i], 1.0);
  for (int i = 1; i < 5; ++i) EXPECT_GT(w[i], w[i - 1]);
}

TEST(ParzenEstimatorTest, UnivariateBandwidthsAreNeighbourGapsClippedPriorWide) {
  ParzenEstimator pe(Unit(), {0}, {{0.2}, {0.5}}, {1, 1}, {});
  ASSERT_EQ(pe.components(), 3);
  EXPECT_EQ(pe.mus(0), (std::vector<double>{0.2, 0.5, 0.5}));
  EXPECT_NEAR(pe.sigmas(0)[0], 0.3, 1e-12);
  EXPECT_NEAR(pe.sigmas(0)[1], 0.3, 1e-12);
  EXPECT_NEAR(pe.sigmas(0)[2], 1.0, 1e-12);
}

TEST(ParzenEstimatorTest, MultivariateBandwidthFollowsScottsRule) {
  SearchSpace space({{.name = "a", .kind = ParameterKind::kDouble, .min = 0, .max = 2},
                     {.name = "b", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  std::vector<double> observations;  // Row after row: (a, b).
  for (int k = 0; k < 20; ++k) observations.insert(observations.end(), {k / 10.0, k / 20.0});
  ParzenEstimator pe(space, {0, 1}, observations, std::vector<double>(20, 1.0),
                     {.multivariate = true});
  // 0.2 n^(-1/(d+4)) of the range; the 1/(n+2) floor does not bind at n = 20.
  const double expected = 0.2 * std::pow(20.0, -1.0 / 6.0);
  EXPECT_NEAR(pe.sigmas(0)[0], expected * 2, 1e-12);
  EXPECT_NEAR(pe.sigmas(1)[1], expected, 1e-12);
}

TEST(ParzenEstimatorTest, ContinuousDensityIntegratesToOne) {
  ParzenEstimator pe(Unit(), {0}, {{0.1}, {0.15}, {0.8}}, {1, 1, 1}, {});
  double integral = 0;
  const int steps = 20000;
  for (int i = 0; i < steps; ++i) integral += std::exp(pe.LogPdf({(i + 0.5) / steps})) / steps;
  EXPECT_NEAR(integral, 1.0, 1e-3);
  EXPECT_GT(pe.LogPdf({0.12}), pe.LogPdf({0.5}));
}

TEST(ParzenEstimatorTest, BandwidthWeightedKernelsMatchOptunaThreeOne) {
  // Optuna 3.1's _ParzenEstimator on the same data (computed with Debian's python3-optuna).
  ParzenEstimator pe(Unit(), {0}, {{0.2}, {0.5}, {0.9}, {0.1}}, {1, 1, 1, 1},
                     {.bandwidth_weighted = true});
  const double expected[] = {-0.93027869, -0.74643471, -0.86307479, -1.07644418};
  const double at[] = {0.0, 0.3, 0.7, 1.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(pe.LogPdf({at[i]}), expected[i], 1e-7);
}

TEST(ParzenEstimatorTest, LatticeMassesSumToOneAndSamplesStayOnTheLattice) {
  SearchSpace space({{.name = "n", .kind = ParameterKind::kInt, .min = 2, .max = 10, .step = 2}});
  ParzenEstimator pe(space, {0}, {{4}, {6}}, {1, 1}, {});
  double total = 0;
  for (int v = 2; v <= 10; v += 2) total += std::exp(pe.LogPdf({static_cast<double>(v)}));
  EXPECT_NEAR(total, 1.0, 1e-9);
  std::mt19937_64 generator(1);
  for (int i = 0; i < 200; ++i) {
    const double x = pe.Sample(generator)[0];
    EXPECT_GE(x, 2);
    EXPECT_LE(x, 10);
    EXPECT_EQ(std::fmod(x, 2.0), 0.0);
  }
}

TEST(ParzenEstimatorTest, CategoricalUsesSmoothedCounts) {
  SearchSpace space(
      {{.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}}});
  ParzenEstimator pe(space, {0}, {{0}, {0}, {1}}, {1, 1, 1}, {});
  // Components: two of [2/3, 1/6, 1/6], one of [1/6, 2/3, 1/6], the prior [1/3, 1/3, 1/3].
  EXPECT_NEAR(std::exp(pe.LogPdf({0})), 11.0 / 24, 1e-12);
  EXPECT_NEAR(std::exp(pe.LogPdf({1})), 8.0 / 24, 1e-12);
  EXPECT_NEAR(std::exp(pe.LogPdf({2})), 5.0 / 24, 1e-12);
}

}  // namespace
}  // namespace dhpt::optimizer
