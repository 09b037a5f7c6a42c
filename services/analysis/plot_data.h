#pragma once

// The data each study plot draws, computed once for every renderer (`dhpt plot` and
// `dhpt report` through gnuplot, the web dashboard in the browser): pure functions of a
// StudyData. Every series is cut to kMaxPointsPerSeries points (evenly over the trials, always
// keeping the ones that matter: the best-so-far steps, the Pareto front), so a study of 100,000
// trials costs a bounded plot; `points_total` says how many there were.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/analysis/importance.h"
#include "services/analysis/study_data.h"

namespace dhpt::analysis {

// Points (or lines, or bars) a series keeps at most.
inline constexpr int kMaxPointsPerSeries = 2'000;
// Curves (intermediate values, parallel-coordinates lines) a plot keeps at most: the best
// trials' first, then evenly over the rest.
inline constexpr int kMaxCurvesPerPlot = 300;
// Points of the hypervolume history: each is a hypervolume of the front so far, which with three
// objectives or more costs far more than a point of another series.
inline constexpr int kMaxHypervolumePoints = 200;
// Cells per side of the contour plot's grid.
inline constexpr int kContourGridCells = 24;

enum class PlotKind {
  kHistory,          // Each objective value and the best so far, by trial number.
  kHistoryByTime,    // The same by seconds since the study started.
  kImportance,       // Parameter importances (bars).
  kParallel,         // Parallel coordinates: one line per trial across the parameters.
  kSlice,            // The objective against each parameter.
  kContour,          // Two parameters, the objective as colour.
  kIntermediate,     // Intermediate values (progress curves), pruned trials marked.
  kEdf,              // Empirical distribution function of the objective.
  kTimeline,         // Trials per worker over time, by state.
  kParetoFront,      // Two objectives: every feasible trial and the front.
  kHypervolume,      // Hypervolume of the front after each completed trial.
};

// "history", "history-time", "importance", "parallel", "slice", "contour", "intermediate",
// "edf", "timeline", "pareto", "hypervolume"; and back (INVALID_ARGUMENT listing them).
std::string PlotKindName(PlotKind kind);
absl::StatusOr<PlotKind> ParsePlotKind(const std::string& name);
std::vector<PlotKind> AllPlotKinds();

struct PlotAxis {
  std::string label;  // With the unit where there is one: "seconds since the study started".
  bool log = false;   // A log parameter: draw the axis in log scale.
  // A categorical axis: the labels at 0, 1, 2, ... (values are indices).
  std::vector<std::string> categories;
  double min = 0;  // The range every point of the plot lies in (all trials, not a subset).
  double max = 0;
};

struct PlotSeries {
  std::string name;        // "completed", "best so far", "pruned", a worker's id, ...
  std::vector<double> x;
  std::vector<double> y;
  std::vector<double> z;   // A third value when the plot has one (colour; bar end for timelines).
  std::vector<int64_t> trials;  // The trial number of each point; -1 for points of no trial.
  // Line series (a progress curve, a parallel-coordinates line) carry one trial's points.
  bool line = false;
};

struct PlotPanel {
  std::string title;  // A parameter's name for slice panels; empty for single-panel plots.
  PlotAxis x, y;
  PlotAxis z;  // The colour scale, when the series have z.
  std::vector<PlotSeries> series;
};

struct PlotData {
  PlotKind kind = PlotKind::kHistory;
  std::string title;
  std::vector<PlotPanel> panels;  // One, except for slice (one per parameter).
  // Parallel coordinates: the axes, in order (the objective last); lines' y are unit positions.
  std::vector<PlotAxis> axes;
  int64_t points_total = 0;  // Before downsampling.
  bool downsampled = false;
  // Why the plot is empty ("no completed trial yet"), for renderers to say instead.
  std::string empty_reason;
};

struct PlotOptions {
  int objective = 0;
  std::vector<std::string> params;  // Slice, parallel, contour (two): empty means all / the
                                    // two most important.
  int max_points = kMaxPointsPerSeries;
  // Importance: the result to draw (the caller computes it; the plot does not).
  const ImportanceResult* importance = nullptr;
  // Pareto front and hypervolume: the two objectives drawn (indices).
  int objective_x = 0;
  int objective_y = 1;
};

// The plot's data, or INVALID_ARGUMENT (unknown parameter or objective; a contour without two
// parameters; a Pareto plot of a study with one objective). A study with no trial to draw
// gives an empty plot with its empty_reason.
absl::StatusOr<PlotData> MakePlot(const StudyData& study, PlotKind kind,
                                  const PlotOptions& options);

// Indices 0..n-1 thinned to at most `max` evenly spaced ones, plus every index in `keep`
// (sorted, without duplicates). Exposed for tests and other renderers.
std::vector<size_t> Downsample(size_t n, int max, const std::vector<size_t>& keep = {});

}  // namespace dhpt::analysis
