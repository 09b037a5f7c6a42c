#include "services/common/env_flags.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"

namespace dhpt {

void ApplyEnvironmentToFlags(std::initializer_list<absl::string_view> flag_names) {
  for (absl::string_view name : flag_names) {
    std::string variable =
        "DHPT_" + absl::AsciiStrToUpper(absl::StrReplaceAll(name, {{"-", "_"}}));
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      std::fprintf(stderr, "invalid %s=%s: %s\n", variable.c_str(), value, error.c_str());
      std::exit(2);
    }
  }
}

}  // namespace dhpt
