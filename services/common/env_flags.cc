#include "services/common/env_flags.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// ParseCommandLineImpl and HandleUsageFlags: absl::ParseCommandLine's two halves, to answer
// --help with status 0 (absl::ParseCommandLine exits 1).
#include "absl/algorithm/container.h"
#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace dhpt {
namespace {

// What a value of `flag`'s type looks like, for a value that does not parse.
std::string ExpectedValue(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<int>() || flag.IsOfType<int64_t>() || flag.IsOfType<std::optional<int>>()) {
    return "a whole number";
  }
  if (flag.IsOfType<double>()) return "a number";
  if (flag.IsOfType<bool>()) return "true or false";
  if (flag.IsOfType<absl::Duration>()) return "a duration such as 500ms, 30s, 5m or 1h30m";
  return "a value it takes";
}

// The environment variable that sets the flag: DHPT_ and its name in capitals, dashes as
// underscores.
std::string EnvironmentVariableOf(absl::string_view flag_name) {
  return "DHPT_" + absl::AsciiStrToUpper(absl::StrReplaceAll(flag_name, {{"-", "_"}}));
}

// A variable's value as a message shows it: escaped and cut, as FlagRange::Check shows a
// value, since it is anyone's text (a control character or a megabyte would reach the terminal).
std::string ShownValue(absl::string_view value) {
  return absl::CHexEscape(value.substr(0, 256));
}

}  // namespace

namespace {

// The flags each set from its DHPT_<FLAG>, in the order set, with the variable's value.
std::vector<std::pair<std::string, std::string>>& FlagsSetFromEnvironment() {
  static auto* set = new std::vector<std::pair<std::string, std::string>>();
  return *set;
}

// The flags whose DHPT_<FLAG> did not parse, with what to tell the user: an error once the
// command line is parsed, unless it gives the flag (the command line wins).
std::vector<std::pair<std::string, std::string>>& UnparsableEnvironmentValues() {
  static auto* unparsable = new std::vector<std::pair<std::string, std::string>>();
  return *unparsable;
}

}  // namespace

void ApplyEnvironmentToFlags(absl::Span<const absl::string_view> flag_names) {
  for (absl::string_view name : flag_names) {
    const std::string variable = EnvironmentVariableOf(name);
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const auto same_flag = [name](const auto& entry) { return entry.first == name; };
    auto& set = FlagsSetFromEnvironment();
    auto& unparsable = UnparsableEnvironmentValues();
    std::erase_if(set, same_flag);
    std::erase_if(unparsable, same_flag);
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      unparsable.emplace_back(
          name, absl::StrCat("invalid ", variable, "=", ShownValue(value), ": it sets --", name,
                             ", which takes ", ExpectedValue(*flag),
                             *value == '\0' ? " (unset the variable for the default)" : ""));
      continue;
    }
    set.emplace_back(name, value);
  }
}

namespace {

// DHPT_NAME='value' when the flag's value came from that variable, else empty.
std::string EnvironmentAssignmentOf(absl::string_view flag_name) {
  for (const auto& [name, value] : FlagsSetFromEnvironment()) {
    if (name == flag_name && !absl::flags_internal::WasPresentOnCommandLine(name)) {
      return absl::StrCat(EnvironmentVariableOf(name), "='", ShownValue(value), "'");
    }
  }
  return "";
}

}  // namespace

std::string EnvironmentSourceOf(absl::string_view flag_name) {
  const std::string assignment = EnvironmentAssignmentOf(flag_name);
  return assignment.empty() ? "" : absl::StrCat(" (from ", assignment, ")");
}

int ReportFlagError(absl::string_view program, absl::string_view message) {
  std::string shown(message);
  std::vector<absl::string_view> named;
  for (size_t at = message.find("--"); at != absl::string_view::npos;
       at = message.find("--", at + 2)) {
    size_t end = at + 2;
    while (end < message.size() &&
           (absl::ascii_isalnum(static_cast<unsigned char>(message[end])) || message[end] == '_')) {
      ++end;
    }
    const absl::string_view name = message.substr(at + 2, end - at - 2);
    if (absl::c_linear_search(named, name)) continue;
    named.push_back(name);
    if (const std::string assignment = EnvironmentAssignmentOf(name); !assignment.empty()) {
      absl::StrAppend(&shown, " (--", name, " from ", assignment, ")");
    }
  }
  std::fprintf(stderr, "%s: %s\n", std::string(program).c_str(), shown.c_str());
  return 2;
}

void ApplyEnvironmentToFlagsDefinedIn(absl::string_view file) {
  std::vector<absl::string_view> names;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), file)) names.push_back(name);
  }
  ApplyEnvironmentToFlags(names);
}

