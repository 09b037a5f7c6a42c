#pragma once

// What the optimiser-quality benchmarks share: a named optimiser configuration to run, and the
// quantiles of their tables.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

struct Contender {
  std::string label;
  OptimizerConfig config;
};

// The q-quantile of v, interpolated linearly between order statistics (v not empty).
inline double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

}  // namespace dhpt::optimizer
