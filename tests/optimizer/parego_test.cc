#include "services/optimizer/parego.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/optimizer/multi_objective_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(ParEgoTest, WeightsLieOnTheSimplexAndDependOnSeedAndTrials) {
  ParEgo parego(Zdt1Space(2), 3, {true, true, false}, {});
  const std::vector<double> w = parego.Weights(17);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1, 1e-12);
  for (double x : w) EXPECT_GE(x, 0);
  EXPECT_EQ(w, ParEgo(Zdt1Space(2), 3, {true, true, false}, {}).Weights(17));
  EXPECT_NE(w, parego.Weights(18));
  EXPECT_NE(w, ParEgo(Zdt1Space(2), 4, {true, true, false}, {}).Weights(17));
}

TEST(ParEgoTest, ScalarisesNormalisedLossesByAugmentedChebyshev) {
  ParEgo parego(Zdt1Space(2), 1, {true, false}, {});
  TestStudy study;
  // Losses (f1, -f2): (0, -10), (4, -2), (2, -6); feasible range f1 [0, 4], -f2 [-10, -2].
  study.trials.push_back(
      {.point = {0.1, 0.0}, .status = TrialStatus::kCompleted, .values = {0, 10}});
  study.trials.push_back(
      {.point = {0.2, 0.0}, .status = TrialStatus::kCompleted, .values = {4, 2}});
  study.trials.push_back(
      {.point = {0.3, 0.0}, .status = TrialStatus::kCompleted, .values = {2, 6}});
  study.trials.push_back({.point = {0.4, 0.0},
                          .status = TrialStatus::kCompleted,
                          .values = {9, 99},
                          .violation = 1});  // Outside the range: not used to normalise.
  study.trials.push_back({.point = {0.5, 0.0}, .status = TrialStatus::kPruned, .value = 1});
  study.trials.push_back({.point = {0.6, 0.0}, .status = TrialStatus::kRunning});
  const std::vector<double> w = parego.Weights(study.trials.size());
  const std::vector<TrialRecord> s = parego.Scalarised(study.history());
  auto expected = [&](double f1, double f2) {
    return std::max(w[0] * f1, w[1] * f2) + ParEgo::kRho * (w[0] * f1 + w[1] * f2);
  };
  EXPECT_DOUBLE_EQ(*s[0].value, expected(0, 0));
  EXPECT_DOUBLE_EQ(*s[1].value, expected(1, 1));
  EXPECT_DOUBLE_EQ(*s[2].value, expected(0.5, 0.5));
  EXPECT_DOUBLE_EQ(*s[3].value, expected(9.0 / 4, (-99.0 + 10) / 8));
  EXPECT_EQ(s[3].violation, 1);
  EXPECT_EQ(s[4].status, TrialStatus::kFailed);
  EXPECT_EQ(s[5].status, TrialStatus::kRunning);
}

TEST(ParEgoTest, ModelKeepsTheBestHalfAndTheMostRecentHalf) {
  ParEgo parego(Zdt1Space(2), 1, {true, true}, {.max_fit_points = 4});
  TestStudy study;
  // Scalarised values rise with the trial number except trial 2, the best.
  for (int t = 0; t < 8; ++t) {
    const double f = t == 2 ? 0.0 : 1.0 + t;
    study.trials.push_back(
        {.point = {0.1 * t, 0.0}, .status = TrialStatus::kCompleted, .values = {f, f}});
  }
  const std::vector<TrialRecord> s = parego.Scalarised(study.history());
  std::vector<int> modelled;
  for (int t = 0; t < 8; ++t) {
    if (s[t].status == TrialStatus::kCompleted) modelled.push_back(t);
  }
  EXPECT_EQ(modelled, (std::vector<int>{0, 2, 6, 7}));  // Best two: 2, 0; newest two: 7, 6.
}

TEST(ParEgoTest, DeterministicRebuildableAndNoDuplicates) {
  const SearchSpace space = Zdt1Space(3);
  ParEgo first(space, 6, {true, true}, {}), second(space, 6, {true, true}, {});
  TestStudy a, b;
  std::vector<Point> all = RunZdt1(first, space, 24, a);
  std::vector<Point> part = RunZdt1(second, space, 15, b);
  ParEgo rebuilt(space, 6, {true, true}, {});
  std::vector<Point> rest = RunZdt1(rebuilt, space, 9, b);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

TEST(ParEgoTest, BeatsRandomSearchOnZdt1) {
  const double parego = MedianZdt1Hypervolume({.algorithm = Algorithm::kBayesian}, 4, 40, 3);
  const double random = MedianZdt1Hypervolume({.algorithm = Algorithm::kRandom}, 4, 40, 3);
  EXPECT_GT(parego, random);
}

}  // namespace
}  // namespace dhpt::optimizer
