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

SearchSpace::SearchSpace(std::vector<ParameterSpec> parameters)
    : parameters_(std::move(parameters)) {}

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
      const double k = std::round((value - p.min) / step);
      return static_cast<int64_t>(std::clamp(p.min + k * step, p.min, p.max));
    }
    case ParameterKind::kDouble: {
      double value = p.log ? std::exp(std::log(p.min) + u * (std::log(p.max) - std::log(p.min)))
                           : p.min + u * (p.max - p.min);
      if (p.step > 0) value = p.min + std::round((value - p.min) / p.step) * p.step;
      return std::clamp(value, p.min, p.max);
    }
  }
  return 0.0;
}

Point SearchSpace::FromUnitPoint(const std::vector<double>& u) const {
  Point point;
  point.reserve(parameters_.size());
  for (int i = 0; i < dims(); ++i) point.push_back(FromUnit(i, u[i]));
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
      double v = p.log ? std::round(std::exp(x)) : x;
      if (!p.log) {
        const double step = p.step > 0 ? p.step : 1;
        v = p.min + std::round((v - p.min) / step) * step;
      }
      return static_cast<int64_t>(std::clamp(v, p.min, p.max));
    }
    case ParameterKind::kDouble: {
      double v = p.log ? std::exp(x) : x;
      if (p.step > 0) v = p.min + std::round((v - p.min) / p.step) * p.step;
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

}  // namespace dhpt::optimizer
