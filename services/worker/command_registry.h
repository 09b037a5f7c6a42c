#pragma once

// The programs a worker's operator lets studies run (COMMAND trials), by name. A study names
// one (`model.command`) and never supplies an executable or a shell line: what runs, with
// which fixed arguments and which of the worker's environment variables, is the operator's
// decision, made with --command or --commands_file when the worker starts.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/worker/command_output.h"

namespace dhpt::worker {

inline constexpr size_t kMaxCommandNameBytes = 64;
inline constexpr size_t kMaxCommands = 256;
inline constexpr size_t kMaxCommandArgs = 256;
inline constexpr size_t kMaxCommandEnvNames = 256;
inline constexpr int64_t kMaxCommandsFileBytes = int64_t{1} << 20;
inline constexpr absl::Duration kDefaultCommandGracePeriod = absl::Seconds(10);
inline constexpr absl::Duration kMaxCommandGracePeriod = absl::Hours(1);

struct RegisteredCommand {
  std::string name;
  std::string path;               // Absolute, an executable regular file when registered.
  std::vector<std::string> args;  // Before the trial's --name=value arguments.
  std::vector<std::string> env;   // Names of worker environment variables it may see.
  // SIGTERM to SIGKILL; without one, the worker's --command_grace_seconds.
  std::optional<absl::Duration> grace_period;
};

// How every COMMAND trial on this worker runs (the --command_* flags).
struct CommandOptions {
  // Each trial's working directory is made under it (and removed after): this worker's own
  // directory (MakeWorkerWorkdir) in the --command_workdir.
  std::string workdir_root;
  // The --command_workdir when this process made it, else empty: only then is it removed at
  // exit (if empty), never by its name.
  std::string workdir_made;
  // Worker environment variables every command may see, besides its own `env`.
  std::vector<std::string> env;
  absl::Duration grace_period = kDefaultCommandGracePeriod;
  int64_t max_output_bytes = kDefaultMaxOutputBytes;
  // GPU workers pass their CUDA_VISIBLE_DEVICES on, so that commands use the worker's device.
  bool pass_cuda_visible_devices = false;
  // How often the process tree's memory is sampled.
  absl::Duration sample_interval = absl::Milliseconds(100);
  // Named when the kernel's OOM killer ends a trial ("out of memory on node N").
  std::string node_name;
};

class CommandRegistry {
 public:
  // Checks the command (name, path, env names) and adds it; a name can be registered once.
  absl::Status Add(RegisteredCommand command);
  const RegisteredCommand* Find(absl::string_view name) const;
  // Sorted, as workers announce them.
  std::vector<std::string> Names() const;
  bool empty() const { return commands_.empty(); }

 private:
  std::map<std::string, RegisteredCommand, std::less<>> commands_;
};

// One --command value: NAME=PATH [ARG ...], arguments split on spaces.
absl::StatusOr<RegisteredCommand> ParseCommandFlag(absl::string_view flag);
// A --commands_file: a YAML list of {name, command: [PATH, ARG...], env: [VAR...],
// grace_period_seconds}.
absl::StatusOr<std::vector<RegisteredCommand>> LoadCommandsFile(const std::string& path);
// A name a worker may pass from its environment: [A-Za-z_][A-Za-z0-9_]*.
absl::Status ValidateEnvName(absl::string_view name);
// $TMPDIR (else /tmp) plus /dhpt-trials-PID.
std::string DefaultCommandWorkdir();

}  // namespace dhpt::worker
