#pragma once

// Running Debian's gnuplot-nox on a script the CLI wrote: one way for every plot (dhpt compare,
// dhpt pareto), so that a missing gnuplot or a failing script reads the same everywhere.

#include <string>

#include "absl/status/status.h"

namespace dhpt::cli {

// Text for a gnuplot string in enhanced mode: quotes and backslashes escaped, and '_' kept
// literal (enhanced text reads it as a subscript).
std::string GnuplotEscape(const std::string& text);

// Runs gnuplot on `script` (a file name inside `dir`) with `dir` as its working folder,
// appending its messages to `log`. FAILED_PRECONDITION when gnuplot is not installed.
absl::Status RunGnuplot(const std::string& dir, const std::string& script, const std::string& log);

}  // namespace dhpt::cli
