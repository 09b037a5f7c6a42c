#pragma once

// What `dhpt pareto` prints and draws: the trials of a multi-objective study's Pareto front as a
// table, and a gnuplot plot of every completed trial with the front drawn through them (one
// panel per pair of objectives when there are more than two).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::cli {

// A heading (front size, hypervolume, reference point) and one row per trial of the front:
// number, each objective, each constrained metric, the parameters.
std::string ParetoTable(const v1::Study& study, const v1::GetParetoFrontResponse& front);

// The gnuplot script drawing pareto.<ext> from the data files DrawParetoPlot writes, for one
// terminal ("svg" or "pngcairo"), with each objective's axis range when `ranges` has one per
// objective (else gnuplot's own). Exposed for tests.
std::string ParetoPlotScript(const v1::StudySpec& spec, const std::string& terminal,
                             const std::vector<std::pair<double, double>>& ranges = {});

// Each objective's axis range for a plot of these completed trials: all of them inside, with a
// small margin; empty when a trial lacks an objective value. Exposed for tests.
std::vector<std::pair<double, double>> ParetoAxisRanges(int objectives,
                                                         const std::vector<const v1::Trial*>& completed);

// Writes the data (all completed trials, the infeasible ones, the front) and the scripts into
// `dir` and runs gnuplot; returns the plot files (pareto.svg, pareto.png) relative to `dir`.
absl::StatusOr<std::vector<std::string>> DrawParetoPlot(const v1::Study& study,
                                                        const std::vector<v1::Trial>& trials,
                                                        const v1::GetParetoFrontResponse& front,
                                                        const std::string& dir);

}  // namespace dhpt::cli
