#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/common/flag_ranges.h"

namespace dhpt {

// For every registered flag that has an environment variable DHPT_<FLAG_NAME> (upper case,
// dashes as underscores), sets the flag from it. Call before ParseCommandLineWithDashes so
// that the command line still wins. A variable that does not parse ends the process there
// (status 2, naming the variable), unless the command line gives the flag.
void ApplyEnvironmentToFlags(absl::Span<const absl::string_view> flag_names);
// The same for every flag defined in the source file whose path ends with `file` (a binary's
// own main.cc): a flag added there is read from its DHPT_<FLAG> too, with no list to forget it.
void ApplyEnvironmentToFlagsDefinedIn(absl::string_view file);

// " (from DHPT_NAME='value')" when --name's value came from its environment variable
// (ApplyEnvironmentToFlags) rather than the command line, else empty. Call after parsing.
std::string EnvironmentSourceOf(absl::string_view flag_name);

// Prints a start-up error as "program: message" and returns 2, the exit status of a bad flag.
// For each --flag the message names whose value came from DHPT_<FLAG>, it adds which variable
// set it ("(--tls_ca from DHPT_TLS_CA='...')"): a user otherwise looks for a --flag nobody
// typed (a chart sets them in the environment).
int ReportFlagError(absl::string_view program, absl::string_view message);

// absl::ParseCommandLine that also takes flag names spelled with dashes (--require-gpu for
// --require_gpu), as Kubernetes manifests and the issue tracker write them. Arguments after a
// bare "--" are left alone. Returns the positional arguments, as absl::ParseCommandLine does.
// Every usage error ends the process with exit status 2 and a message that starts with
// `program` and names the flag and what it takes: an unknown flag (with the nearest known
// one), a value that does not parse or is missing, a value outside its range in `ranges`
// (checked after the command line, so DHPT_<FLAG> values too). --help and --version print and
// end it with status 0.
std::vector<char*> ParseCommandLineWithDashes(absl::string_view program, int argc, char** argv,
                                              absl::Span<const FlagRange> ranges = {});

// Every value of a repeatable --NAME=VALUE (or --NAME VALUE, dashes or underscores) flag in
// order, comma-separated ones split: absl keeps only the last occurrence. Empty when the
// command line does not name the flag.
std::vector<std::string> RepeatedFlagValues(int argc, char** argv, absl::string_view name);

// What to tell the user when `stray` (a positional argument of argv) was not expected. The
// usual cause is a flag value with a space that the shell split in two
// (--command=gbr=/usr/bin/python3 /opt/train/gbr.py), so when a --flag=value comes just before
// it, the message shows that flag quoted with the words that follow it.
std::string StrayArgumentMessage(absl::string_view program, int argc, char** argv,
                                 absl::string_view stray);

// ParseCommandLineWithDashes for the services, which take flags only: any positional argument
// (a value split by the shell would be silently dropped otherwise) ends the process with exit
// status 2 and StrayArgumentMessage.
void ParseFlagsOnly(absl::string_view program, int argc, char** argv,
                    absl::Span<const FlagRange> ranges = {});

}  // namespace dhpt
