#pragma once

// Closed-form test functions for optimiser tests and benchmarks: no training cost, known
// optima. A FUNCTION trial evaluates one at the parameters x1..xd.

#include <optional>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

namespace dhpt {

struct BenchmarkFunction {
  absl::string_view name;
  // Fixed dimension, or 0 when defined for any d >= min_dims.
  int dims;
  int min_dims;
  double (*evaluate)(std::span<const double> x);
  // The usual search domain of coordinate i (0-based) in d dimensions.
  std::pair<double, double> (*bounds)(int i, int d);
  // The global minimum in d dimensions.
  double (*minimum)(int d);

  bool AcceptsDims(int d) const { return dims == 0 ? d >= min_dims : d == dims; }
};

// A FUNCTION study's only fixed value (model.fixed): the seconds each trial takes, so that a
// function can stand in for a costly objective. The worker waits, cancellably, after
// evaluating.
inline constexpr absl::string_view kFunctionSecondsKey = "seconds";
inline constexpr double kMaxFunctionSeconds = 3600;

// Multi-objective test problems (ZDT1, ZDT2, DTLZ2), all to MINIMIZE. A FUNCTION trial of one
// reports its objectives as the metrics f1..fM.
struct MultiObjectiveFunction {
  absl::string_view name;
  int objectives;
  int min_dims;
  // Writes the `objectives` values at x into f.
  void (*evaluate)(std::span<const double> x, std::span<double> f);
  std::pair<double, double> (*bounds)(int i, int d);
};

const std::vector<MultiObjectiveFunction>& AllMultiObjectiveFunctions();
const MultiObjectiveFunction* FindMultiObjectiveFunction(absl::string_view name);
// "f1", "f2", ...: the metric of objective i (0-based).
std::string MultiObjectiveMetric(int i);

const std::vector<BenchmarkFunction>& AllBenchmarkFunctions();
const BenchmarkFunction* FindBenchmarkFunction(absl::string_view name);
// "branin, hartmann6, ..." for error messages.
std::string BenchmarkFunctionNames();

}  // namespace dhpt
