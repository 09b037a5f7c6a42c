#pragma once

// What a COMMAND trial's program is started with: its arguments, its environment (clean but
// for what DHPT and the operator give it), its parameters as JSON, and its working directory.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/command_registry.h"

namespace dhpt::worker {

// The search path every command gets; the worker's own is not passed on unless allowed.
inline constexpr char kCommandSearchPath[] = "/usr/local/bin:/usr/bin:/bin";
inline constexpr char kParamsFileName[] = "params.json";
// How deep a trial's working directory is removed: one descriptor is open per level. A program
// that nests directories deeper leaves them behind, with a warning.
inline constexpr int kMaxWorkdirDepth = 256;

// PATH ARGS... --name=value for every tuned parameter and model.fixed value, sorted by name
// (a tuned value wins over a fixed one of the same name); doubles with 17 significant digits,
// so that the program reads exactly the value the optimiser chose.
// An error, not an empty argument, where protobuf cannot write a list or object value as JSON.
absl::StatusOr<std::vector<std::string>> CommandArguments(const RegisteredCommand& command,
                                                          const v1::Assign& assign);
// The same parameters as one JSON object, numbers as numbers; an error as above.
absl::StatusOr<std::string> ParamsJson(const v1::Assign& assign);

struct CommandEnvironment {
  std::string workdir;
  std::string params_json;
  int threads = 1;
};
// NAME=VALUE, sorted: PATH, HOME and TMPDIR (the working directory), LANG, the DHPT_*
// variables, OMP_NUM_THREADS, the worker's variables the operator allowed (options.env and
// the command's env; they may replace PATH, HOME, TMPDIR or LANG, never DHPT's own), and on a
// GPU worker CUDA_VISIBLE_DEVICES. Nothing else of the worker's environment.
std::vector<std::string> CommandEnvironmentVariables(const RegisteredCommand& command,
                                                     const CommandOptions& options,
                                                     const v1::Assign& assign,
                                                     const CommandEnvironment& trial);

// Makes `root` (mode 0700) unless it exists; an existing one must be a real directory owned by
// this user or root, so that no one else can swap a trial's directory under it. `made` (may be
// null) says whether this call made it.
absl::Status PrepareWorkdirRoot(const std::string& root, bool* made = nullptr);
// ROOT/trial-ID-ATTEMPT in the worker's own directory `root` (worker_workdir.h), mode 0700; when that exists (the
// same trial id and attempt again in this process) ROOT/trial-ID-ATTEMPT-XXXXXX. Nothing that
// exists is removed.
absl::StatusOr<std::string> MakeTrialWorkdir(const std::string& root, const v1::Assign& assign);
// Removes it and everything the program left there, also what it made unreadable or
// unwritable (directories get their owner's permissions back first); symlinks are removed,
// never followed. Failures are logged.
void RemoveTrialWorkdir(const std::string& workdir);

}  // namespace dhpt::worker