namespace {

// Abseil's usage flags: it handles them itself, and FindCommandLineFlag knows none of them.
bool IsUsageFlag(absl::string_view name) {
  return name == "help" || name == "helpfull" || name == "helpshort" || name == "helppackage" ||
         name == "helpon" || name == "helpmatch" || name == "version" || name == "only_check_args";
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The program's own flag (not one of Abseil's) nearest to `name`: at most two letters apart,
// or empty.
std::string NearestFlag(absl::string_view name) {
  std::string nearest;
  size_t best = 3;
  for (const auto& [flag_name, flag] : absl::GetAllFlags()) {
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    const size_t distance = EditDistance(name, flag_name);
    if (distance < best || (distance == best && flag_name < nearest)) {
      best = distance;
      nearest = std::string(flag_name);
    }
  }
  return nearest;
}

[[noreturn]] void ExitWithUsageError(absl::string_view program, absl::string_view message) {
  std::fprintf(stderr, "%s: %s\n%s --help lists its flags\n", std::string(program).c_str(),
               std::string(message).c_str(), std::string(program).c_str());
  std::exit(2);
}

// The usage error of one --flag[=value] argument at `at`, as absl::ParseCommandLine would
// find it (an unknown flag, a value that does not parse, a missing value), said with what the
// flag takes; empty when there is none. Advances `at` past a value given as the next argument.
std::string ArgumentError(const std::vector<std::string>& arguments, size_t& at,
                          absl::Span<const FlagRange> ranges) {
  const absl::string_view argument = arguments[at];
  const absl::string_view body = argument.substr(argument[1] == '-' ? 2 : 1);
  const size_t equals = body.find('=');
  const absl::string_view name = body.substr(0, equals);
  if (IsUsageFlag(name)) return "";
  if (name == "flagfile" || name == "fromenv" || name == "tryfromenv" || name == "undefok") {
    // Their values are read by absl alone, which ends the process with status 1 on a flag file
    // it cannot open ("ERROR: Can't open flagfile").
    std::string value;
    if (equals != absl::string_view::npos) {
      value = std::string(body.substr(equals + 1));
    } else if (at + 1 < arguments.size()) {
      value = arguments[++at];
    }
    if (name != "flagfile") return "";
    for (absl::string_view file : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      if (std::ifstream(std::string(file)).good()) continue;
      return absl::StrCat("--flagfile=", value, ": cannot read ", file, " (",
                          std::strerror(errno), ")");
    }
    return value.empty() ? "--flagfile needs a value: --flagfile=FILE[,FILE]" : "";
  }
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr) {
    // --noNAME sets a bool flag NAME to false.
    const absl::CommandLineFlag* negated =
        absl::StartsWith(name, "no") ? absl::FindCommandLineFlag(name.substr(2)) : nullptr;
    if (negated != nullptr && negated->IsOfType<bool>() && equals == absl::string_view::npos) {
      return "";
    }
    double number;
    if (absl::SimpleAtod(argument, &number)) {
      return absl::StrCat("\"", argument, "\" is read as a flag; an argument that starts with "
                          "'-' goes after --");
    }
    const std::string nearest = NearestFlag(name);
    return absl::StrCat("unknown flag --", name,
                        nearest.empty() ? "" : absl::StrCat(" (did you mean --", nearest, "?)"));
  }
  std::string value;
  if (equals != absl::string_view::npos) {
    value = std::string(body.substr(equals + 1));
  } else if (flag->IsOfType<bool>()) {
    return "";  // --NAME alone is true; the next argument is not its value.
  } else if (at + 1 < arguments.size() && arguments[at + 1] != "--") {
    value = arguments[++at];
  } else {
    return absl::StrCat("--", name, " needs a value: --", name, "=VALUE");
  }
  std::string error;
  // Parsed as the command line will be in a moment, in the same order: the value it leaves is
  // the one absl::ParseCommandLine sets again.
  if (flag->ParseFrom(value, &error)) return "";
  const FlagRange* range = FindFlagRange(ranges, name);
  return absl::StrCat("--", name, "=", value, " is not ", ExpectedValue(*flag),
                      range != nullptr ? absl::StrCat("; it must be ", range->Accepted()) : "");
}

}  // namespace

