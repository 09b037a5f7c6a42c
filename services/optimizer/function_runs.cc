#include "services/optimizer/function_runs.h"

#include <algorithm>
#include <limits>

namespace dhpt::optimizer {

namespace {

// x1..xd over the function's usual domain.
SearchSpace SpaceOf(std::pair<double, double> (*bounds)(int i, int d), int d) {
  std::vector<ParameterSpec> parameters;
  for (int i = 0; i < d; ++i) {
    auto [lo, hi] = bounds(i, d);
    parameters.push_back({.name = "x" + std::to_string(i + 1), .kind = ParameterKind::kDouble,
                          .min = lo, .max = hi});
  }
  return SearchSpace(parameters);
}

}  // namespace

SearchSpace FunctionSpace(const BenchmarkFunction& function, int d) {
  return SpaceOf(function.bounds, d);
}

std::vector<double> BestSoFar(const OptimizerConfig& config, const BenchmarkFunction& function,
                              int d, int budget) {
  const SearchSpace space = FunctionSpace(function, d);
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(space, config);
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  std::vector<double> best;
  double incumbent = std::numeric_limits<double>::infinity();
  for (int t = 0; t < budget; ++t) {
    absl::StatusOr<std::optional<Point>> point = optimizer->Suggest({trials, keys});
    if (!point.ok() || !point->has_value()) break;
    std::vector<double> x;
    for (const ParameterValue& v : **point) x.push_back(std::get<double>(v));
    const double value = function.evaluate(x);
    incumbent = std::min(incumbent, value);
    best.push_back(incumbent);
    keys.insert(space.Key(**point));
    trials.push_back({**point, TrialStatus::kCompleted, value});
  }
  return best;
}

SearchSpace FunctionSpace(const MultiObjectiveFunction& function, int d) {
  return SpaceOf(function.bounds, d);
}

std::vector<std::vector<double>> ObjectivesRun(OptimizerConfig config,
                                               const MultiObjectiveFunction& function, int d,
                                               int budget,
                                               double (*constraint)(const std::vector<double>& f)) {
  config.objectives_minimize.assign(static_cast<size_t>(function.objectives), true);
  const SearchSpace space = FunctionSpace(function, d);
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(space, config);
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  std::vector<std::vector<double>> objectives;
  for (int t = 0; t < budget; ++t) {
    absl::StatusOr<std::optional<Point>> point = optimizer->Suggest({trials, keys});
    if (!point.ok() || !point->has_value()) break;
    std::vector<double> x;
    for (const ParameterValue& v : **point) x.push_back(std::get<double>(v));
    std::vector<double> f(static_cast<size_t>(function.objectives));
    function.evaluate(x, f);
    keys.insert(space.Key(**point));
    trials.push_back({.point = **point, .status = TrialStatus::kCompleted, .values = f,
                      .violation = constraint ? constraint(f) : 0.0});
    objectives.push_back(std::move(f));
  }
  return objectives;
}

double MedianBest(Algorithm algorithm, const std::string& function, int d, int seeds, int budget) {
  std::vector<double> bests;
  for (int s = 0; s < seeds; ++s) {
    OptimizerConfig config{.algorithm = algorithm, .seed = static_cast<uint64_t>(s)};
    bests.push_back(BestSoFar(config, *FindBenchmarkFunction(function), d, budget).back());
  }
  std::sort(bests.begin(), bests.end());
  return bests[bests.size() / 2];
}

}  // namespace dhpt::optimizer
