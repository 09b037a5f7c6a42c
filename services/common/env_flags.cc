#include "services/common/env_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace dhpt {

void ApplyEnvironmentToFlags(absl::Span<const absl::string_view> flag_names) {
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

std::vector<char*> ParseCommandLineWithDashes(int argc, char** argv) {
  // The rewritten arguments live as long as the process, like argv itself.
  static std::vector<std::string>* rewritten = new std::vector<std::string>(argv, argv + argc);
  bool flags_ended = false;
  for (size_t i = 1; i < rewritten->size(); ++i) {
    std::string& argument = (*rewritten)[i];
    if (argument == "--") flags_ended = true;
    if (flags_ended || argument.size() < 3 || argument[0] != '-') continue;
    const size_t name_start = argument[1] == '-' ? 2 : 1;
    const size_t name_end = std::min(argument.find('='), argument.size());
    for (size_t k = name_start; k < name_end; ++k) {
      if (argument[k] == '-') argument[k] = '_';
    }
  }
  static std::vector<char*>* pointers = new std::vector<char*>();
  for (std::string& argument : *rewritten) pointers->push_back(argument.data());
  return absl::ParseCommandLine(argc, pointers->data());
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

void ParseFlagsOnly(absl::string_view program, int argc, char** argv) {
  const std::vector<char*> positional = ParseCommandLineWithDashes(argc, argv);
  if (positional.size() <= 1) return;  // [0] is the program itself
  std::fprintf(stderr, "%s\n", StrayArgumentMessage(program, argc, argv, positional[1]).c_str());
  std::exit(2);
}

}  // namespace dhpt
