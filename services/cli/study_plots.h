#pragma once

// `dhpt plot` and `dhpt report`: a study plot's data (services/analysis/plot_data.h) drawn by
// gnuplot as SVG and PNG, through the one gnuplot runner (gnuplot.h) that dhpt compare and
// dhpt pareto use. The data file and the script stay next to the plots, so a user can restyle
// them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/analysis/plot_data.h"

namespace dhpt::cli {

// The data file of `plot` (gnuplot blocks, one per series) and the script drawing
// `name`.svg or `name`.png from data/`name`.dat, for one terminal ("svg" or "pngcairo").
// Exposed for tests.
std::string StudyPlotData(const analysis::PlotData& plot);
std::string StudyPlotScript(const analysis::PlotData& plot, const std::string& name,
                            const std::string& terminal);

// Writes DIR/data/NAME.dat and DIR/NAME-{svg,png}.gp and runs gnuplot on both; returns the
// plot files (NAME.svg, NAME.png) relative to `dir`. FAILED_PRECONDITION without gnuplot.
absl::StatusOr<std::vector<std::string>> DrawStudyPlot(const analysis::PlotData& plot,
                                                       const std::string& dir,
                                                       const std::string& name);

}  // namespace dhpt::cli
