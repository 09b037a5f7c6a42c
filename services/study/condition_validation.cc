#include "services/study/condition_validation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_join.h"
#include "services/common/model_catalog.h"
#include "services/study/model_choice.h"
#include "services/study/spec_errors.h"
#include "services/study/spec_translation.h"

namespace dhpt::study {
namespace {

int IndexOf(const v1::StudySpec& spec, const std::string& name) {
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (spec.parameters(i).name() == name) return i;
  }
  return -1;
}

// Checks that `values` (at `field`.values) are values parameter `p` takes; `what` says what
// the values are for, in the messages. Errors go to `errors`.
void CheckValues(const optimizer::ParameterSpec& p,
                 const google::protobuf::RepeatedPtrField<google::protobuf::Value>& values,
                 const std::string& field, std::vector<absl::Status>& errors) {
  if (values.empty()) {
    errors.push_back(Invalid(absl::StrCat(field, ".values"), "must not be empty"));
    return;
  }
  for (int k = 0; k < values.size(); ++k) {
    const std::string at = absl::StrCat(field, ".values[", k, "]");
    const std::optional<optimizer::ParameterValue> value = TypedValue(p, values[k]);
    bool ok = value.has_value();
    if (ok && p.kind == optimizer::ParameterKind::kCategorical) {
      ok = std::find(p.categories.begin(), p.categories.end(), std::get<std::string>(*value)) !=
           p.categories.end();
    } else if (ok && p.kind == optimizer::ParameterKind::kDiscrete) {
      ok = std::find(p.discrete_values.begin(), p.discrete_values.end(),
                     std::get<double>(*value)) != p.discrete_values.end();
    } else if (ok && p.kind == optimizer::ParameterKind::kInt) {
      const double x = static_cast<double>(std::get<int64_t>(*value));
      const double step = p.step > 0 ? p.step : 1;
      ok = x >= p.min && x <= p.max && std::fmod(x - p.min, step) == 0;
    }
    if (!ok) {
      errors.push_back(Invalid(at, absl::StrCat("is not a value of ", Quote(p.name),
                                                p.kind == optimizer::ParameterKind::kCategorical
                                                    ? " (give one of its categorical values)"
                                                    : " (give a number it can take)")));
    }
  }
}

// The model_kind parameter (model_choice.h): a categorical of XGBOOST and RANDOM_FOREST, at
// the root, one of whose values is model.kind; model.fixed must suit every kind.
void ValidateModelChoice(const v1::StudySpec& spec, std::vector<absl::Status>& errors) {
  const int i = ModelKindParameter(spec);
  if (i < 0) return;
  const v1::Parameter& p = spec.parameters(i);
  const std::string field = absl::StrCat("parameters[", i, "]");
  if (!p.has_categorical() || p.has_condition()) {
    errors.push_back(Invalid(field, "model_kind must be a categorical parameter without a "
                                    "condition: the model kinds the study chooses among"));
    return;
  }
  for (int k = 0; k < p.categorical().values_size(); ++k) {
    const std::string& value = p.categorical().values(k);
    v1::Model::Kind kind;
    const std::string value_field = absl::StrCat(field, ".categorical.values[", k, "]");
    if (v1::Model::Kind_Parse(value, &kind) && kind == v1::Model::AUTOENCODER) {
      // Its r2 is a reconstruction of the features, not a prediction of the target: no
      // objective compares it with the others (docs/concepts.md#model-choice).
      errors.push_back(Invalid(value_field,
                               "\"AUTOENCODER\" cannot be in a model choice: its r2 measures "
                               "how well it reconstructs the features, XGBOOST's and "
                               "RANDOM_FOREST's how well they predict the target, so one "
                               "objective cannot compare them; tune it in a study of its own"));
      return;
    }
    if (!v1::Model::Kind_Parse(value, &kind) || !IsChoosableKind(kind)) {
      errors.push_back(Invalid(value_field,
                               absl::StrCat(Quote(value), " is not a model kind a study can "
                                            "choose; give XGBOOST or RANDOM_FOREST")));
      return;
    }
  }
  const std::vector<v1::Model::Kind> kinds = StudyModelKinds(spec);
  if (std::find(kinds.begin(), kinds.end(), spec.model().kind()) == kinds.end()) {
    errors.push_back(Invalid("model.kind", "must be one of model_kind's values (the kind the "
                                           "study's metrics are labelled with)"));
  }
  for (const auto& [key, value] : spec.model().fixed()) {
    for (v1::Model::Kind kind : kinds) {
      if (!IsKnownHyperparameter(kind, key)) {
        errors.push_back(Invalid(absl::StrCat("model.fixed.", key),
                                 absl::StrCat("is not a hyperparameter of ", v1::Model::Kind_Name(kind),
                                              ", one of model_kind's values; fixed values "
                                              "apply to every kind")));
        break;
      }
    }
  }
}

}  // namespace

