#include "services/optimizer/search_space.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dhpt::optimizer {
namespace {

// Index k in [0, n) from u in [0, 1).
int64_t UnitToIndex(double u, int64_t n) {
  return std::clamp<int64_t>(static_cast<int64_t>(u * static_cast<double>(n)), 0, n - 1);
}

}  // namespace

SearchSpace::SearchSpace(std::vector<ParameterSpec> parameters,
                         std::vector<ForbiddenClause> forbidden)
    : parameters_(std::move(parameters)), forbidden_(std::move(forbidden)) {
  // Parents before children: sort by depth in the condition tree (validation refuses cycles;
  // the depth is capped all the same so that a cycle cannot hang a constructor).
  std::vector<int> depth(parameters_.size(), 0);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    for (int p = parameters_[i].parent; p >= 0 && depth[i] <= dims(); p = parameters_[p].parent) {
      ++depth[i];
    }
    conditional_ = conditional_ || parameters_[i].parent >= 0;
  }
  order_.resize(parameters_.size());
  for (int i = 0; i < dims(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return depth[a] < depth[b]; });
}

bool SearchSpace::Active(const Point& point, int i) const {
  const ParameterSpec& p = parameters_[i];
  if (p.parent < 0) return true;
  const ParameterValue& parent = point[p.parent];
  if (std::holds_alternative<Inactive>(parent)) return false;
  return std::find(p.active_values.begin(), p.active_values.end(), parent) != p.active_values.end();
}

void SearchSpace::Canonicalize(Point& point, std::mt19937_64* generator) const {
  if (!conditional_) return;
  for (int i : order_) {
    if (!Active(point, i)) {
      point[i] = Inactive{};
    } else if (generator != nullptr && std::holds_alternative<Inactive>(point[i])) {
      point[i] = FromUnit(i, UniformUnit(*generator));
    }
  }
}

bool SearchSpace::Forbidden(const Point& point) const {
  for (const ForbiddenClause& clause : forbidden_) {
    const bool all = std::all_of(clause.begin(), clause.end(), [&](const ForbiddenTerm& term) {
      const ParameterValue& value = point[term.parameter];
      return !std::holds_alternative<Inactive>(value) &&
             std::find(term.values.begin(), term.values.end(), value) != term.values.end();
    });
    if (all && !clause.empty()) return true;
  }
  return false;
}

ParameterValue SearchSpace::FromUnit(int i, double u) const {
  const ParameterSpec& p = parameters_[i];
  switch (p.kind) {
    case ParameterKind::kCategorical:
      return p.categories[UnitToIndex(u, static_cast<int64_t>(p.categories.size()))];
    case ParameterKind::kDiscrete:
      return p.discrete_values[UnitToIndex(u, static_cast<int64_t>(p.discrete_values.size()))];
    case ParameterKind::kInt: {
      // Sample the continuous range widened by half a lattice step at both ends (in log space
      // when log), then round: every integer gets its fair share of the mass.
      const double step = p.step > 0 ? p.step : 1;
      double value;
      if (p.log) {
        const double lo = std::log(std::max(p.min - 0.5, 0.5)), hi = std::log(p.max + 0.5);
        value = std::exp(lo + u * (hi - lo));
      } else {
        value = (p.min - step / 2) + u * (p.max - p.min + step);
      }
      return static_cast<int64_t>(NearestLatticePoint(p.min, p.max, step, value));
    }
    case ParameterKind::kDouble: {
      double value = p.log ? std::exp(std::log(p.min) + u * (std::log(p.max) - std::log(p.min)))
                           : p.min + u * (p.max - p.min);
      if (p.step > 0) return NearestLatticePoint(p.min, p.max, p.step, value);
      return std::clamp(value, p.min, p.max);
    }
  }
  return 0.0;
}

Point SearchSpace::FromUnitPoint(const std::vector<double>& u) const {
  Point point;
  point.reserve(parameters_.size());
  for (int i = 0; i < dims(); ++i) point.push_back(FromUnit(i, u[i]));
  Canonicalize(point, nullptr);
  return point;
}

