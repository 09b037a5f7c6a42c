#pragma once

// The worker's --command* flags: which programs COMMAND trials may run, and how.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "services/common/flag_ranges.h"
#include "services/worker/trial_runner.h"

namespace dhpt::worker {

// The flags DHPT_<FLAG> environment variables may set.
std::vector<absl::string_view> CommandFlagNames();

// The values their numeric flags take, checked as the worker parses its flags.
std::vector<FlagRange> CommandFlagRanges();

// Reads and checks the flags into `runner`: the registry (left null when no command is
// registered) and the command options. `commands` and `command_env` are every value of the
// repeated flags on the command line (empty: the flag's own value, from the environment or
// its default). With a command registered, also makes the trials' working root and makes
// this process a child subreaper. Errors name the flag; the worker exits 2 on them.
absl::Status CommandsFromFlags(std::vector<std::string> commands,
                               std::vector<std::string> command_env, bool gpu_worker,
                               TrialRunnerOptions& runner);

}  // namespace dhpt::worker
