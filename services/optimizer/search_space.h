#pragma once

// The optimisers' view of a study: typed parameters, points in the space, and the mapping
// between the unit cube and parameter values. No proto types: the scheduler translates.

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "services/common/random.h"

namespace dhpt::optimizer {

enum class ParameterKind { kDouble, kInt, kCategorical, kDiscrete };

struct ParameterSpec {
  std::string name;
  ParameterKind kind = ParameterKind::kDouble;
  // kDouble and kInt: the closed range [min, max]; log samples uniformly in log space; step > 0
  // restricts values to min + k * step.
  double min = 0;
  double max = 0;
  bool log = false;
  double step = 0;
  std::vector<std::string> categories;   // kCategorical
  std::vector<double> discrete_values;   // kDiscrete
};

using ParameterValue = std::variant<double, int64_t, std::string>;
// One value per parameter, in the order of SearchSpace::parameters().
using Point = std::vector<ParameterValue>;

class SearchSpace {
 public:
  SearchSpace() = default;
  explicit SearchSpace(std::vector<ParameterSpec> parameters);

  const std::vector<ParameterSpec>& parameters() const { return parameters_; }
  int dims() const { return static_cast<int>(parameters_.size()); }

  // Maps a coordinate u in [0, 1) of parameter i to a value: uniform in the (log) range,
  // rounded to the int lattice or step; an index for categorical and discrete parameters.
  ParameterValue FromUnit(int i, double u) const;
  Point FromUnitPoint(const std::vector<double>& u) const;

  // Number of distinct points when every parameter is countable (ints, steps, choices);
  // nullopt when some parameter is continuous or the count exceeds 2^62.
  std::optional<int64_t> FiniteSize() const;
  // How many distinct values parameter i takes; nullopt for a continuous range.
  std::optional<int64_t> ValueCount(int i) const;
  // The distinct values of a countable parameter, in increasing order (choices as given).
  // Call only when ValueCount(i) is small enough to hold in memory.
  std::vector<ParameterValue> CountableValues(int i) const;

  // The model-based optimisers' view of parameter i. Numeric parameters live on [low, high]
  // (log-transformed when log); step > 0 means only low + k * step are values (ints, stepped
  // doubles). Categorical and discrete parameters are choices, represented by their index.
  struct Internal {
    bool choice = false;
    int choices = 0;  // Number of choices when `choice`.
    double low = 0;
    double high = 0;
    double step = 0;
  };
  Internal InternalDomain(int i) const;
  double ToInternal(int i, const ParameterValue& value) const;
  // Rounds to the parameter's lattice and clamps to its range.
  ParameterValue FromInternal(int i, double x) const;

  // A canonical byte string: equal points, equal keys.
  std::string Key(const Point& point) const;

 private:
  std::vector<ParameterSpec> parameters_;
};

using ::dhpt::SeededGenerator;
using ::dhpt::UniformUnit;

}  // namespace dhpt::optimizer
