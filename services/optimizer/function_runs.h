#pragma once

// Runs an optimiser trial after trial against a closed-form benchmark function, with no
// scheduler: the protocol of the optimiser tests and of bench/optimizer_quality_bench.

#include <string>
#include <vector>

#include "services/common/benchmark_functions.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

// The function's usual domain in d dimensions, parameters x1..xd.
SearchSpace FunctionSpace(const BenchmarkFunction& function, int d);

// The best value after each trial: result[t] = min over trials 0..t.
std::vector<double> BestSoFar(const OptimizerConfig& config, const BenchmarkFunction& function,
                              int d, int budget);

// The multi-objective counterpart: the objectives of each trial, in trial order, of `budget`
// sequential trials of the function in d dimensions (config.objectives_minimize is set to
// minimise every objective). With `constraint`, each trial's violation is constraint(f).
SearchSpace FunctionSpace(const MultiObjectiveFunction& function, int d);
std::vector<std::vector<double>> ObjectivesRun(
    OptimizerConfig config, const MultiObjectiveFunction& function, int d, int budget,
    double (*constraint)(const std::vector<double>& f) = nullptr);

// The median over seeds 0..seeds-1 of the best value after `budget` trials.
double MedianBest(Algorithm algorithm, const std::string& function, int d, int seeds, int budget);

}  // namespace dhpt::optimizer
