#include "services/optimizer/bayesian_optimization.h"

#include <gtest/gtest.h>

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(BayesianOptimizationTest, HandlesEveryParameterKindAndFindsTheOptimum) {
  SearchSpace space = MixedSpace();
  BayesianOptimization bo(space, 1, true, {});
  TestStudy study;
  std::vector<Point> points = RunMixed(bo, space, 35, study);
  double best = 1e9;
  for (const Point& p : points) best = std::min(best, MixedLoss(p));
  EXPECT_LT(best, 0.15);  // Random search needs far more trials for this.
}

TEST(BayesianOptimizationTest, DeterministicAndRebuildable) {
  SearchSpace space = MixedSpace();
  BayesianOptimization a(space, 4, true, {}), b(space, 4, true, {});
  TestStudy sa, sb;
  std::vector<Point> all = RunMixed(a, space, 16, sa);
  std::vector<Point> part = RunMixed(b, space, 12, sb);
  BayesianOptimization rebuilt(space, 4, true, {});
  std::vector<Point> rest = RunMixed(rebuilt, space, 4, sb);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

TEST(BayesianOptimizationTest, PendingTrialsAreFantasisedSoParallelSuggestionsDiffer) {
  SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  BayesianOptimization bo(space, 2, true, {});
  TestStudy study;
  for (int i = 0; i < 12; ++i) {
    Point p = **bo.Suggest(study.history());
    study.keys.insert(space.Key(p));
    study.trials.push_back({p, TrialStatus::kCompleted, std::pow(std::get<double>(p[0]) - 0.3, 2)});
  }
  Point first = **bo.Suggest(study.history());
  study.keys.insert(space.Key(first));
  study.trials.push_back({first, TrialStatus::kRunning, std::nullopt});
  Point second = **bo.Suggest(study.history());
  EXPECT_GT(std::abs(std::get<double>(first[0]) - std::get<double>(second[0])), 1e-3);
}

TEST(BayesianOptimizationTest, BeatsRandomSearchOnBenchmarkFunctions) {
  for (const auto& [function, d] :
       std::vector<std::pair<std::string, int>>{{"branin", 2}, {"hartmann6", 6}}) {
    EXPECT_LT(MedianBest(Algorithm::kBayesian, function, d, 3, 40),
              MedianBest(Algorithm::kRandom, function, d, 3, 40))
        << function;
  }
}

}  // namespace
}  // namespace dhpt::optimizer
