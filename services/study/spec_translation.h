#pragma once

// Translation between the API's study types and the optimisers' domain types.

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/struct.pb.h"
#include "services/optimizer/optimizer.h"
#include "services/study/early_stopping.h"

namespace dhpt::study {

using ParamMap = google::protobuf::Map<std::string, v1::ParameterValue>;

optimizer::SearchSpace ToSearchSpace(const v1::StudySpec& spec);
optimizer::OptimizerConfig ToOptimizerConfig(const v1::StudySpec& spec);
ParamMap ToParamMap(const optimizer::SearchSpace& space, const optimizer::Point& point);
// The spec's early-stopping rule (a normalised spec: defaults filled in).
EarlyStoppingRule ToEarlyStoppingRule(const v1::StudySpec& spec);
// The point of a stored trial; an error when a value is missing or of the wrong type.
absl::StatusOr<optimizer::Point> ToPoint(const optimizer::SearchSpace& space,
                                         const ParamMap& params);

// A value of parameter `p` from JSON (a string for a categorical, a whole number for an int, a
// number otherwise); nullopt when it has the wrong type. Membership is not checked.
std::optional<optimizer::ParameterValue> TypedValue(const optimizer::ParameterSpec& p,
                                                    const google::protobuf::Value& value);

// A point a user names (EnqueueTrial, AddTrials) as JSON values by parameter name: every
// active parameter of the space and no inactive one, not a forbidden combination; each a value it can take (numbers for ranges and discrete values,
// whole numbers for ints, on the step's lattice; strings for categorical). Errors are
// INVALID_ARGUMENT naming `field`.name.
absl::StatusOr<optimizer::Point> PointFromValues(
    const optimizer::SearchSpace& space,
    const google::protobuf::Map<std::string, google::protobuf::Value>& values,
    absl::string_view field);

}  // namespace dhpt::study
