#include "services/study/model_choice.h"

#include <algorithm>
#include <string>

namespace dhpt::study {

int ModelKindParameter(const v1::StudySpec& spec) {
  for (int i = 0; i < spec.parameters_size(); ++i) {
    if (spec.parameters(i).name() == kModelKindParameter) return i;
  }
  return -1;
}

std::vector<v1::Model::Kind> StudyModelKinds(const v1::StudySpec& spec) {
  const int choice = ModelKindParameter(spec);
  if (choice < 0) return {spec.model().kind()};
  std::vector<v1::Model::Kind> kinds;
  for (const std::string& value : spec.parameters(choice).categorical().values()) {
    v1::Model::Kind kind;
    if (v1::Model::Kind_Parse(value, &kind) && IsChoosableKind(kind) &&
        std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
      kinds.push_back(kind);
    }
  }
  return kinds.empty() ? std::vector<v1::Model::Kind>{spec.model().kind()} : kinds;
}

std::vector<v1::Model::Kind> ParameterModelKinds(const v1::StudySpec& spec, int i) {
  const std::vector<v1::Model::Kind> all = StudyModelKinds(spec);
  const int choice = ModelKindParameter(spec);
  if (choice < 0) return all;
  // Up the chain of parents to the one conditioned on model_kind directly, if any.
  int at = i;
  for (int hops = 0; hops <= spec.parameters_size(); ++hops) {
    const v1::Parameter& p = spec.parameters(at);
    if (!p.has_condition()) return all;
    if (p.condition().parent() == kModelKindParameter) {
      std::vector<v1::Model::Kind> kinds;
      for (const google::protobuf::Value& value : p.condition().values()) {
        v1::Model::Kind kind;
        if (value.kind_case() == google::protobuf::Value::kStringValue &&
            v1::Model::Kind_Parse(value.string_value(), &kind) && IsChoosableKind(kind)) {
          kinds.push_back(kind);
        }
      }
      return kinds;
    }
    at = -1;
    for (int j = 0; j < spec.parameters_size(); ++j) {
      if (spec.parameters(j).name() == p.condition().parent()) at = j;
    }
    if (at < 0) return all;
  }
  return all;  // A cycle: validation reports it.
}

void ModelForTrial(const v1::StudySpec& spec,
                   const google::protobuf::Map<std::string, v1::ParameterValue>& trial_params,
                   v1::Model* model,
                   google::protobuf::Map<std::string, v1::ParameterValue>* params) {
  *model = spec.model();
  *params = trial_params;
  auto it = params->find(std::string(kModelKindParameter));
  if (ModelKindParameter(spec) < 0 || it == params->end()) return;
  v1::Model::Kind kind;
  if (v1::Model::Kind_Parse(it->second.string_value(), &kind)) model->set_kind(kind);
  params->erase(it);
}

}  // namespace dhpt::study
