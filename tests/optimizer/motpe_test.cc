#include "services/optimizer/motpe.h"

#include <gtest/gtest.h>

#include "services/optimizer/tpe.h"
#include "tests/optimizer/multi_objective_test_util.h"

namespace dhpt::optimizer {
namespace {

TestStudy WithLosses(const std::vector<std::vector<double>>& losses,
                     const std::vector<double>& violations = {}) {
  TestStudy study;
  for (size_t t = 0; t < losses.size(); ++t) {
    study.trials.push_back({.point = {0.01 * static_cast<double>(t)},
                            .status = TrialStatus::kCompleted,
                            .values = losses[t],
                            .violation = violations.empty() ? 0 : violations[t]});
  }
  return study;
}

// 20 trials: n_below = 2. The first front (trials 3, 7, 12) is larger than that, so the greedy
// hypervolume subset picks (2, 2) then, of two equal gains, (1, 3), the earlier trial.
TEST(MotpeTest, SplitByRankThenHypervolumeSubsetWithContributionWeights) {
  std::vector<std::vector<double>> losses;
  for (int t = 0; t < 20; ++t) losses.push_back({5.0 + t, 5.0 + t});
  losses[3] = {1, 3};
  losses[7] = {2, 2};
  losses[12] = {3, 1};
  TestStudy study = WithLosses(losses);
  const std::optional<MotpeSplit> split =
      SplitMultiObjective(study.history(), {true, true}, 10, true);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, (std::vector<int>{3, 7}));
  EXPECT_EQ(split->above.size(), 18u);
  // Reference (2.2, 3.3): (1, 3) adds 0.30, (2, 2) adds 0.20 (plus 1e-12 each).
  ASSERT_EQ(split->below_weights.size(), 2u);
  EXPECT_NEAR(split->below_weights[0], 1.0, 1e-9);
  EXPECT_NEAR(split->below_weights[1], 0.2 / 0.3, 1e-9);
}

TEST(MotpeTest, DirectionsAreApplied) {
  // Maximising both: the largest vectors are the best.
  std::vector<std::vector<double>> losses;
  for (int t = 0; t < 10; ++t) losses.push_back({static_cast<double>(t), static_cast<double>(t)});
  TestStudy study = WithLosses(losses);
  const std::optional<MotpeSplit> split =
      SplitMultiObjective(study.history(), {false, false}, 10, true);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, std::vector<int>{9});
  EXPECT_EQ(split->below_weights, std::vector<double>{1.0});
}

TEST(MotpeTest, ConstraintsStartupAndOutcasts) {
  std::vector<std::vector<double>> losses;
  for (int t = 0; t < 10; ++t) losses.push_back({0.1 * t, 1 - 0.1 * t});
  // Only trial 9 is feasible; trial 4 is the least violating.
  std::vector<double> violations(10, 0.0);
  for (int t = 0; t < 9; ++t) violations[t] = 1.0 + t;
  violations[4] = 0.5;
  TestStudy study = WithLosses(losses, violations);
  EXPECT_FALSE(SplitMultiObjective(study.history(), {true, true}, 11, true).has_value());
  study.trials.push_back({.point = {0.5}, .status = TrialStatus::kFailed});
  study.trials.push_back({.point = {0.6}, .status = TrialStatus::kRunning});
  study.trials.push_back({.point = {0.7}, .status = TrialStatus::kPruned, .value = 0.0});
  study.trials.push_back(
      {.point = {0.8}, .status = TrialStatus::kCompleted, .values = {0.0, 0.0}, .violation = 3.0});
  study.trials.push_back({.point = {0.9}, .status = TrialStatus::kCompleted, .values = {NAN, 0.0}});
  // 11 observations (the NaN one is not): ceil(1.1) = 2 below: feasible 9, then the least
  // violating 4, weighted 1 and 1e-12.
  std::optional<MotpeSplit> split = SplitMultiObjective(study.history(), {true, true}, 10, true);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, (std::vector<int>{4, 9}));
  EXPECT_EQ(split->below_weights, (std::vector<double>{1e-12, 1.0}));
  EXPECT_EQ(split->above.size(), 15u - 2u);  // Failed, running, pruned and NaN included.
  split = SplitMultiObjective(study.history(), {true, true}, 10, /*constant_liar=*/false);
  EXPECT_EQ(split->above.size(), 12u);  // The running trial left out.
}

TEST(MotpeTest, DeterministicRebuildableAndNoDuplicates) {
  const SearchSpace space = FunctionSpace(*FindMultiObjectiveFunction("zdt1"), 4);
  auto make = [&] { return TpeSearch(space, 8, true, {}, {true, true}); };
  TpeSearch first = make(), second = make();
  TestStudy a, b;
  std::vector<Point> all = RunZdt1(first, space, 50, a);
  std::vector<Point> part = RunZdt1(second, space, 30, b);
  TpeSearch rebuilt = make();
  std::vector<Point> rest = RunZdt1(rebuilt, space, 20, b);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

TEST(MotpeTest, BeatsRandomSearchOnZdt1) {
  const OptimizerConfig tpe{.algorithm = Algorithm::kTpe};
  const double motpe = MedianZdt1Hypervolume(tpe, 6, 100, 5);
  const double random = MedianZdt1Hypervolume({.algorithm = Algorithm::kRandom}, 6, 100, 5);
  EXPECT_GT(motpe, random);
}

// Single-objective TPE with constraints: infeasible completed trials rank after feasible and
// pruned ones, by violation, and before failed ones.
TEST(MotpeTest, SingleObjectiveTpeRanksInfeasibleTrialsLast) {
  const SearchSpace space = LineSpace(1);
  TestStudy study;
  auto add = [&](TrialStatus status, std::optional<double> value, double violation = 0) {
    study.trials.push_back({.point = {0.01 * static_cast<double>(study.trials.size())},
                            .status = status,
                            .value = value,
                            .last_step = 5,
                            .violation = violation});
  };
  for (int t = 0; t < 17; ++t) add(TrialStatus::kCompleted, -10.0 - t, 1.0 + t);  // 0..16
  add(TrialStatus::kCompleted, 50.0, 0.5);  // 17: the least violating.
  add(TrialStatus::kPruned, 9.0);           // 18
  add(TrialStatus::kCompleted, 10.0);       // 19: the only feasible.
  add(TrialStatus::kFailed, std::nullopt);
  TpeSearch tpe(space, 1, true, {});
  // 20 finished: ceil(2) = 2 below: the feasible one, then the pruned one; never the
  // infeasible ones however good their objectives.
  std::optional<TpeSearch::Split> split = tpe.SplitTrials(study.history());
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, (std::vector<int>{18, 19}));
  add(TrialStatus::kCompleted, -100.0, 0.2);  // 21
  for (int t = 0; t < 9; ++t) add(TrialStatus::kCompleted, 0.0, 9.0);
  // 30 finished: 3 below: 19, 18, then the least violating, 21.
  split = tpe.SplitTrials(study.history());
  EXPECT_EQ(split->below, (std::vector<int>{18, 19, 21}));
}

}  // namespace
}  // namespace dhpt::optimizer