std::optional<int64_t> SearchSpace::ValueCount(int i) const {
  const ParameterSpec& p = parameters_[i];
  switch (p.kind) {
    case ParameterKind::kCategorical:
      return static_cast<int64_t>(p.categories.size());
    case ParameterKind::kDiscrete:
      return static_cast<int64_t>(p.discrete_values.size());
    case ParameterKind::kInt:
      return static_cast<int64_t>(std::floor((p.max - p.min) / (p.step > 0 ? p.step : 1))) + 1;
    case ParameterKind::kDouble:
      if (p.step > 0) return static_cast<int64_t>(std::floor((p.max - p.min) / p.step + 1e-9)) + 1;
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int64_t> SearchSpace::FiniteSize() const {
  if (conditional_ || !forbidden_.empty()) {
    for (int i = 0; i < dims(); ++i) {
      if (!ValueCount(i)) return std::nullopt;
    }
    // The sum over branches of the product of their leaves' counts; the values of leaves are
    // listed only when forbidden points must be counted one by one.
    std::vector<int64_t> counts;
    for (int i = 0; i < dims(); ++i) counts.push_back(*ValueCount(i));
    const std::optional<int64_t> size = CountBranchPoints(*this, counts);
    if (!size || forbidden_.empty()) return size;
    if (*size > kMaxCountedPoints) return std::nullopt;
    std::vector<std::vector<ParameterValue>> axes;
    for (int i = 0; i < dims(); ++i) axes.push_back(CountableValues(i));
    const BranchGrid grid(*this, std::move(axes));
    int64_t allowed = 0;
    for (int64_t k = 0; k < *size; ++k) allowed += Forbidden(grid.PointAt(k)) ? 0 : 1;
    return allowed;
  }
  int64_t size = 1;
  for (int i = 0; i < dims(); ++i) {
    std::optional<int64_t> count = ValueCount(i);
    if (!count || *count <= 0) return std::nullopt;
    if (size > (int64_t{1} << 62) / *count) return std::nullopt;
    size *= *count;
  }
  return size;
}

std::vector<ParameterValue> SearchSpace::CountableValues(int i) const {
  const ParameterSpec& p = parameters_[i];
  std::vector<ParameterValue> values;
  switch (p.kind) {
    case ParameterKind::kCategorical:
      values.assign(p.categories.begin(), p.categories.end());
      break;
    case ParameterKind::kDiscrete:
      values.assign(p.discrete_values.begin(), p.discrete_values.end());
      break;
    case ParameterKind::kInt:
    case ParameterKind::kDouble: {
      std::optional<int64_t> count = ValueCount(i);
      const double step = p.step > 0 ? p.step : 1;
      for (int64_t k = 0; count && k < *count; ++k) {
        const double v = p.min + static_cast<double>(k) * step;
        if (p.kind == ParameterKind::kInt) {
          values.emplace_back(static_cast<int64_t>(v));
        } else {
          values.emplace_back(std::min(v, p.max));
        }
      }
      break;
    }
  }
  return values;
}

SearchSpace::Internal SearchSpace::InternalDomain(int i) const {
  const ParameterSpec& p = parameters_[i];
  Internal d;
  switch (p.kind) {
    case ParameterKind::kCategorical:
      d.choice = true;
      d.choices = static_cast<int>(p.categories.size());
      break;
    case ParameterKind::kDiscrete:
      d.choice = true;
      d.choices = static_cast<int>(p.discrete_values.size());
      break;
    case ParameterKind::kInt:
      if (p.log) {
        // Widened by half an integer at both ends, so the end values get their share.
        d.low = std::log(p.min - 0.5);
        d.high = std::log(p.max + 0.5);
      } else {
        d.low = p.min;
        d.high = p.max;
        d.step = p.step > 0 ? p.step : 1;
      }
      break;
    case ParameterKind::kDouble:
      d.low = p.log ? std::log(p.min) : p.min;
      d.high = p.log ? std::log(p.max) : p.max;
      d.step = p.log ? 0 : p.step;
      break;
  }
  return d;
}

double SearchSpace::ToInternal(int i, const ParameterValue& value) const {
  const ParameterSpec& p = parameters_[i];
  if (std::holds_alternative<Inactive>(value)) return std::nan("");
  switch (p.kind) {
    case ParameterKind::kCategorical: {
      const auto it = std::find(p.categories.begin(), p.categories.end(), std::get<std::string>(value));
      return static_cast<double>(it - p.categories.begin());
    }
    case ParameterKind::kDiscrete: {
      const auto it =
          std::find(p.discrete_values.begin(), p.discrete_values.end(), std::get<double>(value));
      return static_cast<double>(it - p.discrete_values.begin());
    }
    case ParameterKind::kInt: {
      const double v = static_cast<double>(std::get<int64_t>(value));
      return p.log ? std::log(v) : v;
    }
    case ParameterKind::kDouble:
      return p.log ? std::log(std::get<double>(value)) : std::get<double>(value);
  }
  return 0;
}

ParameterValue SearchSpace::FromInternal(int i, double x) const {
  const ParameterSpec& p = parameters_[i];
  switch (p.kind) {
    case ParameterKind::kCategorical:
      return p.categories[std::clamp<int64_t>(std::llround(x), 0, p.categories.size() - 1)];
    case ParameterKind::kDiscrete:
      return p.discrete_values[std::clamp<int64_t>(std::llround(x), 0,
                                                   p.discrete_values.size() - 1)];
    case ParameterKind::kInt: {
      if (!p.log) return static_cast<int64_t>(NearestLatticePoint(p.min, p.max, std::max(p.step, 1.0), x));
      return static_cast<int64_t>(std::clamp(std::round(std::exp(x)), p.min, p.max));
    }
    case ParameterKind::kDouble: {
      const double v = p.log ? std::exp(x) : x;
      if (p.step > 0) return NearestLatticePoint(p.min, p.max, p.step, v);
      return std::clamp(v, p.min, p.max);
    }
  }
  return 0.0;
}

std::string SearchSpace::Key(const Point& point) const {
  std::string key;
  for (const ParameterValue& value : point) {
    if (const auto* d = std::get_if<double>(&value)) {
      key.push_back('d');
      char bytes[sizeof(double)];
      const double normalised = *d == 0 ? 0.0 : *d;  // -0.0 and 0.0 are one point.
      std::memcpy(bytes, &normalised, sizeof bytes);
      key.append(bytes, sizeof bytes);
    } else if (const auto* n = std::get_if<int64_t>(&value)) {
      key.push_back('i');
      char bytes[sizeof(int64_t)];
      std::memcpy(bytes, n, sizeof bytes);
      key.append(bytes, sizeof bytes);
    } else if (std::holds_alternative<Inactive>(value)) {
      key.push_back('-');
    } else {
      const std::string& s = std::get<std::string>(value);
      key.push_back('s');
      key.append(std::to_string(s.size()));
      key.push_back(':');
      key.append(s);
    }
  }
  return key;
}

namespace {

// Calls `emit(parents, leaves)` for every branch of the space: every assignment of values
// (from `parent_values(i)`) to the active parents, in depth-first order along
// SearchSpace::order(); `leaves` are then the active non-parent parameters, in index order.
// False when there are more than `max_branches`.
template <typename Values, typename Emit>
bool ForEachBranch(const SearchSpace& space, const Values& parent_values, int64_t max_branches,
                   const Emit& emit) {
  std::vector<bool> is_parent(static_cast<size_t>(space.dims()), false);
  for (const ParameterSpec& p : space.parameters()) {
    if (p.parent >= 0) is_parent[p.parent] = true;
  }
  int64_t branches = 0;
  Point point(static_cast<size_t>(space.dims()), Inactive{});
  std::vector<int> leaves;
  // Walks order()[k..]: returns false once past max_branches.
  auto walk = [&](auto& self, size_t k) -> bool {
    if (k == space.order().size()) {
      if (++branches > max_branches) return false;
      std::vector<int> sorted = leaves;
      std::sort(sorted.begin(), sorted.end());
      emit(point, sorted);
      return true;
    }
    const int i = space.order()[k];
    if (!space.Active(point, i)) {
      point[i] = Inactive{};
      return self(self, k + 1);
    }
    if (!is_parent[i]) {
      leaves.push_back(i);
      const bool ok = self(self, k + 1);
      leaves.pop_back();
      return ok;
    }
    for (const ParameterValue& value : parent_values(i)) {
      point[i] = value;
      if (!self(self, k + 1)) return false;
    }
    point[i] = Inactive{};
    return true;
  };
  return walk(walk, 0);
}

// a * b, or nullopt past 2^62.
std::optional<int64_t> Times(int64_t a, int64_t b) {
  if (b != 0 && a > (int64_t{1} << 62) / b) return std::nullopt;
  return a * b;
}

}  // namespace

std::optional<int64_t> CountBranchPoints(const SearchSpace& space,
                                         const std::vector<int64_t>& counts) {
  for (const ParameterSpec& p : space.parameters()) {
    if (p.parent >= 0 && counts[p.parent] > BranchGrid::kMaxBranches) return std::nullopt;
  }
  std::optional<int64_t> total = 0;
  auto parent_values = [&](int i) { return space.CountableValues(i); };
  const bool ok = ForEachBranch(space, parent_values, BranchGrid::kMaxBranches,
                                [&](const Point&, const std::vector<int>& leaves) {
                                  std::optional<int64_t> points = 1;
                                  for (int i : leaves) {
                                    if (points) points = Times(*points, counts[i]);
                                  }
                                  if (!points || !total || *total > (int64_t{1} << 62) - *points) {
                                    total = std::nullopt;
                                  } else {
                                    *total += *points;
                                  }
                                });
  if (!ok) return std::nullopt;
  return total;
}

BranchGrid::BranchGrid(const SearchSpace& space, std::vector<std::vector<ParameterValue>> axes)
    : axes_(std::move(axes)) {
  std::optional<int64_t> total = 0;
  auto parent_values = [&](int i) -> const std::vector<ParameterValue>& { return axes_[i]; };
  const bool ok = ForEachBranch(space, parent_values, kMaxBranches,
                                [&](const Point& parents, const std::vector<int>& leaves) {
                                  std::optional<int64_t> points = 1;
                                  for (int i : leaves) {
                                    if (points) points = Times(*points, axes_[i].size());
                                  }
                                  if (!points || !total || *total > (int64_t{1} << 62) - *points) {
                                    total = std::nullopt;
                                    return;
                                  }
                                  if (*points == 0) return;
                                  branches_.push_back({parents, leaves, *total});
                                  *total += *points;
                                });
  if (ok) size_ = total;
}

Point BranchGrid::PointAt(int64_t index) const {
  const auto after = std::upper_bound(branches_.begin(), branches_.end(), index,
                                      [](int64_t k, const Branch& b) { return k < b.first; });
  const Branch& branch = *(after - 1);
  Point point = branch.parents;
  int64_t offset = index - branch.first;
  for (auto it = branch.leaves.rbegin(); it != branch.leaves.rend(); ++it) {
    const int64_t n = static_cast<int64_t>(axes_[*it].size());
    point[*it] = axes_[*it][offset % n];
    offset /= n;
  }
  return point;
}

double NearestLatticePoint(double min, double max, double step, double value) {
  const double last = std::floor((max - min) / step + 1e-9);
  return min + std::clamp(std::round((value - min) / step), 0.0, last) * step;
}

}  // namespace dhpt::optimizer
