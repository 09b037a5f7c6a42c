#include "services/optimizer/hill_climbing.h"

#include <gtest/gtest.h>

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

// A history of completed trials with these objectives (points are irrelevant to the replay).
TestStudy WithValues(const std::vector<double>& values) {
  TestStudy study;
  for (size_t i = 0; i < values.size(); ++i) {
    study.trials.push_back({{static_cast<double>(i)}, TrialStatus::kCompleted, values[i]});
  }
  return study;
}

TEST(HillClimbingTest, AcceptsNotWorseCountsMissesAndShrinks) {
  HillClimbing climber(LineSpace(10), 1, true,
                       {.initial_step = 0.2, .shrink_factor = 0.5, .patience = 2, .min_step = 0.01});
  TestStudy study = WithValues({5, 4, 4, 6});
  HillClimbing::Climb climb = climber.Replay(study.history());
  EXPECT_EQ(climb.incumbent, 2u);      // 4 replaced 5; the equal 4 was accepted too...
  EXPECT_EQ(climb.step, 0.1);          // ...but was a miss, and 6 another: the step halved.
  EXPECT_EQ(climb.misses, 0);
}

TEST(HillClimbingTest, StagnationRestartsTheClimb) {
  HillClimbing climber(LineSpace(10), 1, true,
                       {.initial_step = 0.2, .shrink_factor = 0.5, .patience = 1, .min_step = 0.1});
  TestStudy study = WithValues({1, 2, 3, 0.5});
  HillClimbing::Climb climb = climber.Replay(study.history());
  // Misses at trials 1 and 2 shrink 0.2 -> 0.1 -> 0.05 < min: a new climb from trial 3.
  EXPECT_EQ(climb.restarts, 1);
  EXPECT_EQ(climb.start, 3u);
  EXPECT_EQ(climb.incumbent, 3u);
  EXPECT_EQ(climb.step, 0.2);
}

TEST(HillClimbingTest, FailedTrialsAreMissesAndRunningOnesAreIgnored) {
  HillClimbing climber(LineSpace(10), 1, true, {.patience = 2});
  TestStudy study = WithValues({3});
  study.trials.push_back({{1.0}, TrialStatus::kFailed, std::nullopt});
  study.trials.push_back({{2.0}, TrialStatus::kRunning, std::nullopt});
  HillClimbing::Climb climb = climber.Replay(study.history());
  EXPECT_EQ(climb.incumbent, 0u);
  EXPECT_EQ(climb.misses, 1);
}

TEST(HillClimbingTest, PrunedTrialsAreMissesAndNeverIncumbents) {
  HillClimbing climber(LineSpace(10), 1, true, {.patience = 3});
  TestStudy study;
  study.trials.push_back({{1.0}, TrialStatus::kPruned, 0.1, 10});  // Not an incumbent...
  study.trials.push_back({{2.0}, TrialStatus::kCompleted, 3.0});
  study.trials.push_back({{3.0}, TrialStatus::kPruned, 0.1, 10});  // ...nor better than one.
  HillClimbing::Climb climb = climber.Replay(study.history());
  EXPECT_EQ(climb.incumbent, 1u);
  EXPECT_EQ(climb.misses, 1);
}

TEST(HillClimbingTest, NeighboursStayNearTheIncumbent) {
  SearchSpace space = LineSpace(10);
  HillClimbing climber(space, 7, true, {.initial_step = 0.05});
  TestStudy study;
  study.trials.push_back({{5.0}, TrialStatus::kCompleted, 1.0});
  study.keys.insert(space.Key({5.0}));
  for (int i = 0; i < 50; ++i) {
    Point p = **climber.Suggest(study.history());
    EXPECT_NEAR(std::get<double>(p[0]), 5.0, 2.5);  // Five sigma of 0.05 * 10.
    study.keys.insert(space.Key(p));
    study.trials.push_back({p, TrialStatus::kRunning, std::nullopt});
  }
}

TEST(HillClimbingTest, CategoricalNeighboursFlipWithTheGivenProbability) {
  SearchSpace space({{.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}},
                     {.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  HillClimbing climber(space, 3, true, {.flip_probability = 0.25});
  TestStudy study;
  study.trials.push_back({{std::string("a"), 0.5}, TrialStatus::kCompleted, 1.0});
  int flips = 0;
  for (int i = 0; i < 400; ++i) {
    Point p = **climber.Suggest(study.history());
    flips += std::get<std::string>(p[0]) != "a";
    study.trials.push_back({p, TrialStatus::kRunning, std::nullopt});
  }
  EXPECT_NEAR(flips, 100, 30);
}

TEST(HillClimbingTest, BeatsRandomSearchOnSmoothFunctions) {
  for (const auto& [function, d] :
       std::vector<std::pair<std::string, int>>{{"rosenbrock", 4}, {"styblinski_tang", 4}}) {
    const double climb = MedianBest(Algorithm::kHillClimbing, function, d, 7, 100);
    const double random = MedianBest(Algorithm::kRandom, function, d, 7, 100);
    EXPECT_LT(climb, random) << function;
  }
}

}  // namespace
}  // namespace dhpt::optimizer
