#pragma once

// Helpers for the multi-objective optimiser tests.

#include <algorithm>
#include <vector>

#include "services/optimizer/function_runs.h"
#include "services/optimizer/pareto.h"
#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {

// ZDT1's search space in d dimensions.
inline SearchSpace Zdt1Space(int d) { return FunctionSpace(*FindMultiObjectiveFunction("zdt1"), d); }

// ZDT1's hypervolume (reference (11, 11)) after `budget` trials, median over `seeds` seeds.
inline double MedianZdt1Hypervolume(OptimizerConfig config, int d, int budget, int seeds) {
  std::vector<double> volumes;
  for (int s = 0; s < seeds; ++s) {
    config.seed = static_cast<uint64_t>(s);
    const std::vector<std::vector<double>> f =
        ObjectivesRun(config, *FindMultiObjectiveFunction("zdt1"), d, budget);
    volumes.push_back(Hypervolume(f, std::vector<double>{11, 11}));
  }
  std::sort(volumes.begin(), volumes.end());
  return volumes[volumes.size() / 2];
}

// Runs `optimizer` for `n` trials on ZDT1 in d dimensions (completed, no constraints) and
// fails the test on a duplicate; returns the points.
inline std::vector<Point> RunZdt1(Optimizer& optimizer, const SearchSpace& space, int n,
                                  TestStudy& study) {
  std::vector<Point> points;
  const MultiObjectiveFunction& zdt1 = *FindMultiObjectiveFunction("zdt1");
  for (int i = 0; i < n; ++i) {
    auto next = optimizer.Suggest(study.history());
    EXPECT_TRUE(next.ok());
    if (!next.ok() || !next->has_value()) break;
    points.push_back(**next);
    EXPECT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate at " << i;
    std::vector<double> x, f(2);
    for (const ParameterValue& v : **next) x.push_back(std::get<double>(v));
    zdt1.evaluate(x, f);
    study.trials.push_back({.point = **next, .status = TrialStatus::kCompleted, .values = f});
  }
  return points;
}

}  // namespace dhpt::optimizer
