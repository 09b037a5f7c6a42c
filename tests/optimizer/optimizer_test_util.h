#pragma once

// A study's history for driving optimisers by hand in tests.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "services/optimizer/function_runs.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

struct TestStudy {
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  History history() const { return {trials, keys}; }
};

// One double parameter x in [0, max].
inline SearchSpace LineSpace(double max) {
  return SearchSpace({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = max}});
}

// A space with every parameter kind: a log double, an int and a categorical.
inline SearchSpace MixedSpace() {
  return SearchSpace({{.name = "x", .kind = ParameterKind::kDouble, .min = 1e-3, .max = 1, .log = true},
                      {.name = "n", .kind = ParameterKind::kInt, .min = 1, .max = 20},
                      {.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}}});
}

// Smallest (0) at x = 0.01, n = 7, c = "b".
inline double MixedLoss(const Point& p) {
  return std::pow(std::log10(std::get<double>(p[0])) + 2, 2) +
         std::pow(std::get<int64_t>(p[1]) - 7, 2) / 10.0 + (std::get<std::string>(p[2]) == "b" ? 0 : 1);
}

// Suggests `n` points one after another, each completed with MixedLoss; fails the test on a
// duplicate.
inline std::vector<Point> RunMixed(Optimizer& optimizer, const SearchSpace& space, int n,
                                   TestStudy& study) {
  std::vector<Point> points;
  for (int i = 0; i < n; ++i) {
    auto next = optimizer.Suggest(study.history());
    EXPECT_TRUE(next.ok());
    if (!next.ok() || !next->has_value()) break;
    points.push_back(**next);
    EXPECT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate";
    study.trials.push_back({**next, TrialStatus::kCompleted, MixedLoss(**next)});
  }
  return points;
}

}  // namespace dhpt::optimizer
