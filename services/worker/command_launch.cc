#include "services/worker/command_launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/common/logging.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

// JSON of `message`, or an error a user can act on: a trial never gets empty text instead.
absl::StatusOr<std::string> Json(const google::protobuf::Message& message, absl::string_view what) {
  std::string json;
  if (const auto written = google::protobuf::util::MessageToJsonString(message, &json);
      !written.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " cannot be passed as JSON: ", written.ToString()));
  }
  return json;
}

absl::StatusOr<std::string> ArgumentValue(const std::string& name,
                                          const google::protobuf::Value& value) {
  if (value.kind_case() != google::protobuf::Value::kListValue &&
      value.kind_case() != google::protobuf::Value::kStructValue) {
    return FormatFixedValue(value);
  }
  // Lists and objects as JSON: one argument, whatever they hold.
  return Json(value, absl::StrCat("model.fixed.", name));
}

std::string Errno(absl::string_view what, const std::string& path) {
  return absl::StrCat(what, " ", path, ": ", std::strerror(errno));
}

// Removes `name` in the directory `parent` and, for a directory, all it holds. Works by
// descriptor, never by path, so that no symlink is followed: a directory is opened with
// O_NOFOLLOW and its permissions are changed with AT_SYMLINK_NOFOLLOW.
absl::Status RemoveAt(int parent, const std::string& name, const std::string& path, int depth) {
  if (unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno != EISDIR) return absl::FailedPreconditionError(Errno("cannot remove", path));
  if (depth >= kMaxWorkdirDepth) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is nested more than ", kMaxWorkdirDepth, " directories deep"));
  }
  // A program may have made it unreadable or unwritable (chmod 000): read, write and search
  // for its owner, or its entries could be neither listed nor removed. The error, if any, is
  // the open's.
  (void)fchmodat(parent, name.c_str(), S_IRWXU, AT_SYMLINK_NOFOLLOW);
  const int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::FailedPreconditionError(Errno("cannot open", path));
  // Names first, then removal: one descriptor per level, not a directory stream.
  std::vector<std::string> names;
  const int listing = dup(fd);
  DIR* dir = listing < 0 ? nullptr : fdopendir(listing);
  if (dir == nullptr) {
    const absl::Status error = absl::FailedPreconditionError(Errno("cannot list", path));
    if (listing >= 0) close(listing);
    close(fd);
    return error;
  }
  while (const dirent* entry = readdir(dir)) {
    const std::string entry_name = entry->d_name;
    if (entry_name != "." && entry_name != "..") names.push_back(entry_name);
  }
  closedir(dir);
  absl::Status status;
  for (const std::string& entry_name : names) {
    status.Update(RemoveAt(fd, entry_name, absl::StrCat(path, "/", entry_name), depth + 1));
  }
  close(fd);
  if (status.ok() && unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(Errno("cannot remove", path));
  }
  return status;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CommandArguments(const RegisteredCommand& command,
                                                          const v1::Assign& assign) {
  std::map<std::string, std::string> values;
  for (const auto& [name, value] : assign.model().fixed()) {
    ASSIGN_OR_RETURN(values[name], ArgumentValue(name, value));
  }
  for (const auto& [name, value] : assign.params()) values[name] = FormatParameterValueExact(value);
  std::vector<std::string> argv = {command.path};
  argv.insert(argv.end(), command.args.begin(), command.args.end());
  for (const auto& [name, value] : values) argv.push_back(absl::StrCat("--", name, "=", value));
  return argv;
}

absl::StatusOr<std::string> ParamsJson(const v1::Assign& assign) {
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
  return Json(params, "the trial's parameters (DHPT_PARAMS)");
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

absl::Status PrepareWorkdirRoot(const std::string& root, bool* made) {
  if (made != nullptr) *made = false;
  if (root.empty() || root[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("\"", root, "\" is not an absolute path"));
  }
  if (mkdir(root.c_str(), 0700) == 0) {
    if (made != nullptr) *made = true;
    return absl::OkStatus();
  }
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
  // The worker's directory, or the one it is in, may have gone since start-up (a tmp
  // cleaner): made again, checked again. Its name is the worker's own (random).
  const size_t slash = root.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(PrepareWorkdirRoot(root.substr(0, slash)));
  }
  RETURN_IF_ERROR(PrepareWorkdirRoot(root));
  const std::string dir = absl::StrCat(root, "/trial-", assign.trial_id(), "-", assign.attempt());
  if (mkdir(dir.c_str(), 0700) == 0) return dir;
  if (errno != EEXIST) return absl::FailedPreconditionError(Errno("cannot make", dir));
  // The same trial id and attempt again in this process: a restarted in-memory scheduler
  // numbers its trials from 1 while the first one's may still run here, or an earlier
  // directory could not be removed. Neither is touched: this trial gets a name of its own.
  std::string unique = absl::StrCat(dir, "-XXXXXX");
  if (mkdtemp(unique.data()) == nullptr) {
    return absl::FailedPreconditionError(Errno("cannot make a directory in", root));
  }
  return unique;
}

void RemoveTrialWorkdir(const std::string& workdir) {
  const size_t slash = workdir.rfind('/');
  const std::string root = slash == 0 ? "/" : workdir.substr(0, slash);
  const int parent = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent < 0) {
    DHPT_LOG_WARNING("cannot remove %s: %s", workdir, Errno("cannot open", root));
    return;
  }
  const absl::Status removed = RemoveAt(parent, workdir.substr(slash + 1), workdir, 0);
  close(parent);
  if (!removed.ok()) DHPT_LOG_WARNING("cannot remove %s: %s", workdir, removed.message());
}

}  // namespace dhpt::worker
