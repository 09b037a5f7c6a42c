#include "services/study/spec_translation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/study/spec_errors.h"

namespace dhpt::study {

optimizer::SearchSpace ToSearchSpace(const v1::StudySpec& spec) {
  std::vector<optimizer::ParameterSpec> parameters;
  for (const v1::Parameter& p : spec.parameters()) {
    optimizer::ParameterSpec out;
    out.name = p.name();
    switch (p.domain_case()) {
      case v1::Parameter::kDoubleRange:
        out.kind = optimizer::ParameterKind::kDouble;
        out.min = p.double_range().min();
        out.max = p.double_range().max();
        out.log = p.double_range().log();
        out.step = p.double_range().step();
        break;
      case v1::Parameter::kIntRange:
        out.kind = optimizer::ParameterKind::kInt;
        out.min = static_cast<double>(p.int_range().min());
        out.max = static_cast<double>(p.int_range().max());
        out.log = p.int_range().log();
        out.step = static_cast<double>(p.int_range().step());
        break;
      case v1::Parameter::kCategorical:
        out.kind = optimizer::ParameterKind::kCategorical;
        out.categories.assign(p.categorical().values().begin(), p.categorical().values().end());
        break;
      case v1::Parameter::kDiscrete:
        out.kind = optimizer::ParameterKind::kDiscrete;
        out.discrete_values.assign(p.discrete().values().begin(), p.discrete().values().end());
        break;
      case v1::Parameter::DOMAIN_NOT_SET:
        break;
    }
    parameters.push_back(std::move(out));
  }
  // Conditions and forbidden clauses name parameters; a name or value that does not resolve
  // (an unvalidated spec) is left out: spec validation reports it.
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (parameters[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  auto typed = [&](int i, const auto& values) {
    std::vector<optimizer::ParameterValue> out;
    for (const google::protobuf::Value& v : values) {
      if (std::optional<optimizer::ParameterValue> t = TypedValue(parameters[i], v)) out.push_back(*t);
    }
    return out;
  };
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::Parameter& p = spec.parameters(i);
    if (!p.has_condition()) continue;
    const int parent = index_of(p.condition().parent());
    if (parent < 0 || parent == i) continue;
    parameters[i].parent = parent;
    parameters[i].active_values = typed(parent, p.condition().values());
  }
  std::vector<optimizer::ForbiddenClause> forbidden;
  for (const v1::ForbiddenClause& clause : spec.forbidden()) {
    optimizer::ForbiddenClause out;
    for (const v1::ParameterIn& term : clause.all()) {
      const int i = index_of(term.parameter());
      if (i >= 0) out.push_back({i, typed(i, term.values())});
    }
    if (!out.empty()) forbidden.push_back(std::move(out));
  }
  return optimizer::SearchSpace(std::move(parameters), std::move(forbidden));
}

std::optional<optimizer::ParameterValue> TypedValue(const optimizer::ParameterSpec& p,
                                                    const google::protobuf::Value& value) {
  if (p.kind == optimizer::ParameterKind::kCategorical) {
    if (value.kind_case() != google::protobuf::Value::kStringValue) return std::nullopt;
    return optimizer::ParameterValue(value.string_value());
  }
  if (value.kind_case() != google::protobuf::Value::kNumberValue ||
      !std::isfinite(value.number_value())) {
    return std::nullopt;
  }
  const double x = value.number_value();
  if (p.kind == optimizer::ParameterKind::kInt) {
    if (x != std::floor(x) || std::abs(x) > 9e15) return std::nullopt;
    return optimizer::ParameterValue(static_cast<int64_t>(x));
  }
  return optimizer::ParameterValue(x);
}

optimizer::OptimizerConfig ToOptimizerConfig(const v1::StudySpec& spec) {
  optimizer::OptimizerConfig config;
  const v1::Algorithm& algorithm = spec.algorithm();
  switch (algorithm.name()) {
    case v1::Algorithm::GRID:
      config.algorithm = optimizer::Algorithm::kGrid;
      break;
    case v1::Algorithm::TPE:
      config.algorithm = optimizer::Algorithm::kTpe;
      break;
    case v1::Algorithm::HILL_CLIMBING:
      config.algorithm = optimizer::Algorithm::kHillClimbing;
      break;
    case v1::Algorithm::BAYESIAN:
      config.algorithm = optimizer::Algorithm::kBayesian;
      break;
    case v1::Algorithm::NSGA2:
      config.algorithm = optimizer::Algorithm::kNsga2;
      break;
    default:
      config.algorithm = optimizer::Algorithm::kRandom;
      break;
  }
  config.seed = algorithm.seed();
  config.grid_points = algorithm.grid_points();
  config.minimize = spec.objective().goal() != v1::Objective::MAXIMIZE;
  if (spec.objectives_size() >= 2) {
    for (const v1::Objective& objective : spec.objectives()) {
      config.objectives_minimize.push_back(objective.goal() != v1::Objective::MAXIMIZE);
    }
  }
  // Normalised specs carry every setting explicitly (NormalizeStudySpec fills the defaults).
  const v1::TpeSettings& tpe = algorithm.tpe();
  config.tpe = {.n_startup_trials = tpe.n_startup_trials(),
                .n_ei_candidates = tpe.n_ei_candidates(),
                .multivariate = tpe.multivariate(),
                .constant_liar = tpe.constant_liar(),
                .prior_weight = tpe.prior_weight(),
                .bandwidth_weighted = tpe.bandwidth_weighted(),
                .condition_on_parent = tpe.condition_on_parent()};
  const v1::BayesianSettings& bayesian = algorithm.bayesian();
  config.bayesian.n_startup_trials = bayesian.n_startup_trials();
  config.bayesian.candidates = bayesian.candidates();
  config.bayesian.max_fit_points = bayesian.max_fit_points();
  config.bayesian.warp_objective = bayesian.warp_objective();
  const v1::Nsga2Settings& nsga2 = algorithm.nsga2();
  config.nsga2.population_size = nsga2.population_size();
  if (nsga2.has_mutation_prob()) config.nsga2.mutation_prob = nsga2.mutation_prob();
  config.nsga2.crossover_prob = nsga2.crossover_prob();
  config.nsga2.swapping_prob = nsga2.swapping_prob();
  const v1::HillClimbingSettings& hill = algorithm.hill_climbing();
  config.hill_climbing = {.initial_step = hill.initial_step(),
                          .shrink_factor = hill.shrink_factor(),
                          .patience = hill.patience(),
                          .min_step = hill.min_step(),
                          .flip_probability = hill.flip_probability()};
  return config;
}

ParamMap ToParamMap(const optimizer::SearchSpace& space, const optimizer::Point& point) {
  ParamMap params;
  for (int i = 0; i < space.dims(); ++i) {
    // An inactive parameter is absent from the trial, never given a default.
    if (std::holds_alternative<optimizer::Inactive>(point[i])) continue;
    v1::ParameterValue& value = params[space.parameters()[i].name];
    std::visit(
        [&value](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>) {
            value.set_double_value(v);
          } else if constexpr (std::is_same_v<T, int64_t>) {
            value.set_int_value(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            value.set_string_value(v);
          }
        },
        point[i]);
  }
  return params;
}

absl::StatusOr<optimizer::Point> ToPoint(const optimizer::SearchSpace& space,
                                         const ParamMap& params) {
  optimizer::Point point(static_cast<size_t>(space.dims()), optimizer::Inactive{});
  for (int i : space.order()) {  // Parents first: whether a parameter is active needs them.
    const optimizer::ParameterSpec& p = space.parameters()[i];
    auto it = params.find(p.name);
    if (!space.Active(point, i)) {
      if (it != params.end()) {
        return absl::DataLossError(absl::StrCat(p.name, " has a value but its condition does not hold"));
      }
      continue;
    }
    if (it == params.end()) return absl::DataLossError(absl::StrCat("no value for ", p.name));
    const v1::ParameterValue& v = it->second;
    switch (p.kind) {
      case optimizer::ParameterKind::kDouble:
      case optimizer::ParameterKind::kDiscrete:
        if (v.kind_case() != v1::ParameterValue::kDoubleValue) break;
        point[i] = v.double_value();
        continue;
      case optimizer::ParameterKind::kInt:
        if (v.kind_case() != v1::ParameterValue::kIntValue) break;
        point[i] = v.int_value();
        continue;
      case optimizer::ParameterKind::kCategorical:
        if (v.kind_case() != v1::ParameterValue::kStringValue) break;
        point[i] = v.string_value();
        continue;
    }
    return absl::DataLossError(absl::StrCat("value of ", p.name, " has the wrong type"));
  }
  return point;
}

EarlyStoppingRule ToEarlyStoppingRule(const v1::StudySpec& spec) {
  const v1::EarlyStopping& stopping = spec.early_stopping();
  auto percentile = [](const v1::PercentileStopping& rule) {
    return PercentileRule{.percentile = rule.percentile(),
                          .n_startup_trials = rule.n_startup_trials(),
                          .n_warmup_steps = rule.n_warmup_steps(),
                          .interval_steps = rule.interval_steps()};
  };
  switch (stopping.rule_case()) {
    case v1::EarlyStopping::kMedian:
      return percentile(stopping.median());
    case v1::EarlyStopping::kPercentile:
      return percentile(stopping.percentile());
    case v1::EarlyStopping::kAsha:
      return AshaRule{.min_resource = stopping.asha().min_resource(),
                      .reduction_factor = stopping.asha().reduction_factor(),
                      .min_early_stopping_rate = stopping.asha().min_early_stopping_rate()};
    case v1::EarlyStopping::kHyperband:
      return HyperbandRule{.min_resource = stopping.hyperband().min_resource(),
                           .max_resource = stopping.hyperband().max_resource(),
                           .reduction_factor = stopping.hyperband().reduction_factor(),
                           .seed = static_cast<uint64_t>(spec.algorithm().seed())};
    case v1::EarlyStopping::RULE_NOT_SET:
      break;
  }
  return std::monostate();
}

absl::StatusOr<optimizer::Point> PointFromValues(
    const optimizer::SearchSpace& space,
    const google::protobuf::Map<std::string, google::protobuf::Value>& values,
    absl::string_view field) {
  for (const auto& entry : values) {  // Not a structured binding: clang 14 cannot capture one.
    const std::string& name = entry.first;
    const auto& parameters = space.parameters();
    if (std::none_of(parameters.begin(), parameters.end(),
                     [&](const optimizer::ParameterSpec& p) { return p.name == name; })) {
      return Invalid(field, absl::StrCat(Quote(name), " is not a parameter of the study"));
    }
  }
  optimizer::Point point(static_cast<size_t>(space.dims()), optimizer::Inactive{});
  for (int i : space.order()) {  // Parents first: whether a parameter is active needs them.
    const optimizer::ParameterSpec& p = space.parameters()[i];
    const std::string at = absl::StrCat(field, ".", p.name);
    auto it = values.find(p.name);
    if (!space.Active(point, i)) {
      if (it == values.end()) continue;
      const optimizer::ParameterSpec& parent = space.parameters()[p.parent];
      return Invalid(at, absl::StrCat("is inactive: its condition on ", Quote(parent.name),
                                      " does not hold for this point, so leave it out"));
    }
    if (it == values.end()) return Invalid(at, "is missing: give every active parameter a value");
    const google::protobuf::Value& value = it->second;
    if (p.kind == optimizer::ParameterKind::kCategorical) {
      if (value.kind_case() != google::protobuf::Value::kStringValue ||
          std::find(p.categories.begin(), p.categories.end(), value.string_value()) ==
              p.categories.end()) {
        return Invalid(at, "must be one of the parameter's categorical values");
      }
      point[i] = value.string_value();
      continue;
    }
    if (value.kind_case() != google::protobuf::Value::kNumberValue ||
        !std::isfinite(value.number_value())) {
      return Invalid(at, "must be a number");
    }
    double x = value.number_value();
    if (p.kind == optimizer::ParameterKind::kDiscrete) {
      if (std::find(p.discrete_values.begin(), p.discrete_values.end(), x) ==
          p.discrete_values.end()) {
        return Invalid(at, absl::StrCat(x, " is not one of the parameter's discrete values"));
      }
      point[i] = x;
      continue;
    }
    if (x < p.min || x > p.max) {
      return Invalid(at, absl::StrCat(x, " is outside [", p.min, ", ", p.max, "]"));
    }
    if (p.step > 0) {
      const double k = (x - p.min) / p.step;
      if (std::abs(k - std::round(k)) > 1e-9 * std::max(1.0, std::abs(k))) {
        return Invalid(at, absl::StrCat(x, " is not min + k * step (step ", p.step, ")"));
      }
      // The lattice point as the optimisers compute it, so that 0.3 and 0.30000000000000004
      // on a 0.1 step are one point, the one a suggestion of it would hold.
      x = std::clamp(p.min + std::round(k) * p.step, p.min, p.max);
    }
    if (p.kind == optimizer::ParameterKind::kInt) {
      if (x != std::floor(x)) return Invalid(at, absl::StrCat(x, " is not a whole number"));
      point[i] = static_cast<int64_t>(x);
      continue;
    }
    point[i] = x;
  }
  if (space.Forbidden(point)) {
    return Invalid(field, "is a forbidden combination of the study's `forbidden` clauses");
  }
  return point;
}

}  // namespace dhpt::study
