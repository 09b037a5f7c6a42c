#include "services/optimizer/pareto.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "services/common/random.h"

namespace dhpt::optimizer {
namespace {

using Rows = std::vector<std::vector<double>>;
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ParetoTest, DominanceAndConstrainedDominance) {
  EXPECT_TRUE(Dominates(std::vector<double>{1, 2}, std::vector<double>{1, 3}));
  EXPECT_FALSE(Dominates(std::vector<double>{1, 3}, std::vector<double>{1, 2}));
  EXPECT_FALSE(Dominates(std::vector<double>{1, 2}, std::vector<double>{1, 2}));  // Equal.
  EXPECT_FALSE(Dominates(std::vector<double>{0, 3}, std::vector<double>{1, 2}));  // Trade-off.
  const std::vector<double> good{0, 0}, bad{9, 9};
  EXPECT_TRUE(ConstrainedDominates(bad, 0, good, 0.1));  // Feasible beats infeasible.
  EXPECT_FALSE(ConstrainedDominates(good, 0.1, bad, 0));
  EXPECT_TRUE(ConstrainedDominates(bad, 0.1, good, 0.2));  // Both infeasible: by violation.
  EXPECT_FALSE(ConstrainedDominates(good, 0.2, bad, 0.2));
  EXPECT_TRUE(ConstrainedDominates(good, 0, bad, 0));
}

TEST(ParetoTest, LossesFollowDirectionsAndNanIsWorst) {
  EXPECT_EQ(ToLosses(std::vector<double>{1, 2}, {true, false}), (std::vector<double>{1, -2}));
  EXPECT_EQ(ToLosses(std::vector<double>{NAN}, {false})[0], kInf);
}

TEST(ParetoTest, FrontIndicesWithDirectionsAndDuplicates) {
  // Maximise r2, minimise latency.
  const Rows values = {{0.9, 10}, {0.8, 5}, {0.7, 6}, {0.9, 10}, {0.95, 20}, {0.5, 5}};
  // (0.7, 6) is beaten by (0.8, 5), (0.5, 5) by (0.8, 5); the duplicate (0.9, 10) stays twice.
  EXPECT_EQ(ParetoFrontIndices(values, {false, true}), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(ParetoFrontIndices({}, {true, true}), std::vector<int>{});
}

TEST(ParetoTest, NonDominatedRanksByHand) {
  const Rows losses = {{1, 5}, {2, 3}, {4, 1}, {3, 4}, {5, 5}, {2, 3}};
  EXPECT_EQ(NonDominatedRanks(losses), (std::vector<int>{0, 0, 0, 1, 2, 0}));
  // Stopping once enough are ranked: the first front holds 4 >= 2 rows.
  EXPECT_EQ(NonDominatedRanks(losses, {}, 2), (std::vector<int>{0, 0, 0, -1, -1, 0}));
  // Constrained: the feasible rows first (rows 3 and 4), then infeasible by violation, equal
  // violations sharing a rank.
  const std::vector<double> violations = {0.5, 0.2, 0.5, 0, 0, 0.1};
  EXPECT_EQ(NonDominatedRanks(losses, violations), (std::vector<int>{4, 3, 4, 0, 1, 2}));
}

TEST(ParetoTest, NonDominatedRanksAgreeWithPairwiseDefinition) {
  std::mt19937_64 generator = SeededGenerator(3, 0, 0);
  Rows losses;
  for (int i = 0; i < 60; ++i) {
    // Integer coordinates: many ties and duplicates.
    losses.push_back({std::floor(5 * UniformUnit(generator)),
                      std::floor(5 * UniformUnit(generator)),
                      std::floor(5 * UniformUnit(generator))});
  }
  const std::vector<int> ranks = NonDominatedRanks(losses);
  for (size_t i = 0; i < losses.size(); ++i) {
    int expected = 0;  // One more than the largest rank of any row that dominates it.
    for (size_t j = 0; j < losses.size(); ++j) {
      if (Dominates(losses[j], losses[i])) expected = std::max(expected, ranks[j] + 1);
    }
    EXPECT_EQ(ranks[i], expected) << i;
  }
}

TEST(ParetoTest, CrowdingDistancesByHand) {
  const Rows losses = {{0, 4}, {1, 2}, {2, 1}, {4, 0}};
  const std::vector<double> d = CrowdingDistances(losses);
  EXPECT_EQ(d[0], kInf);
  EXPECT_DOUBLE_EQ(d[1], 2.0 / 4 + 3.0 / 4);
  EXPECT_DOUBLE_EQ(d[2], 3.0 / 4 + 2.0 / 4);
  EXPECT_EQ(d[3], kInf);
  // An objective on which all agree adds nothing.
  EXPECT_EQ(CrowdingDistances({{1, 7}, {2, 7}, {3, 7}})[1], 1.0);
}

TEST(ParetoTest, HypervolumeByHand) {
  const std::vector<double> ref2 = {4, 4};
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 3}, {2, 2}, {3, 1}}, ref2), 3 + 2 + 1);
  // A dominated point, a duplicate and points not beating the reference add nothing.
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 3}, {2, 2}, {3, 1}, {3, 3}, {2, 2}, {5, 0}, {4, 0}}, ref2), 6);
  EXPECT_DOUBLE_EQ(Hypervolume({}, ref2), 0);
  EXPECT_DOUBLE_EQ(Hypervolume({{2}, {1}}, std::vector<double>{3}), 2);
  // 3-D: one box; two boxes overlapping in a unit cube; three by inclusion-exclusion.
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 1, 1}}, std::vector<double>{2, 3, 4}), 6);
  const std::vector<double> ref3 = {2, 2, 2};
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0, 1}, {1, 1, 0}}, ref3), 4 + 2 - 1);
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 1, 1}, {1, 0, 1}, {1, 1, 0}}, ref3), 6 - 3 + 1);
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 1, 1}, {1, 0, 1}, {1, 1, 0}, {1, 0, 1}, {1, 1, 1}}, ref3), 4);
  // 4-D.
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0, 0, 0}}, std::vector<double>{1, 2, 3, 4}), 24);
  EXPECT_DOUBLE_EQ(Hypervolume({{0, 0, 0, 1}, {1, 1, 1, 0}}, std::vector<double>{2, 2, 2, 2}),
                   8 + 2 - 1);
  EXPECT_DOUBLE_EQ(
      Hypervolume({{0, 0, 0, 1}, {1, 1, 1, 0}, {1, 1, 1, 0}}, std::vector<double>{2, 2, 2, 2}), 9);
}

