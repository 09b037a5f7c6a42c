#include "services/cli/study_plots.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/cli/gnuplot.h"
#include "services/cli/study_file.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {
namespace {

using analysis::PlotAxis;
using analysis::PlotData;
using analysis::PlotKind;
using analysis::PlotPanel;
using analysis::PlotSeries;

constexpr double kBarHalfHeight = 0.35;

// The box a point of a bar-like series covers: x low, x high, y low, y high.
std::array<double, 4> Box(const PlotData& plot, const PlotPanel& panel, size_t series,
                          size_t i) {
  const PlotSeries& s = panel.series[series];
  switch (plot.kind) {
    case PlotKind::kImportance:
      return {0, s.x[i], s.y[i] - kBarHalfHeight, s.y[i] + kBarHalfHeight};
    case PlotKind::kTimeline:
      return {s.x[i], s.z[i], s.y[i] - kBarHalfHeight, s.y[i] + kBarHalfHeight};
    case PlotKind::kContour:
      if (series == 0) {
        // A grid cell around its centre, in the axis's own scale.
        auto span = [](const PlotAxis& axis, double centre) -> std::pair<double, double> {
          if (!axis.categories.empty()) return {centre - 0.5, centre + 0.5};
          const double cells = analysis::kContourGridCells;
          if (axis.log) {
            const double half = 0.5 * (std::log(axis.max) - std::log(axis.min)) / cells;
            return {centre * std::exp(-half), centre * std::exp(half)};
          }
          const double half = 0.5 * (axis.max - axis.min) / cells;
          return {centre - half, centre + half};
        };
        const auto [x0, x1] = span(panel.x, s.x[i]);
        const auto [y0, y1] = span(panel.y, s.y[i]);
        return {x0, x1, y0, y1};
      }
      [[fallthrough]];
    default:
      return {s.x[i], s.x[i], s.y[i], s.y[i]};
  }
}

std::string Quoted(const std::string& text) { return absl::StrCat("\"", GnuplotEscape(text), "\""); }

// xtics/ytics, log scale and range of one axis ("x" or "y"), covering every point.
std::string AxisCommands(const char* which, const PlotAxis& axis) {
  std::string gp = absl::StrFormat("set %slabel %s\n", which, Quoted(axis.label));
  if (!axis.categories.empty()) {
    std::vector<std::string> tics;
    for (size_t i = 0; i < axis.categories.size(); ++i) {
      tics.push_back(absl::StrCat(Quoted(axis.categories[i]), " ", i));
    }
    absl::StrAppendFormat(&gp, "set %stics (%s)\n", which, absl::StrJoin(tics, ", "));
  } else {
    absl::StrAppendFormat(&gp, "set %stics autofreq\n", which);
  }
  if (axis.log) {
    absl::StrAppendFormat(&gp, "set logscale %s\nset format %s '%%.0e'\n", which, which);
    absl::StrAppendFormat(&gp, "set %srange [%.9g:%.9g]\n", which, axis.min / 1.15, axis.max * 1.15);
    return gp;
  }
  absl::StrAppendFormat(&gp, "unset logscale %s\nset format %s '%%g'\n", which, which);
  double low = axis.min, high = axis.max;
  if (!axis.categories.empty()) {
    // Categorical ranges already reach half a step past the first and last choice.
  } else if (high > low) {
    const double margin = 0.04 * (high - low);
    low -= margin;
    high += margin;
  } else {
    low -= 1;
    high += 1;
  }
  absl::StrAppendFormat(&gp, "set %srange [%.9g:%.9g]\n", which, low, high);
  return gp;
}

// The gnuplot block numbers of each panel's series, in the order StudyPlotData writes them.
std::vector<std::vector<int>> BlockIndices(const PlotData& plot) {
  std::vector<std::vector<int>> out;
  int next = 0;
  for (const PlotPanel& panel : plot.panels) {
    std::vector<int>& blocks = out.emplace_back();
    for (size_t s = 0; s < panel.series.size(); ++s) blocks.push_back(next++);
  }
  return out;
}

const char* StateColour(const std::string& state) {
  if (state == "completed") return "#2ca02c";
  if (state == "pruned") return "#ff7f0e";
  if (state == "failed") return "#d62728";
  if (state == "running") return "#1f77b4";
  return "#7f7f7f";
}

std::string EmptyPlot(const std::string& reason) {
  return absl::StrFormat(
      "set label 1 %s at graph 0.5, 0.5 center font ',14'\n"
      "unset key\nset xrange [0:1]\nset yrange [0:1]\nunset logscale\nset xtics autofreq\n"
      "set ytics autofreq\nplot -1 notitle\nunset label 1\n",
      Quoted(reason));
}

std::string ParallelAxes(const PlotData& plot) {
  std::string gp;
  std::vector<std::string> tics;
  for (size_t a = 0; a < plot.axes.size(); ++a) {
    const PlotAxis& axis = plot.axes[a];
    tics.push_back(absl::StrCat(Quoted(axis.label), " ", a));
    absl::StrAppendFormat(&gp, "set arrow from %d, 0 to %d, 1 nohead lw 1.5 lc rgb 'black' front\n",
                          a, a);
    auto label = [&](const std::string& text, double at) {
      absl::StrAppendFormat(&gp, "set label %s at %d, %.4f left offset 0.4, 0 font ',9' front\n",
                            Quoted(text), a, at);
    };
    if (!axis.categories.empty()) {
      for (size_t c = 0; c < axis.categories.size(); ++c) {
        label(axis.categories[c], (c + 0.5) / axis.categories.size());
      }
    } else {
      label(absl::StrFormat("%.4g", axis.min), 0.0);
      label(absl::StrFormat("%.4g", axis.max), 1.0);
    }
  }
  absl::StrAppendFormat(&gp,
                        "set xtics (%s) rotate by -20\nset xrange [-0.2:%.1f]\n"
                        "set yrange [-0.05:1.05]\nunset ytics\nset ylabel %s\n"
                        "set cblabel %s\nunset key\n",
                        absl::StrJoin(tics, ", "), plot.axes.size() - 0.6,
                        Quoted("each axis from its minimum (bottom) to its maximum (top)"),
                        Quoted(plot.axes.back().label));
  return gp;
}

}  // namespace