bool ValidateConditions(const v1::StudySpec& spec, std::vector<absl::Status>& errors) {
  const optimizer::SearchSpace space = ToSearchSpace(spec);
  const size_t before = errors.size();
  auto refused_kind = [&](int i) {
    return space.parameters()[i].kind == optimizer::ParameterKind::kDouble;
  };
  for (int i = 0; i < spec.parameters_size(); ++i) {
    const v1::Parameter& p = spec.parameters(i);
    if (!p.has_condition()) continue;
    const std::string field = absl::StrCat("parameters[", i, "].condition");
    const int parent = IndexOf(spec, p.condition().parent());
    if (parent < 0) {
      errors.push_back(Invalid(absl::StrCat(field, ".parent"),
                               p.condition().parent().empty()
                                   ? std::string("must name the parameter this one depends on")
                                   : absl::StrCat(Quote(p.condition().parent()),
                                                  " is not a parameter of the study")));
      continue;
    }
    if (parent == i) {
      errors.push_back(Invalid(absl::StrCat(field, ".parent"), "names the parameter itself"));
      continue;
    }
    if (refused_kind(parent)) {
      errors.push_back(Invalid(
          absl::StrCat(field, ".parent"),
          absl::StrCat(Quote(p.condition().parent()), " is a double_range; a condition needs a "
                       "categorical, discrete or int_range parent, whose values it can list")));
      continue;
    }
    CheckValues(space.parameters()[parent], p.condition().values(), field, errors);
  }
  // Cycles: from each parameter, follow its parents; coming back to it is a cycle.
  for (int i = 0; i < spec.parameters_size(); ++i) {
    std::vector<std::string> path = {spec.parameters(i).name()};
    int at = i;
    for (int hops = 0; hops <= spec.parameters_size(); ++hops) {
      const v1::Parameter& p = spec.parameters(at);
      if (!p.has_condition()) break;
      at = IndexOf(spec, p.condition().parent());
      if (at < 0 || at == i) break;
      path.push_back(spec.parameters(at).name());
    }
    if (at == i && spec.parameters(i).has_condition() &&
        spec.parameters(i).condition().parent() != spec.parameters(i).name()) {
      path.push_back(spec.parameters(i).name());
      errors.push_back(Invalid(absl::StrCat("parameters[", i, "].condition"),
                               absl::StrCat("forms a cycle (", absl::StrJoin(path, " -> "),
                                            "); conditions must form a tree")));
    }
  }
  for (int c = 0; c < spec.forbidden_size(); ++c) {
    const v1::ForbiddenClause& clause = spec.forbidden(c);
    const std::string field = absl::StrCat("forbidden[", c, "].all");
    if (clause.all().empty()) {
      errors.push_back(Invalid(field, "must list at least one parameter and its values"));
      continue;
    }
    for (int t = 0; t < clause.all_size(); ++t) {
      const v1::ParameterIn& term = clause.all(t);
      const std::string at = absl::StrCat(field, "[", t, "]");
      const int i = IndexOf(spec, term.parameter());
      if (i < 0) {
        errors.push_back(Invalid(absl::StrCat(at, ".parameter"),
                                 absl::StrCat(Quote(term.parameter()),
                                              " is not a parameter of the study")));
        continue;
      }
      if (refused_kind(i)) {
        errors.push_back(Invalid(absl::StrCat(at, ".parameter"),
                                 absl::StrCat(Quote(term.parameter()),
                                              " is a double_range; forbidden clauses test exact "
                                              "values of categorical, discrete or int_range "
                                              "parameters")));
        continue;
      }
      CheckValues(space.parameters()[i], term.values(), at, errors);
    }
  }
  ValidateModelChoice(spec, errors);
  if (errors.size() != before) return false;
  if (spec.forbidden().empty()) return true;
  // Clauses that leave nothing to try, caught when the space is small enough to count. They
  // and the conditions read only countable parameters, so each other parameter counts as one
  // value (a double_range beside them hid a space the clauses forbid whole: hostile review).
  std::vector<optimizer::ParameterSpec> counted = space.parameters();
  for (int i = 0; i < space.dims(); ++i) {
    if (space.ValueCount(i)) continue;
    counted[i].kind = optimizer::ParameterKind::kCategorical;
    counted[i].categories = {"any"};
  }
  if (const std::optional<int64_t> size =
          optimizer::SearchSpace(std::move(counted), space.forbidden()).FiniteSize();
      size && *size == 0) {
    errors.push_back(Invalid("forbidden", "forbids every point of the space; remove a clause"));
    return false;
  }
  return true;
}

}  // namespace dhpt::study
