#include "services/optimizer/bayesian_optimization.h"

#include <gtest/gtest.h>

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

SearchSpace Mixed() {
  return SearchSpace({{.name = "x", .kind = ParameterKind::kDouble, .min = 1e-3, .max = 1, .log = true},
                      {.name = "n", .kind = ParameterKind::kInt, .min = 1, .max = 20},
                      {.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}}});
}

double Loss(const Point& p) {
  return std::pow(std::log10(std::get<double>(p[0])) + 2, 2) +
         std::pow(std::get<int64_t>(p[1]) - 7, 2) / 10.0 + (std::get<std::string>(p[2]) == "b" ? 0 : 1);
}

std::vector<Point> Drive(Optimizer& optimizer, const SearchSpace& space, int n, TestStudy& study) {
  std::vector<Point> points;
  for (int i = 0; i < n; ++i) {
    auto next = optimizer.Suggest(study.history());
    EXPECT_TRUE(next.ok());
    if (!next.ok() || !next->has_value()) break;
    points.push_back(**next);
    EXPECT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate";
    study.trials.push_back({**next, TrialStatus::kCompleted, Loss(**next)});
  }
  return points;
}

TEST(BayesianOptimizationTest, HandlesEveryParameterKindAndFindsTheOptimum) {
  SearchSpace space = Mixed();
  BayesianOptimization bo(space, 1, true, {});
  TestStudy study;
  std::vector<Point> points = Drive(bo, space, 35, study);
  double best = 1e9;
  for (const Point& p : points) best = std::min(best, Loss(p));
  EXPECT_LT(best, 0.15);  // Random search needs far more trials for this.
}

TEST(BayesianOptimizationTest, DeterministicAndRebuildable) {
  SearchSpace space = Mixed();
  BayesianOptimization a(space, 4, true, {}), b(space, 4, true, {});
  TestStudy sa, sb;
  std::vector<Point> all = Drive(a, space, 16, sa);
  std::vector<Point> part = Drive(b, space, 12, sb);
  BayesianOptimization rebuilt(space, 4, true, {});
  std::vector<Point> rest = Drive(rebuilt, space, 4, sb);
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
