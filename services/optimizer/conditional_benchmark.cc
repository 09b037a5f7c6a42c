#include "services/optimizer/conditional_benchmark.h"

#include <cmath>

namespace dhpt::optimizer {
namespace {

enum Index { kModel, kAlpha, kDepth, kBooster, kRateDrop, kLayers, kWidth1, kWidth2, kWidth3, kSubsample };

double Number(const ParameterValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  return static_cast<double>(std::get<int64_t>(v));
}

}  // namespace

SearchSpace ConditionalBenchmarkSpace(bool flat) {
  auto when = [flat](ParameterSpec p, int parent, std::vector<ParameterValue> values) {
    if (!flat) {
      p.parent = parent;
      p.active_values = std::move(values);
    }
    return p;
  };
  std::vector<ParameterSpec> parameters = {
      {.name = "model", .kind = ParameterKind::kCategorical, .categories = {"linear", "tree", "net"}},
      when({.name = "alpha", .kind = ParameterKind::kDouble, .min = 1e-4, .max = 10, .log = true},
           kModel, {std::string("linear")}),
      when({.name = "depth", .kind = ParameterKind::kInt, .min = 1, .max = 12}, kModel,
           {std::string("tree")}),
      when({.name = "booster", .kind = ParameterKind::kCategorical, .categories = {"gbtree", "dart"}},
           kModel, {std::string("tree")}),
      when({.name = "rate_drop", .kind = ParameterKind::kDouble, .min = 0, .max = 1}, kBooster,
           {std::string("dart")}),
      when({.name = "layers", .kind = ParameterKind::kInt, .min = 1, .max = 3}, kModel,
           {std::string("net")}),
      when({.name = "width_1", .kind = ParameterKind::kInt, .min = 8, .max = 256, .log = true},
           kModel, {std::string("net")}),
      when({.name = "width_2", .kind = ParameterKind::kInt, .min = 8, .max = 256, .log = true},
           kLayers, {int64_t{2}, int64_t{3}}),
      when({.name = "width_3", .kind = ParameterKind::kInt, .min = 8, .max = 256, .log = true},
           kLayers, {int64_t{3}}),
      when({.name = "subsample", .kind = ParameterKind::kDouble, .min = 0.1, .max = 1}, kModel,
           {std::string("tree")}),
  };
  std::vector<ForbiddenClause> forbidden;
  if (!flat) {
    forbidden.push_back({{kBooster, {std::string("dart")}}, {kDepth, {int64_t{12}}}});
  }
  return SearchSpace(std::move(parameters), std::move(forbidden));
}

double ConditionalBenchmarkLoss(const Point& point) {
  const std::string& model = std::get<std::string>(point[kModel]);
  if (model == "linear") {
    return 0.4 + std::pow(std::log10(Number(point[kAlpha])) + 1, 2) / 25;
  }
  if (model == "tree") {
    const double depth = Number(point[kDepth]);
    const bool dart = std::get<std::string>(point[kBooster]) == "dart";
    if (dart && depth == 12) return 1;  // Forbidden: only a flat space can suggest it.
    return std::pow(depth - 8, 2) / 60 + std::pow(Number(point[kSubsample]) - 0.8, 2) +
           (dart ? std::pow(Number(point[kRateDrop]) - 0.3, 2) : 0.15);
  }
  // The widths' best value depends on the number of layers (a child whose optimum depends on
  // its parent's value: what TPE's condition_on_parent is for); 3 layers are best.
  const int64_t layers = std::get<int64_t>(point[kLayers]);
  double loss = 0.05 + 0.05 * static_cast<double>(3 - layers);
  for (int k = 0; k < layers; ++k) {
    loss += std::pow(std::log2(Number(point[kWidth1 + k])) - static_cast<double>(4 + layers), 2) / 40;
  }
  return loss;
}

}  // namespace dhpt::optimizer
