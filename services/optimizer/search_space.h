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

// A parameter that a condition switches off has no value in the point: std::monostate
// (Inactive), which translation leaves out of the trial's parameters.
using Inactive = std::monostate;
using ParameterValue = std::variant<double, int64_t, std::string, Inactive>;

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
  // Conditional spaces: the index of the parent parameter, and the parent's values (as
  // ParameterValue of the parent's kind) that make this parameter active; -1: always active.
  int parent = -1;
  std::vector<ParameterValue> active_values;
};

// One value per parameter, in the order of SearchSpace::parameters().
using Point = std::vector<ParameterValue>;

// A forbidden combination: a point is forbidden when, for every term, parameter `parameter`
// is active and takes one of `values`.
struct ForbiddenTerm {
  int parameter = 0;
  std::vector<ParameterValue> values;
};
using ForbiddenClause = std::vector<ForbiddenTerm>;

class SearchSpace {
 public:
  SearchSpace() = default;
  // Parents (ParameterSpec::parent) must form no cycle: spec validation refuses them.
  explicit SearchSpace(std::vector<ParameterSpec> parameters,
                       std::vector<ForbiddenClause> forbidden = {});

  const std::vector<ParameterSpec>& parameters() const { return parameters_; }
  int dims() const { return static_cast<int>(parameters_.size()); }

  // Conditional spaces (docs/concepts.md#conditional-search-spaces). Every optimiser keeps a
  // point canonical: a parameter is active when its parent is active and takes one of its
  // active_values, and only active parameters have a value.
  bool conditional() const { return conditional_; }
  const std::vector<ForbiddenClause>& forbidden() const { return forbidden_; }
  // Parameter indices with every parent before its children.
  const std::vector<int>& order() const { return order_; }
  // Whether parameter i is active, given its parent's value in `point` (Inactive when the
  // parent is itself inactive: ancestors must be canonical already).
  bool Active(const Point& point, int i) const;
  // Makes `point` canonical, parents first: inactive parameters become Inactive; an active one
  // without a value (its parent just changed) is drawn uniformly with `generator`, or, when
  // `generator` is null, left without one (callers that pass null give every parameter a value).
  void Canonicalize(Point& point, std::mt19937_64* generator) const;
  bool Forbidden(const Point& point) const;

  // Maps a coordinate u in [0, 1) of parameter i to a value: uniform in the (log) range,
  // rounded to the int lattice or step; an index for categorical and discrete parameters.
  ParameterValue FromUnit(int i, double u) const;
  // A canonical point: coordinates of inactive parameters are drawn but dropped.
  Point FromUnitPoint(const std::vector<double>& u) const;

  // Number of distinct canonical, allowed points when every parameter is countable (ints,
  // steps, choices): in a conditional space the sum over its branches; nullopt when some
  // parameter is continuous or the count exceeds 2^62 (or, with forbidden clauses, exceeds
  // kMaxCountedPoints, since those points are counted one by one).
  std::optional<int64_t> FiniteSize() const;
  static constexpr int64_t kMaxCountedPoints = 1'000'000;
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
  // NaN for an Inactive value.
  double ToInternal(int i, const ParameterValue& value) const;
  // Rounds to the parameter's lattice and clamps to its range.
  ParameterValue FromInternal(int i, double x) const;

  // A canonical byte string: equal points, equal keys.
  std::string Key(const Point& point) const;

 private:
  std::vector<ParameterSpec> parameters_;
  std::vector<ForbiddenClause> forbidden_;
  std::vector<int> order_;
  bool conditional_ = false;
};

// The points of a conditional space whose parameters take the values of `axes` (one list per
// parameter; a countable space's CountableValues, or GRID's axes): canonical points only, so
// their number is the sum over the branches of the parents' values, not the product. A point
// is addressed by its index in [0, size): within one branch (one assignment of the parents),
// the last active parameter varies fastest; in an unconditional space it is the cartesian
// product in mixed radix, last parameter fastest. Forbidden points are included (callers
// skip them).
class BranchGrid {
 public:
  BranchGrid(const SearchSpace& space, std::vector<std::vector<ParameterValue>> axes);
  // nullopt past 2^62 points or kMaxBranches branches.
  std::optional<int64_t> size() const { return size_; }
  Point PointAt(int64_t index) const;
  static constexpr int64_t kMaxBranches = 100'000;

 private:
  struct Branch {
    Point parents;             // Values of the parents; Inactive elsewhere.
    std::vector<int> leaves;   // The active non-parent parameters, in index order.
    int64_t first = 0;         // Index of its first point.
  };
  std::vector<std::vector<ParameterValue>> axes_;
  std::vector<Branch> branches_;
  std::optional<int64_t> size_;
};

// The number of canonical points of a space whose parameter i takes counts[i] values (the
// parents' values are the space's CountableValues); nullopt past 2^62 or kMaxBranches branches.
std::optional<int64_t> CountBranchPoints(const SearchSpace& space,
                                         const std::vector<int64_t>& counts);

using ::dhpt::SeededGenerator;
using ::dhpt::UniformUnit;

// The point min + k * step nearest `value`, k from 0 to the last point within max. When max is
// off the lattice (2 to 500 by 50) the last point is below it (452): clamping the rounded value
// to max instead gave 500, a value the scheduler then refused as off the lattice when it came
// back (found by fuzz/spec_fuzzer).
double NearestLatticePoint(double min, double max, double step, double value);

}  // namespace dhpt::optimizer
