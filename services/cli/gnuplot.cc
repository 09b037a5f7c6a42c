#include "services/cli/gnuplot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "services/cli/child_process.h"

namespace dhpt::cli {
namespace {

std::string FindGnuplot() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/gnuplot");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::string GnuplotEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    // gnuplot runs `...` as a shell command anywhere on a line, double-quoted strings included,
    // before it reads escapes; written as the octal escape \140 a backquote is only shown. A
    // control character (a newline would start a new command) is written the same way.
    if (c == '`' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\%03o", static_cast<unsigned char>(c));
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    if (c == '_') out += "\\\\";
    out += c;
  }
  return out;
}

absl::Status RunGnuplot(const std::string& dir, const std::string& script, const std::string& log) {
  const std::string gnuplot = FindGnuplot();
  if (gnuplot.empty()) {
    return absl::FailedPreconditionError(
        "gnuplot is not installed, so no plots were drawn: install gnuplot-nox "
        "(scripts/install-deps.sh does)");
  }
  // The paths go into a shell line in single quotes; a quote in one would end them early.
  for (const std::string* text : {&dir, &script, &log}) {
    if (text->find('\'') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot draw plots in a path with a quote in it: ", *text));
    }
  }
  const std::string command =
      absl::StrFormat("cd '%s' && '%s' '%s' 2>>'%s'", dir, gnuplot, script, log);
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("gnuplot", {"/bin/sh", "-c", command}, -1, -1);
  if (!child.ok()) return child.status();
  (*child)->Wait();
  const int status = (*child)->wait_status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed on ",
                                            (std::filesystem::path(dir) / script).string(),
                                            "; its messages are in ", log));
  }
  return absl::OkStatus();
}

}  // namespace dhpt::cli
