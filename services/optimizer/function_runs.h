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

// The median over seeds 0..seeds-1 of the best value after `budget` trials.
double MedianBest(Algorithm algorithm, const std::string& function, int d, int seeds, int budget);

}  // namespace dhpt::optimizer
