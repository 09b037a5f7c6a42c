#pragma once

// Runs optimisers against closed-form functions, trial after trial, for optimiser tests.

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "services/common/benchmark_functions.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

struct TestStudy {
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  History history() const { return {trials, keys}; }
};

inline SearchSpace FunctionSpace(const BenchmarkFunction& f, int d) {
  std::vector<ParameterSpec> parameters;
  for (int i = 0; i < d; ++i) {
    auto [lo, hi] = f.bounds(i, d);
    parameters.push_back({.name = "x" + std::to_string(i + 1), .kind = ParameterKind::kDouble,
                          .min = lo, .max = hi});
  }
  return SearchSpace(parameters);
}

// The best value found in `budget` sequential trials.
inline double BestAfter(Algorithm algorithm, const std::string& function, int d, uint64_t seed,
                        int budget) {
  const BenchmarkFunction& f = *FindBenchmarkFunction(function);
  SearchSpace space = FunctionSpace(f, d);
  OptimizerConfig config{.algorithm = algorithm, .seed = seed, .minimize = true};
  auto optimizer = *MakeOptimizer(space, config);
  TestStudy study;
  double best = std::numeric_limits<double>::infinity();
  for (int t = 0; t < budget; ++t) {
    std::optional<Point> point = **optimizer->Suggest(study.history());
    std::vector<double> x;
    for (const ParameterValue& v : *point) x.push_back(std::get<double>(v));
    const double value = f.evaluate(x);
    best = std::min(best, value);
    study.keys.insert(space.Key(*point));
    study.trials.push_back({*point, TrialStatus::kCompleted, value});
  }
  return best;
}

inline double MedianBest(Algorithm algorithm, const std::string& function, int d, int seeds,
                         int budget) {
  std::vector<double> bests;
  for (int s = 0; s < seeds; ++s) bests.push_back(BestAfter(algorithm, function, d, s, budget));
  std::sort(bests.begin(), bests.end());
  return bests[bests.size() / 2];
}

}  // namespace dhpt::optimizer