// Integer points and reference: the hypervolume is the number of unit cells whose lower corner
// some point dominates (weakly), which a brute-force count gives exactly.
TEST(ParetoTest, HypervolumeMatchesCellCountIn2To5Dimensions) {
  for (int d = 2; d <= 5; ++d) {
    const int side = 5;
    std::mt19937_64 generator = SeededGenerator(11, d, 0);
    Rows points;
    for (int i = 0; i < 25; ++i) {
      std::vector<double> p(static_cast<size_t>(d));
      for (double& v : p) v = std::floor((side + 1) * UniformUnit(generator));  // side: outside.
      points.push_back(p);
    }
    points.push_back(points[0]);  // A duplicate.
    int cells = 0, total = 1;
    for (int k = 0; k < d; ++k) total *= side;
    for (int c = 0; c < total; ++c) {
      std::vector<double> corner;
      for (int k = 0, rest = c; k < d; ++k, rest /= side) corner.push_back(rest % side);
      for (const std::vector<double>& p : points) {
        bool covers = true;
        for (int k = 0; k < d && covers; ++k) covers = p[k] <= corner[k];
        if (covers) {
          ++cells;
          break;
        }
      }
    }
    EXPECT_DOUBLE_EQ(Hypervolume(points, std::vector<double>(static_cast<size_t>(d), side)), cells)
        << d << " dimensions";
  }
}

TEST(ParetoTest, ContributionsAndGreedySubset) {
  const std::vector<double> ref = {4, 4};
  EXPECT_EQ(HypervolumeContributions({{1, 3}, {2, 2}, {3, 1}}, ref),
            (std::vector<double>{1, 1, 1}));
  // Duplicates and dominated points add nothing.
  EXPECT_EQ(HypervolumeContributions({{2, 2}, {2, 2}, {3, 3}}, ref),
            (std::vector<double>{0, 0, 0}));
  // Alone: 3, 4, 3. (2, 2) first; then each of the others adds 1, the lower index wins.
  EXPECT_EQ(GreedyHypervolumeSubset({{1, 3}, {2, 2}, {3, 1}}, 2, ref), (std::vector<int>{1, 0}));
  // With (2, 2) chosen, (0.5, 3.5) adds 1.5 * 0.5 = 0.75, (3, 1) adds 1.
  EXPECT_EQ(GreedyHypervolumeSubset({{0.5, 3.5}, {2, 2}, {3, 1}}, 3, ref),
            (std::vector<int>{1, 2, 0}));
}

TEST(ParetoTest, MotpeReferencePoint) {
  EXPECT_EQ(MotpeReferencePoint({{1, -2}, {3, -4}, {0, 0}}), (std::vector<double>{1.1 * 3, 1e-12}));
  EXPECT_EQ(MotpeReferencePoint({{-5}, {-10}}), (std::vector<double>{0.9 * -5}));
}

}  // namespace
}  // namespace dhpt::optimizer
