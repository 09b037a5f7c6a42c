#pragma once

#include "absl/strings/string_view.h"

namespace dhpt {

// For every registered flag that has an environment variable DHPT_<FLAG_NAME> (upper case,
// dashes as underscores), sets the flag from it. Call before absl::ParseCommandLine so that
// the command line still wins. Exits with a message when a variable does not parse.
void ApplyEnvironmentToFlags(std::initializer_list<absl::string_view> flag_names);

}  // namespace dhpt