std::vector<char*> ParseCommandLineWithDashes(absl::string_view program, int argc, char** argv,
                                              absl::Span<const FlagRange> ranges) {
  // The rewritten arguments live as long as the process, like argv itself.
  static std::vector<std::string>* rewritten = new std::vector<std::string>(argv, argv + argc);
  bool flags_ended = false;
  for (size_t i = 1; i < rewritten->size(); ++i) {
    std::string& argument = (*rewritten)[i];
    if (argument == "--") flags_ended = true;
    if (!flags_ended && argument == "-h") argument = "--help";  // As most tools take it.
    if (flags_ended || argument.size() < 3 || argument[0] != '-') continue;
    const size_t name_start = argument[1] == '-' ? 2 : 1;
    const size_t name_end = std::min(argument.find('='), argument.size());
    for (size_t k = name_start; k < name_end; ++k) {
      if (argument[k] == '-') argument[k] = '_';
    }
  }
  // absl::ParseCommandLine ends the process with status 1 on a usage error and on --help, with
  // a message that names neither what the flag takes nor the program: its errors are found
  // first, here, and end it with status 2 (--undefok, rare, leaves unknown flags to absl).
  const bool unknown_ok =
      std::any_of(rewritten->begin() + 1, rewritten->end(), [](const std::string& argument) {
        return absl::StartsWith(argument, "--undefok") || absl::StartsWith(argument, "-undefok");
      });
  for (size_t i = 1; i < rewritten->size(); ++i) {
    const std::string& argument = (*rewritten)[i];
    if (argument == "--") break;
    if (argument.size() < 2 || argument[0] != '-') continue;
    const std::string error = ArgumentError(*rewritten, i, ranges);
    if (!error.empty() && !(unknown_ok && absl::StartsWith(error, "unknown flag"))) {
      ExitWithUsageError(program, error);
    }
  }
  static std::vector<char*>* pointers = new std::vector<char*>();
  for (std::string& argument : *rewritten) pointers->push_back(argument.data());
  // As absl::ParseCommandLine, but help asked for is an answer, status 0, not a failure.
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, pointers->data(), absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  if (absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage()) >= 0) {
    std::cout.flush();
    std::exit(0);
  }
  for (const auto& [name, message] : UnparsableEnvironmentValues()) {
    if (!absl::flags_internal::WasPresentOnCommandLine(name)) ExitWithUsageError(program, message);
  }
  for (const FlagRange& range : ranges) {
    absl::Status in_range = range.Check();
    if (in_range.ok()) continue;
    // A value neither the command line nor a flagfile gave came from the environment
    // (ApplyEnvironmentToFlags): say which variable to change, or a user looks for a --flag
    // nobody typed.
    ExitWithUsageError(program,
                       absl::StrCat(in_range.message(), EnvironmentSourceOf(range.flag())));
  }
  return positional;
}

std::vector<std::string> RepeatedFlagValues(int argc, char** argv, absl::string_view name) {
  std::vector<std::string> values;
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    if (argument == "--") break;
    const size_t start = argument.rfind("--", 0) == 0 ? 2 : argument.rfind("-", 0) == 0 ? 1 : 0;
    if (start == 0) continue;
    const size_t equals = std::min(argument.find('='), argument.size());
    std::string flag = argument.substr(start, equals - start);
    std::replace(flag.begin(), flag.end(), '-', '_');
    if (flag != name) continue;
    std::string value;
    if (equals < argument.size()) {
      value = argument.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      values.emplace_back(part);
    }
  }
  return values;
}

std::string StrayArgumentMessage(absl::string_view program, int argc, char** argv,
                                 absl::string_view stray) {
  std::string message = absl::StrCat(program, ": unexpected argument \"", stray,
                                      "\"; this command takes flags only (--name=value)");
  int at = 1;
  while (at < argc && argv[at] != stray) ++at;
  const absl::string_view before = at > 1 && at < argc ? argv[at - 1] : "";
  const size_t equals = before.find('=');
  if (!absl::StartsWith(before, "-") || equals == absl::string_view::npos) {
    return absl::StrCat(message,
                        ". A flag value with spaces must be quoted as one argument, e.g. "
                        "--command='gbr=/usr/bin/python3 /opt/train/sklearn_gbr.py'");
  }
  // The words the shell split off: from `stray` up to the next flag.
  std::vector<absl::string_view> words = {before.substr(equals + 1)};
  for (int i = at; i < argc && !absl::StartsWith(argv[i], "-"); ++i) words.push_back(argv[i]);
  return absl::StrCat(message, ". If \"", stray, "\" belongs to ", before.substr(0, equals),
                      ", quote the whole value as one argument: ", before.substr(0, equals + 1),
                      "'", absl::StrJoin(words, " "), "'");
}

void ParseFlagsOnly(absl::string_view program, int argc, char** argv,
                    absl::Span<const FlagRange> ranges) {
  const std::vector<char*> positional = ParseCommandLineWithDashes(program, argc, argv, ranges);
  if (positional.size() <= 1) return;  // [0] is the program itself
  std::fprintf(stderr, "%s\n", StrayArgumentMessage(program, argc, argv, positional[1]).c_str());
  std::exit(2);
}

}  // namespace dhpt
