#include "services/worker/command_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/common/logging.h"
#include "services/common/param_values.h"

namespace dhpt::worker {
namespace {

std::string ArgumentValue(const google::protobuf::Value& value) {
  if (value.kind_case() != google::protobuf::Value::kListValue &&
      value.kind_case() != google::protobuf::Value::kStructValue) {
    return FormatFixedValue(value);
  }
  std::string json;  // Lists and objects as JSON: one argument, whatever they hold.
  (void)google::protobuf::util::MessageToJsonString(value, &json);
  return json;
}

std::string Errno(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

}  // namespace

std::vector<std::string> CommandArguments(const RegisteredCommand& command,
                                          const v1::Assign& assign) {
  std::map<std::string, std::string> values;
  for (const auto& [name, value] : assign.model().fixed()) values[name] = ArgumentValue(value);
  for (const auto& [name, value] : assign.params()) values[name] = FormatParameterValueExact(value);
  std::vector<std::string> argv = {command.path};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  for (const auto& [name, value] : values) argv.push_back(absl::StrCat("--", name, "=", value));
  return argv;
}

std::string ParamsJson(const v1::Assign& assign) {
  google::protobuf::Struct params;
  auto& fields = *params.mutable_fields();
  for (const auto& [name, value] : assign.model().fixed()) fields[name] = value;
  for (const auto& [name, value] : assign.params()) {
    if (std::optional<double> number = AsNumber(value)) {
      fields[name].set_number_value(*number);
    } else {
      fields[name].set_string_value(value.string_value());
    }
  }
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(params, &json);
  return json;
}

std::vector<std::string> CommandEnvironmentVariables(const RegisteredCommand& command,
                                                     const CommandOptions& options,
                                                     const v1::Assign& assign,
                                                     const CommandEnvironment& trial) {
  std::map<std::string, std::string> env = {
      {"PATH", kCommandSearchPath},
      {"HOME", trial.workdir},
      {"TMPDIR", trial.workdir},
      {"LANG", "C.UTF-8"},
  };
  auto copy = [&env](const std::string& name) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr) env[name] = value;
  };
  for (const std::string& name : options.env) copy(name);
  for (const std::string& name : command.env) copy(name);
  if (options.pass_cuda_visible_devices) copy("CUDA_VISIBLE_DEVICES");
  // Set last: a variable the operator allowed never replaces what DHPT tells the program.
  env["DHPT_TRIAL_ID"] = absl::StrCat(assign.trial_id());
  env["DHPT_ATTEMPT"] = absl::StrCat(assign.attempt());
  env["DHPT_STUDY"] = assign.study();
  env["DHPT_OBJECTIVE_METRIC"] = assign.objective_metric();
  env["DHPT_THREADS"] = absl::StrCat(trial.threads);
  env["OMP_NUM_THREADS"] = absl::StrCat(trial.threads);
  env["DHPT_PARAMS"] = trial.params_json;
  env["DHPT_PARAMS_FILE"] = absl::StrCat(trial.workdir, "/", kParamsFileName);
  std::vector<std::string> vars;
  for (const auto& [name, value] : env) vars.push_back(absl::StrCat(name, "=", value));
  return vars;
}

absl::Status PrepareWorkdirRoot(const std::string& root) {
  if (root.empty() || root[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("\"", root, "\" is not an absolute path"));
  }
  if (mkdir(root.c_str(), 0700) == 0) return absl::OkStatus();
  if (errno != EEXIST) return absl::FailedPreconditionError(Errno("cannot make", root));
  struct stat info {};
  if (lstat(root.c_str(), &info) != 0)
    return absl::FailedPreconditionError(Errno("cannot read", root));
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, " is not a directory (or is a symlink)"));
  }
  if (info.st_uid != geteuid() && info.st_uid != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, " belongs to another user (uid ", info.st_uid, ")"));
  }
  if (access(root.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(root, " is not writable by this worker"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeTrialWorkdir(const std::string& root, const v1::Assign& assign) {
  // The root may have gone since start-up (a tmp cleaner): made again, checked again.
  if (absl::Status ready = PrepareWorkdirRoot(root); !ready.ok()) return ready;
  const std::string dir = absl::StrCat(root, "/trial-", assign.trial_id(), "-", assign.attempt());
  if (mkdir(dir.c_str(), 0700) == 0) return dir;
  if (errno != EEXIST) return absl::FailedPreconditionError(Errno("cannot make", dir));
  DHPT_LOG_WARNING("removing %s, left by an earlier run of the same attempt", dir);
  RemoveTrialWorkdir(dir);
  if (mkdir(dir.c_str(), 0700) != 0)
    return absl::FailedPreconditionError(Errno("cannot make", dir));
  return dir;
}

void RemoveTrialWorkdir(const std::string& workdir) {
  std::error_code error;
  std::filesystem::remove_all(workdir, error);  // Symlinks are removed, never followed.
  if (error) DHPT_LOG_WARNING("cannot remove %s: %s", workdir, error.message());
}

}  // namespace dhpt::worker
