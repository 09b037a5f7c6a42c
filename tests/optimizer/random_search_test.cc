#include "services/optimizer/random_search.h"

#include <gtest/gtest.h>

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

using Study = TestStudy;

// Runs `n` suggestions, recording each as a trial.
std::vector<Point> SuggestMany(Optimizer& optimizer, const SearchSpace& space, int n, Study& study) {
  std::vector<Point> points;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::optional<Point>> next = optimizer.Suggest(study.history());
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok() || !next->has_value()) break;
    points.push_back(**next);
    study.keys.insert(space.Key(**next));
    study.trials.push_back({**next, TrialStatus::kCompleted, 0.0});
  }
  return points;
}

SearchSpace Mixed() {
  ParameterSpec x{.name = "x", .kind = ParameterKind::kDouble, .min = 0.001, .max = 1, .log = true};
  ParameterSpec n{.name = "n", .kind = ParameterKind::kInt, .min = 1, .max = 100};
  ParameterSpec c{.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b"}};
  return SearchSpace({x, n, c});
}

TEST(RandomSearchTest, SameSeedSameSuggestionsAndRebuildContinuesExactly) {
  SearchSpace space = Mixed();
  RandomSearch first(space, 7), second(space, 7);
  Study a, b;
  std::vector<Point> from_first = SuggestMany(first, space, 30, a);
  std::vector<Point> from_second = SuggestMany(second, space, 20, b);
  // A fresh optimiser over the stored history continues where the first left off.
  RandomSearch rebuilt(space, 7);
  std::vector<Point> more = SuggestMany(rebuilt, space, 10, b);
  from_second.insert(from_second.end(), more.begin(), more.end());
  EXPECT_EQ(from_first, from_second);
}

TEST(RandomSearchTest, DifferentSeedsDiffer) {
  SearchSpace space = Mixed();
  RandomSearch a(space, 1), b(space, 2);
  Study sa, sb;
  EXPECT_NE(SuggestMany(a, space, 5, sa), SuggestMany(b, space, 5, sb));
}

TEST(RandomSearchTest, CountableSpaceIsCoveredWithoutDuplicatesThenExhausted) {
  ParameterSpec n{.name = "n", .kind = ParameterKind::kInt, .min = 0, .max = 9};
  ParameterSpec c{.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}};
  SearchSpace space({n, c});
  RandomSearch search(space, 3);
  Study study;
  std::vector<Point> points = SuggestMany(search, space, 100, study);
  EXPECT_EQ(points.size(), 30u);
  EXPECT_EQ(study.keys.size(), 30u);
  EXPECT_FALSE(search.Suggest(study.history())->has_value());
}

TEST(RandomSearchTest, SamplesCoverTheRangeUniformly) {
  ParameterSpec x{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1};
  SearchSpace space({x});
  RandomSearch search(space, 11);
  Study study;
  int below_half = 0;
  for (const Point& p : SuggestMany(search, space, 2000, study)) below_half += std::get<double>(p[0]) < 0.5;
  EXPECT_NEAR(below_half, 1000, 100);  // ~4.5 sigma.
}

}  // namespace
}  // namespace dhpt::optimizer
