#pragma once

// The built-in studies `dhpt local` runs when no study file is given.

#include <string>

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::cli {

// "xgboost" (the default), "random-forest", "branin".
absl::StatusOr<v1::StudySpec> DemoStudy(const std::string& name);
std::string DemoStudyNames();

}  // namespace dhpt::cli
