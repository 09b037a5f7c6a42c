#pragma once

// The plots of a comparison, drawn by gnuplot (Debian's gnuplot-nox) as SVG and PNG: the best
// objective so far against wall time for both runs, the distribution of trial durations, and
// wall time, CPU time, memory (and GPU use) per run. The data files and the gnuplot script
// stay next to the plots, so a user can restyle them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/compare.pb.h"

namespace dhpt::cli {

// The gnuplot script that draws every plot of `report` from the data files in `dir`, for one
// terminal ("svg" or "pngcairo"). Exposed for tests.
std::string PlotScript(const v1::CompareReport& report, const std::string& terminal);

// Writes the data files and the script into `dir` and runs gnuplot; returns the plot files
// (names relative to `dir`). FAILED_PRECONDITION when gnuplot is not installed.
absl::StatusOr<std::vector<std::string>> DrawPlots(const v1::CompareReport& report,
                                                    const std::string& dir);

}  // namespace dhpt::cli
