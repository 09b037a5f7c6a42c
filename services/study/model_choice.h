#pragma once

// Model choice (issue 33): a study may tune the model kind itself through a categorical
// parameter named `model_kind` whose values are model kinds (XGBOOST, RANDOM_FOREST), with each
// kind's own parameters conditional on it. model.kind is then one of those values: the kind
// metrics are labelled with. Each trial runs as its own kind, on a worker that announces that
// kind (docs/concepts.md#model-choice).

#include <vector>

#include "absl/strings/string_view.h"
#include "dhpt/v1/common.pb.h"
#include "google/protobuf/map.h"

namespace dhpt::study {

inline constexpr absl::string_view kModelKindParameter = "model_kind";

// The kinds a study may choose among: those whose objectives mean the same on one dataset
// (predicting its target). AUTOENCODER's r2 is a reconstruction of the features, so it is
// refused (docs/concepts.md#model-choice).
inline bool IsChoosableKind(v1::Model::Kind kind) {
  return kind == v1::Model::XGBOOST || kind == v1::Model::RANDOM_FOREST;
}

// The index of the study's model_kind parameter, or -1.
int ModelKindParameter(const v1::StudySpec& spec);
// The kinds the study's trials may have: the model_kind parameter's values (those that name a
// choosable kind; validation refuses the others), else model.kind alone.
std::vector<v1::Model::Kind> StudyModelKinds(const v1::StudySpec& spec);
// The kinds under which parameter i can be active: those its chain of conditions allows when
// the chain reaches model_kind, else every kind of the study.
std::vector<v1::Model::Kind> ParameterModelKinds(const v1::StudySpec& spec, int i);
// What a worker gets for a trial with `params`: the study's model with the trial's kind, and
// the trial's parameters without model_kind (a trainer knows no such hyperparameter).
void ModelForTrial(const v1::StudySpec& spec,
                   const google::protobuf::Map<std::string, v1::ParameterValue>& trial_params,
                   v1::Model* model,
                   google::protobuf::Map<std::string, v1::ParameterValue>* params);

}  // namespace dhpt::study
