#pragma once

// Validation of conditional search spaces (issue 33): each parameter's `condition` and the
// spec's `forbidden` clauses. Kept apart from spec_validation.cc, which calls it once the
// parameters themselves are sound.

#include <vector>

#include "absl/status/status.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// Appends one INVALID_ARGUMENT per faulty field ("parameters[2].condition.parent: ...",
// "forbidden[0].all[1].values[0]: ..."): a parent that is not a parameter, a parent that is a
// double_range (conditions test exact values; ConfigSpace refuses float parents too), values
// the parent cannot take, cycles, and forbidden terms on unknown or double_range parameters,
// or clauses that forbid every point. `spec` must have sound parameters. False if any error.
bool ValidateConditions(const v1::StudySpec& spec, std::vector<absl::Status>& errors);

}  // namespace dhpt::study
