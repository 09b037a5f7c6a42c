#include "services/worker/command_registry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace dhpt::worker {
namespace {

absl::Status ValidatePath(const RegisteredCommand& command) {
  const std::string& path = command.path;
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, ": ", path.empty() ? "(no path)" : path, " ", why));
  };
  if (path.empty() || path[0] != '/') {
    return invalid("is not an absolute path (commands run with no search PATH of the worker's)");
  }
  struct stat info {};
  if (stat(path.c_str(), &info) != 0)
    return invalid(absl::StrCat("cannot be found: ", std::strerror(errno)));
  if (!S_ISREG(info.st_mode)) return invalid("is not a regular file");
  if (access(path.c_str(), X_OK) != 0) return invalid("is not executable by this worker");
  return absl::OkStatus();
}

// yaml-cpp reports errors by exception; they stop here.
absl::StatusOr<RegisteredCommand> CommandFromYaml(const YAML::Node& node, size_t index) {
  const std::string where = absl::StrCat("entry ", index + 1);
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, " is not a mapping"));
  RegisteredCommand command;
  for (const auto& field : node) {
    const std::string key = field.first.as<std::string>();
    const YAML::Node& value = field.second;
    if (key == "name") {
      command.name = value.as<std::string>();
    } else if (key == "command" || key == "env") {
      if (!value.IsSequence()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " must be a list"));
      }
      std::vector<std::string> items;
      for (const auto& item : value) items.push_back(item.as<std::string>());
      if (key == "env") {
        command.env = std::move(items);
      } else if (!items.empty()) {
        command.path = items.front();
        command.args.assign(items.begin() + 1, items.end());
      }
    } else if (key == "grace_period_seconds") {
      const double seconds = value.as<double>();
      if (!(seconds >= 0) || absl::Seconds(seconds) > kMaxCommandGracePeriod) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": grace_period_seconds must be between 0 and ",
                         absl::ToInt64Seconds(kMaxCommandGracePeriod)));
      }
      command.grace_period = absl::Seconds(seconds);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown key \"", key, "\" (name, command, env, grace_period_seconds)"));
    }
  }
  if (command.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no name"));
  if (command.path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, ": command must be a list [PATH, ARG...]"));
  }
  return command;
}

}  // namespace

absl::Status ValidateEnvName(absl::string_view name) {
  const bool valid = !name.empty() && !absl::ascii_isdigit(name[0]) &&
                     std::all_of(name.begin(), name.end(),
                                 [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"));
}

absl::Status CommandRegistry::Add(RegisteredCommand command) {
  if (!IsUserCodeName(command.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", command.name, "\" is not a command name: 1-", kMaxCommandNameBytes,
                     " letters, digits, '.', '_' or '-', not starting with '.' or '-'"));
  }
  if (commands_.contains(command.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, " is registered twice"));
  }
  if (commands_.size() >= kMaxCommands) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxCommands, " commands"));
  }
  if (command.args.size() > kMaxCommandArgs) {
    return absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, ": more than ", kMaxCommandArgs, " arguments"));
  }
  if (command.env.size() > kMaxCommandEnvNames) {
    return absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, ": more than ", kMaxCommandEnvNames, " env names"));
  }
  for (const std::string& name : command.env) {
    if (absl::Status valid = ValidateEnvName(name); !valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("command ", command.name, ": env: ", valid.message()));
    }
  }
  RETURN_IF_ERROR(ValidatePath(command));
  std::string name = command.name;
  commands_.emplace(std::move(name), std::move(command));
  return absl::OkStatus();
}

const RegisteredCommand* CommandRegistry::Find(absl::string_view name) const {
  auto it = commands_.find(name);
  return it == commands_.end() ? nullptr : &it->second;
}

std::vector<std::string> CommandRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, command] : commands_) names.push_back(name);
  return names;
}

absl::StatusOr<RegisteredCommand> ParseCommandFlag(absl::string_view flag) {
  const size_t equals = flag.find('=');
  if (equals == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("\"", flag, "\" is not NAME=PATH [ARG ...]"));
  }
  RegisteredCommand command;
  command.name = std::string(absl::StripAsciiWhitespace(flag.substr(0, equals)));
  std::vector<std::string> words = absl::StrSplit(flag.substr(equals + 1), ' ', absl::SkipEmpty());
  if (words.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("command ", command.name, " has no path"));
  }
  command.path = words.front();
  command.args.assign(words.begin() + 1, words.end());
  return command;
}

absl::StatusOr<std::vector<RegisteredCommand>> LoadCommandsFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::InvalidArgumentError(absl::StrCat(path, ": ", std::strerror(errno)));
  std::string text(static_cast<size_t>(kMaxCommandsFileBytes) + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(file.gcount()));
  if (static_cast<int64_t>(text.size()) > kMaxCommandsFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is larger than ", kMaxCommandsFileBytes, " bytes"));
  }
  std::vector<RegisteredCommand> commands;
  try {
    const YAML::Node root = YAML::Load(text);
    if (root.IsNull()) return commands;  // An empty file registers nothing.
    if (!root.IsSequence()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected a list of {name, command, env, grace_period_seconds}"));
    }
    for (size_t i = 0; i < root.size(); ++i) {
      absl::StatusOr<RegisteredCommand> command = CommandFromYaml(root[i], i);
      if (!command.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", command.status().message()));
      }
      commands.push_back(*std::move(command));
    }
  } catch (const YAML::Exception& error) {
    // Its message names the line and column, never quoting the file's contents at length.
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", error.what()));
  }
  return commands;
}

std::string DefaultCommandWorkdir() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string root = tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp";
  return absl::StrCat(root, "/dhpt-trials-", getpid());
}

}  // namespace dhpt::worker
