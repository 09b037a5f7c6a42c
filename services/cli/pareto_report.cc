#include "services/cli/pareto_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/cli/gnuplot.h"
#include "services/cli/report.h"
#include "services/cli/study_file.h"
#include "services/cli/text_table.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {
namespace {

// The study's objectives in order: the list, or the single objective.
std::vector<v1::Objective> Objectives(const v1::StudySpec& spec) {
  if (spec.objectives_size() > 0) return {spec.objectives().begin(), spec.objectives().end()};
  return {spec.objective()};
}

std::string Value(const v1::Trial& trial, const std::string& metric) {
  auto it = trial.metrics().find(metric);
  return it == trial.metrics().end() ? "" : absl::StrFormat("%.6g", it->second);
}

// One row per trial: the values of every objective, space-separated, then the trial number.
std::string Rows(const v1::StudySpec& spec, const std::vector<const v1::Trial*>& trials,
                 const std::string& comment) {
  const std::vector<v1::Objective> objectives = Objectives(spec);
  std::string data = absl::StrCat("# ", comment, ": ");
  for (const v1::Objective& objective : objectives) absl::StrAppend(&data, objective.metric(), " ");
  absl::StrAppend(&data, "trial\n");
  for (const v1::Trial* trial : trials) {
    std::vector<std::string> values;
    for (const v1::Objective& objective : objectives) {
      const std::string value = Value(*trial, objective.metric());
      values.push_back(value.empty() ? "NaN" : value);
    }
    absl::StrAppend(&data, absl::StrJoin(values, " "), " ", trial->number(), "\n");
  }
  return data;
}

}  // namespace

std::string ParetoTable(const v1::Study& study, const v1::GetParetoFrontResponse& front) {
  const v1::StudySpec& spec = study.spec();
  std::string out = absl::StrFormat("Pareto front of %s: %d trials", spec.name(),
                                    front.trials_size());
  if (front.reference_point_size() > 0) {
    std::vector<std::string> reference;
    for (double r : front.reference_point()) reference.push_back(absl::StrFormat("%.6g", r));
    absl::StrAppendFormat(&out, ", hypervolume %s%.6g from (%s)",
                          front.hypervolume_estimated() ? "~" : "", front.hypervolume(),
                          absl::StrJoin(reference, ", "));
  }
  absl::StrAppend(&out, "\n");
  std::vector<std::string> header = {"#"};
  const std::vector<v1::Objective> objectives = Objectives(spec);
  for (const v1::Objective& objective : objectives) {
    header.push_back(absl::StrCat(objective.metric(),
                                  objective.goal() == v1::Objective::MAXIMIZE ? " (max)" : " (min)"));
  }
  // A constrained metric that is also an objective is shown once.
  std::vector<std::string> constrained;
  for (const v1::Constraint& constraint : spec.constraints()) {
    if (std::none_of(objectives.begin(), objectives.end(),
                     [&](const v1::Objective& o) { return o.metric() == constraint.metric(); })) {
      constrained.push_back(constraint.metric());
    }
  }
  header.insert(header.end(), constrained.begin(), constrained.end());
  for (const v1::Parameter& p : spec.parameters()) header.push_back(p.name());
  TextTable table(header);
  for (const v1::Trial& trial : front.trials()) {
    std::vector<std::string> row = {absl::StrCat(trial.number())};
    for (const v1::Objective& objective : objectives) row.push_back(Value(trial, objective.metric()));
    for (const std::string& metric : constrained) row.push_back(Value(trial, metric));
    for (const v1::Parameter& p : spec.parameters()) {
      auto it = trial.params().find(p.name());
      // Absent: a condition switched the parameter off in this trial (kInactiveCell).
      row.push_back(it == trial.params().end() ? std::string(kInactiveCell)
                                               : FormatParameterValue(it->second));
    }
    table.Add(std::move(row));
  }
  return out + table.Render();
}

std::string ParetoPlotScript(const v1::StudySpec& spec, const std::string& terminal,
                             const std::vector<std::pair<double, double>>& ranges) {
  const std::vector<v1::Objective> objectives = Objectives(spec);
  const int m = static_cast<int>(objectives.size());
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < m; ++i) {
    for (int j = i + 1; j < m; ++j) pairs.emplace_back(i, j);
  }
  const int columns = pairs.size() <= 1 ? 1 : 2;
  const int rows = static_cast<int>((pairs.size() + columns - 1) / columns);
  const std::string ext = terminal == "svg" ? "svg" : "png";
  std::string script = absl::StrFormat(
      "# Drawn by dhpt pareto; run `gnuplot %s` in this folder to draw again.\n"
      "set terminal %s size %d,%d %s\nset output 'pareto.%s'\nset key outside bottom center horizontal\n"
      "set grid\nset datafile missing 'NaN'\n",
      terminal == "svg" ? "pareto-svg.gp" : "pareto-png.gp", terminal, 640 * columns, 480 * rows,
      terminal == "svg" ? "dynamic enhanced" : "enhanced", ext);
  if (pairs.size() > 1) absl::StrAppendFormat(&script, "set multiplot layout %d,%d\n", rows, columns);
  for (const auto& [i, j] : pairs) {
    if (ranges.size() == objectives.size()) {
      absl::StrAppendFormat(&script, "set xrange [%.9g:%.9g]\nset yrange [%.9g:%.9g]\n",
                            ranges[i].first, ranges[i].second, ranges[j].first, ranges[j].second);
    }
    absl::StrAppendFormat(
        &script,
        "set title \"%s: %s against %s\"\nset xlabel \"%s\"\nset ylabel \"%s\"\n"
        "plot 'data/trials.dat' using %d:%d with points pt 7 ps 0.5 lc rgb '#9e9e9e' title 'completed', \\\n"
        "     'data/infeasible.dat' using %d:%d with points pt 2 ps 0.7 lc rgb '#e57373' title 'infeasible', \\\n"
        "     'data/front.dat' using %d:%d with %s lc rgb '#1565c0' title 'Pareto front'\n",
        GnuplotEscape(spec.name()), GnuplotEscape(objectives[j].metric()),
        GnuplotEscape(objectives[i].metric()), GnuplotEscape(objectives[i].metric()),
        GnuplotEscape(objectives[j].metric()), i + 1, j + 1, i + 1, j + 1, i + 1, j + 1,
        // The front file is in order of the first objective: with two objectives a line
        // through it traces the front; with more it would zigzag.
        pairs.size() == 1 ? "linespoints pt 7 ps 1.2 lw 2" : "points pt 7 ps 1.2");
  }
  if (pairs.size() > 1) script += "unset multiplot\n";
  return script;
}

