#include "services/worker/command_flags.h"

#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/common/status_macros.h"
#include "services/worker/command_launch.h"
#include "services/worker/command_registry.h"
#include "services/worker/worker_workdir.h"
#include "services/worker/process_tree.h"

ABSL_FLAG(std::vector<std::string>, command, {},
          "register a program that studies may run as model {kind: COMMAND, command: NAME}: "
          "NAME=PATH [ARG ...], PATH absolute, arguments split on spaces; repeat the flag for "
          "more. Commas separate registrations, so a command whose arguments hold commas or "
          "spaces goes in --commands_file. A study names a command, never an executable");
ABSL_FLAG(std::string, commands_file, "",
          "a YAML list of commands studies may run: {name: NAME, command: [PATH, ARG...], "
          "env: [VAR...], grace_period_seconds: N}; env names worker environment variables "
          "that command may see");
ABSL_FLAG(std::vector<std::string>, command_env, {},
          "names of worker environment variables every command may see (comma-separated); a "
          "command sees no other variable of the worker's, only PATH=/usr/local/bin:/usr/bin:"
          "/bin, HOME and TMPDIR (its working directory), LANG and the DHPT_* variables");
ABSL_FLAG(std::string, command_workdir, "",
          "the directory in which each worker makes a directory of its own, worker-XXXXXX, for "
          "its command trials' working directories (each removed after its trial, its own at "
          "exit); default $TMPDIR (else /tmp) plus /dhpt-trials-PID");
ABSL_FLAG(double, command_grace_seconds,
          absl::ToDoubleSeconds(dhpt::worker::kDefaultCommandGracePeriod),
          "seconds a command's processes have to exit after SIGTERM (when it ends, is "
          "cancelled or times out) before SIGKILL; a command's grace_period_seconds overrides it");
ABSL_FLAG(int64_t, command_max_output_bytes, dhpt::worker::kDefaultMaxOutputBytes,
          "bytes of a command trial's stdout read for metrics (default 64 MiB); the rest is "
          "read and discarded, and the trial ends normally");

namespace dhpt::worker {

std::vector<absl::string_view> CommandFlagNames() {
  return {"command",         "commands_file",         "command_env",
          "command_workdir", "command_grace_seconds", "command_max_output_bytes"};
}

std::vector<FlagRange> CommandFlagRanges() {
  return {FlagRange::Real("command_grace_seconds", 0, true,
                          absl::ToDoubleSeconds(kMaxCommandGracePeriod), "0: SIGKILL right after SIGTERM"),
          FlagRange::Integer("command_max_output_bytes", 0, FlagRange::kNoMax)};
}

// A command that cannot run stops the worker at start, rather than failing its trials.
absl::Status CommandsFromFlags(std::vector<std::string> commands,
                               std::vector<std::string> command_env, bool gpu_worker,
                               TrialRunnerOptions& runner) {
  auto registry = std::make_shared<CommandRegistry>();
  if (commands.empty()) commands = absl::GetFlag(FLAGS_command);
  for (const std::string& flag : commands) {
    absl::StatusOr<RegisteredCommand> command = ParseCommandFlag(flag);
    if (!command.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--command: ", command.status().message()));
    }
    if (absl::Status added = registry->Add(*std::move(command)); !added.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--command: ", added.message()));
    }
  }
  if (const std::string file = absl::GetFlag(FLAGS_commands_file); !file.empty()) {
    absl::StatusOr<std::vector<RegisteredCommand>> listed = LoadCommandsFile(file);
    if (!listed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--commands_file: ", listed.status().message()));
    }
    for (RegisteredCommand& command : *listed) {
      if (absl::Status added = registry->Add(std::move(command)); !added.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--commands_file: ", added.message()));
      }
    }
  }
  CommandOptions& options = runner.command_options;
  options.env = std::move(command_env);
  if (options.env.empty()) options.env = absl::GetFlag(FLAGS_command_env);
  for (const std::string& name : options.env) {
    if (absl::Status valid = ValidateEnvName(name); !valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--command_env: ", valid.message()));
    }
  }
  // In range: CommandFlagRanges, checked as the flags were parsed.
  options.grace_period = absl::Seconds(absl::GetFlag(FLAGS_command_grace_seconds));
  options.max_output_bytes = absl::GetFlag(FLAGS_command_max_output_bytes);
  options.pass_cuda_visible_devices = gpu_worker;
  if (registry->empty()) return absl::OkStatus();
  std::string root = absl::GetFlag(FLAGS_command_workdir);
  if (root.empty()) root = DefaultCommandWorkdir();
  bool made = false;
  if (absl::Status ready = PrepareWorkdirRoot(root, &made); !ready.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--command_workdir: ", ready.message()));
  }
  // Before this worker locks its own marker: closing a marker it looked at would drop its own
  // lock (a POSIX lock belongs to the process).
  if (!made) RemoveEndedWorkersWorkdirs(root);
  // Trial ids repeat across schedulers: a worker's trials go in a directory of its own.
  absl::StatusOr<std::string> own = MakeWorkerWorkdir(root);
  if (!own.ok()) {
    if (made) rmdir(root.c_str());
    return absl::InvalidArgumentError(absl::StrCat("--command_workdir: ", own.status().message()));
  }
  options.workdir_root = *std::move(own);
  if (made) options.workdir_made = root;
  // Commands run as the worker's user: its environment (tokens) stays its own.
  RETURN_IF_ERROR(HideFromCommands());
  runner.commands = std::move(registry);
  return absl::OkStatus();
}

}  // namespace dhpt::worker
