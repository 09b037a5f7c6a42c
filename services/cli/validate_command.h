#pragma once

// `dhpt validate FILE` and `dhpt submit FILE --dry-run`: every error of a study file at once,
// checked here with the scheduler's own rules (services/study/spec_validation.h) and the model
// catalogue the workers train by, without a scheduler and without creating anything.

#include <iosfwd>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dhpt::cli {

// The errors of the study in the file at `path` (one for a file that does not parse); empty
// when the scheduler's default limits accept it.
std::vector<absl::Status> StudyFileErrors(const std::string& path);

// Prints "FILE: valid: ..." to `out`, or each error on its own line to `err`; returns the exit
// status: 0 valid, 1 not.
int RunValidate(const std::string& path, std::ostream& out, std::ostream& err);

}  // namespace dhpt::cli