std::vector<std::pair<double, double>> ParetoAxisRanges(
    int objectives, const std::vector<const v1::Trial*>& completed) {
  // Every completed trial is in the picture (framing the front alone hid most of them); the
  // front stands out by its colour and line instead. A trial without every objective value
  // leaves the axes to gnuplot.
  const bool whole = std::all_of(completed.begin(), completed.end(), [&](const v1::Trial* t) {
    return t->objective_values_size() == objectives;
  });
  std::vector<std::pair<double, double>> ranges;
  for (int i = 0; i < objectives && whole && !completed.empty(); ++i) {
    double low = completed[0]->objective_values(i), high = low;
    for (const v1::Trial* trial : completed) {
      low = std::min(low, trial->objective_values(i));
      high = std::max(high, trial->objective_values(i));
    }
    // A twentieth of the spread around the points, so that none sits on the frame.
    const double margin = high > low ? (high - low) * 0.05 : std::max(std::abs(low) * 0.1, 1e-9);
    // Sizes and latencies are never negative: an axis of them starts at 0 at the lowest.
    ranges.emplace_back(low >= 0 ? std::max(0.0, low - margin) : low - margin, high + margin);
  }
  return ranges;
}

absl::StatusOr<std::vector<std::string>> DrawParetoPlot(const v1::Study& study,
                                                        const std::vector<v1::Trial>& trials,
                                                        const v1::GetParetoFrontResponse& front,
                                                        const std::string& dir) {
  const v1::StudySpec& spec = study.spec();
  if (Objectives(spec).size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("study \"", spec.name(), "\" has one objective: there is no front to draw"));
  }
  if (dir.find('\'') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot draw plots in a path with a quote in it: ", dir));
  }
  std::vector<const v1::Trial*> feasible, infeasible, on_front;
  for (const v1::Trial& trial : trials) {
    if (trial.state() != v1::Trial::COMPLETED) continue;
    (trial.infeasible() ? infeasible : feasible).push_back(&trial);
  }
  if (feasible.empty() && infeasible.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("study \"", spec.name(), "\" has no completed trial yet: nothing to draw"));
  }
  for (const v1::Trial& trial : front.trials()) on_front.push_back(&trial);
  // Along the first objective, so that the front reads left to right in the data file.
  auto first = [](const v1::Trial* t) { return t->objective_values_size() > 0 ? t->objective_values(0) : 0.0; };
  std::sort(on_front.begin(), on_front.end(),
            [&](const v1::Trial* a, const v1::Trial* b) { return first(a) < first(b); });
  const std::filesystem::path root(dir);
  std::error_code error;
  std::filesystem::create_directories(root / "data", error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", (root / "data").string(), ": ", error.message()));
  }
  RETURN_IF_ERROR(WriteTextFile((root / "data" / "trials.dat").string(),
                                Rows(spec, feasible, "feasible completed trials")));
  RETURN_IF_ERROR(WriteTextFile((root / "data" / "infeasible.dat").string(),
                                Rows(spec, infeasible, "infeasible completed trials")));
  RETURN_IF_ERROR(WriteTextFile((root / "data" / "front.dat").string(),
                                Rows(spec, on_front, "the Pareto front")));
  std::vector<const v1::Trial*> completed = feasible;
  completed.insert(completed.end(), infeasible.begin(), infeasible.end());
  const std::vector<std::pair<double, double>> ranges =
      ParetoAxisRanges(static_cast<int>(Objectives(spec).size()), completed);
  std::vector<std::string> files;
  for (const std::string terminal : {"svg", "pngcairo"}) {
    const std::string script = terminal == "svg" ? "pareto-svg.gp" : "pareto-png.gp";
    RETURN_IF_ERROR(
        WriteTextFile((root / script).string(), ParetoPlotScript(spec, terminal, ranges)));
    RETURN_IF_ERROR(RunGnuplot(root.string(), script, (root / "data" / "gnuplot.log").string()));
    files.push_back(terminal == "svg" ? "pareto.svg" : "pareto.png");
  }
  return files;
}

}  // namespace dhpt::cli