std::string StudyPlotData(const PlotData& plot) {
  std::string data = absl::StrCat("# ", PlotKindName(plot.kind),
                                  ": x y z trial x_low x_high y_low y_high; one block a series\n");
  for (const PlotPanel& panel : plot.panels) {
    for (size_t s = 0; s < panel.series.size(); ++s) {
      const PlotSeries& series = panel.series[s];
      absl::StrAppend(&data, "# ", panel.title, panel.title.empty() ? "" : ": ", series.name, "\n");
      for (size_t i = 0; i < series.x.size(); ++i) {
        const std::array<double, 4> box = Box(plot, panel, s, i);
        absl::StrAppendFormat(&data, "%.9g %.9g %.9g %d %.9g %.9g %.9g %.9g\n", series.x[i],
                              series.y[i], i < series.z.size() ? series.z[i] : 0.0,
                              i < series.trials.size() ? series.trials[i] : -1, box[0], box[1],
                              box[2], box[3]);
      }
      // An empty block still needs a row, or gnuplot's block numbers shift.
      if (series.x.empty()) absl::StrAppend(&data, "NaN NaN NaN -1 NaN NaN NaN NaN\n");
      absl::StrAppend(&data, "\n\n");
    }
  }
  return data;
}

std::string StudyPlotScript(const PlotData& plot, const std::string& name,
                            const std::string& terminal) {
  const bool svg = terminal == "svg";
  const std::string ext = svg ? "svg" : "png";
  const int panels = static_cast<int>(plot.panels.size());
  const int columns = plot.kind == PlotKind::kSlice ? std::min(panels, 3) : 1;
  const int rows = (panels + columns - 1) / std::max(columns, 1);
  const int height = plot.kind == PlotKind::kSlice ? std::max(560, 330 * rows)
                     : plot.kind == PlotKind::kImportance
                         ? std::max(400, 120 + 36 * static_cast<int>(plot.panels[0].y.categories.size()))
                         : 560;
  std::string gp = absl::StrFormat(
      "# Drawn by dhpt; run `gnuplot %s-%s.gp` in this folder to draw it again.\n"
      "set terminal %s size 960,%d %s font 'DejaVu Sans,11'\n"
      "set output '%s.%s'\n"
      "set datafile commentschars '#'\n"
      "set grid\n"
      "set key outside right top\n"
      "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 '#fde725')\n",
      name, ext, terminal, height, svg ? "dynamic background rgb 'white'" : "background rgb 'white'",
      name, ext);
  const std::string data = absl::StrCat("'data/", name, ".dat'");
  const std::vector<std::vector<int>> blocks = BlockIndices(plot);
  if (plot.kind == PlotKind::kSlice) {
    absl::StrAppendFormat(&gp, "set multiplot layout %d,%d title %s\nunset key\n", rows, columns,
                          Quoted(plot.title));
  } else {
    absl::StrAppendFormat(&gp, "set title %s\n", Quoted(plot.title));
  }
  if (plot.panels.empty() || (!plot.empty_reason.empty() && plot.kind != PlotKind::kSlice)) {
    absl::StrAppend(&gp, EmptyPlot(plot.empty_reason.empty() ? "nothing to draw" : plot.empty_reason));
    return gp;
  }
  for (int p = 0; p < panels; ++p) {
    const PlotPanel& panel = plot.panels[p];
    const std::vector<int>& block = blocks[p];
    if (plot.kind == PlotKind::kParallel) {
      absl::StrAppend(&gp, ParallelAxes(plot));
    } else {
      absl::StrAppend(&gp, AxisCommands("x", panel.x), AxisCommands("y", panel.y));
    }
    if (!panel.title.empty()) absl::StrAppendFormat(&gp, "set title %s\n", Quoted(panel.title));
    std::vector<std::string> clauses;
    switch (plot.kind) {
      case PlotKind::kHistory:
      case PlotKind::kHistoryByTime:
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with points pt 7 ps 0.5 lc rgb '#1f77b4' title %s", data,
            block[0], Quoted(panel.series[0].name)));
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with steps lw 2 lc rgb '#d62728' title %s", data, block[1],
            Quoted(panel.series[1].name)));
        break;
      case PlotKind::kEdf:
      case PlotKind::kHypervolume:
        absl::StrAppend(&gp, "unset key\n");
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with steps lw 2 lc rgb '#1f77b4' notitle", data, block[0]));
        break;
      case PlotKind::kImportance:
        absl::StrAppend(&gp, "unset key\nset xrange [0:1.18]\nset style fill solid 0.7\n");
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2:5:6:7:8 with boxxyerror lc rgb '#1f77b4' notitle", data,
            block[0]));
        clauses.push_back(absl::StrFormat(
            "%s index %d using ($1 + 0.01):2:(sprintf('%%.1f%%%%', 100 * $1)) with labels left "
            "notitle",
            data, block[0]));
        break;
      case PlotKind::kSlice:
        absl::StrAppendFormat(&gp, "set cblabel %s\n", Quoted(panel.z.label));
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2:3 with points pt 7 ps 0.6 lc palette notitle", data, block[0]));
        break;
      case PlotKind::kContour:
        absl::StrAppendFormat(&gp, "set cblabel %s\nset style fill solid 0.85 noborder\n",
                              Quoted(panel.z.label));
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2:5:6:7:8:3 with boxxyerror lc palette title %s", data, block[0],
            Quoted(panel.series[0].name)));
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with points pt 6 ps 0.7 lc rgb 'black' title %s", data,
            block[1], Quoted(panel.series[1].name)));
        break;
      case PlotKind::kIntermediate: {
        bool titled_completed = false, titled_pruned = false, titled_other = false;
        for (size_t s = 0; s < panel.series.size(); ++s) {
          const PlotSeries& series = panel.series[s];
          if (!series.line) {
            clauses.push_back(absl::StrFormat(
                "%s index %d using 1:2 with points pt 2 ps 1.2 lw 2 lc rgb '#d62728' title %s",
                data, block[s], Quoted(series.name)));
            continue;
          }
          bool* titled = series.name == "pruned"      ? &titled_pruned
                         : series.name == "completed" ? &titled_completed
                                                      : &titled_other;
          const char* colour = series.name == "pruned"      ? "#ff7f0e"
                               : series.name == "completed" ? "#1f77b4"
                                                            : "#7f7f7f";
          clauses.push_back(absl::StrFormat("%s index %d using 1:2 with lines lw 1 lc rgb '%s' %s",
                                            data, block[s], colour,
                                            *titled ? "notitle" : "title " + Quoted(series.name)));
          *titled = true;
        }
        break;
      }
      case PlotKind::kTimeline:
        absl::StrAppend(&gp, "set style fill solid 0.8 border rgb 'white'\n");
        for (size_t s = 0; s < panel.series.size(); ++s) {
          clauses.push_back(absl::StrFormat(
              "%s index %d using (($5 + $6) / 2):2:5:6:7:8 with boxxyerror lc rgb '%s' title %s",
              data, block[s], StateColour(panel.series[s].name), Quoted(panel.series[s].name)));
        }
        break;
      case PlotKind::kParallel:
        for (size_t s = 0; s < panel.series.size(); ++s) {
          clauses.push_back(absl::StrFormat(
              "%s index %d using 1:2:3 with lines lw 1 lc palette notitle", data, block[s]));
        }
        break;
      case PlotKind::kParetoFront:
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with points pt 7 ps 0.5 lc rgb '#7f7f7f' title %s", data,
            block[0], Quoted(panel.series[0].name)));
        clauses.push_back(absl::StrFormat(
            "%s index %d using 1:2 with linespoints pt 7 lw 2 lc rgb '#d62728' title %s", data,
            block[1], Quoted(panel.series[1].name)));
        break;
    }
    absl::StrAppend(&gp, "plot ", absl::StrJoin(clauses, ", \\\n     "), "\n");
    if (plot.kind == PlotKind::kSlice) absl::StrAppend(&gp, "unset title\n");
  }
  if (plot.kind == PlotKind::kSlice) absl::StrAppend(&gp, "unset multiplot\n");
  return gp;
}

absl::StatusOr<std::vector<std::string>> DrawStudyPlot(const PlotData& plot, const std::string& dir,
                                                       const std::string& name) {
  const std::filesystem::path root(dir);
  std::error_code error;
  std::filesystem::create_directories(root / "data", error);
  if (error) return absl::InternalError(absl::StrCat("cannot create ", (root / "data").string()));
  RETURN_IF_ERROR(WriteTextFile((root / "data" / (name + ".dat")).string(), StudyPlotData(plot)));
  std::vector<std::string> files;
  for (const std::string terminal : {"svg", "pngcairo"}) {
    const std::string ext = terminal == "svg" ? "svg" : "png";
    const std::string script = absl::StrCat(name, "-", ext, ".gp");
    RETURN_IF_ERROR(WriteTextFile((root / script).string(), StudyPlotScript(plot, name, terminal)));
    RETURN_IF_ERROR(RunGnuplot(root.string(), script, (root / "data" / "gnuplot.log").string()));
    files.push_back(absl::StrCat(name, ".", ext));
  }
  return files;
}

}  // namespace dhpt::cli
