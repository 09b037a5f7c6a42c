#include "services/optimizer/grid_search.h"

#include <gtest/gtest.h>

#include <set>

namespace dhpt::optimizer {
namespace {

SearchSpace GridSpace() {
  ParameterSpec x{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1};
  ParameterSpec n{.name = "n", .kind = ParameterKind::kInt, .min = 1, .max = 3};
  ParameterSpec c{.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b"}};
  return SearchSpace({x, n, c});
}

std::vector<Point> Exhaust(GridSearch& grid, const SearchSpace& space) {
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  std::vector<Point> points;
  while (true) {
    auto next = grid.Suggest({trials, keys});
    EXPECT_TRUE(next.ok());
    if (!next.ok() || !next->has_value()) break;
    points.push_back(**next);
    keys.insert(space.Key(**next));
    trials.push_back({**next, TrialStatus::kRunning, {}});
  }
  return points;
}

TEST(GridSearchTest, AxesFollowGridPointsAndKeepSmallCountablesWhole) {
  std::vector<std::vector<ParameterValue>> axes = GridAxes(GridSpace(), 5);
  ASSERT_EQ(axes.size(), 3u);
  EXPECT_EQ(axes[0], (std::vector<ParameterValue>{0.0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(axes[1], (std::vector<ParameterValue>{int64_t{1}, int64_t{2}, int64_t{3}}));
  EXPECT_EQ(axes[2], (std::vector<ParameterValue>{std::string("a"), std::string("b")}));
  EXPECT_EQ(GridSize(GridSpace(), 5), 30);
}

TEST(GridSearchTest, LogAxesAreGeometric) {
  ParameterSpec x{.name = "x", .kind = ParameterKind::kDouble, .min = 0.01, .max = 1, .log = true};
  std::vector<std::vector<ParameterValue>> axes = GridAxes(SearchSpace({x}), 3);
  EXPECT_NEAR(std::get<double>(axes[0][1]), 0.1, 1e-12);
}

TEST(GridSearchTest, WideIntRangesAreSampledEvenly) {
  ParameterSpec n{.name = "n", .kind = ParameterKind::kInt, .min = 0, .max = 1000};
  std::vector<std::vector<ParameterValue>> axes = GridAxes(SearchSpace({n}), 3);
  EXPECT_EQ(axes[0], (std::vector<ParameterValue>{int64_t{0}, int64_t{500}, int64_t{1000}}));
}

TEST(GridSearchTest, VisitsEveryPointExactlyOnceThenStops) {
  SearchSpace space = GridSpace();
  GridSearch grid(space, 5, 42);
  std::vector<Point> points = Exhaust(grid, space);
  EXPECT_EQ(points.size(), 30u);
  std::set<std::string> keys;
  for (const Point& p : points) keys.insert(space.Key(p));
  EXPECT_EQ(keys.size(), 30u);
  EXPECT_EQ(grid.Capacity(), 30);
}

// Points off the grid (enqueued, added) in the history take no grid point's place.
TEST(GridSearchTest, OffGridPointsInTheHistorySkipNoGridPoint) {
  SearchSpace space = GridSpace();
  GridSearch grid(space, 5, 42);
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  for (double x : {0.1, 0.3, 0.7}) {
    const Point off = {x, int64_t{2}, std::string("a")};
    keys.insert(space.Key(off));
    trials.push_back({off, TrialStatus::kCompleted, 1.0});
  }
  std::set<std::string> seen;
  while (true) {
    auto next = grid.Suggest({trials, keys});
    ASSERT_TRUE(next.ok());
    if (!next->has_value()) break;
    ASSERT_TRUE(seen.insert(space.Key(**next)).second);
    keys.insert(space.Key(**next));
    trials.push_back({**next, TrialStatus::kRunning, {}});
  }
  EXPECT_EQ(seen.size(), 30u);
}

TEST(GridSearchTest, OrderIsShuffledBySeedAndReproducible) {
  SearchSpace space = GridSpace();
  GridSearch a(space, 5, 1), b(space, 5, 1), c(space, 5, 2);
  std::vector<Point> pa = Exhaust(a, space), pb = Exhaust(b, space), pc = Exhaust(c, space);
  EXPECT_EQ(pa, pb);
  EXPECT_NE(pa, pc);
}

}  // namespace
}  // namespace dhpt::optimizer
