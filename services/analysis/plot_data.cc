#include "services/analysis/plot_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/common/status_macros.h"
#include "services/optimizer/pareto.h"

namespace dhpt::analysis {
namespace {


const std::vector<std::pair<PlotKind, const char*>>& KindNames() {
  static const auto* names = new std::vector<std::pair<PlotKind, const char*>>{
      {PlotKind::kHistory, "history"},       {PlotKind::kHistoryByTime, "history-time"},
      {PlotKind::kImportance, "importance"}, {PlotKind::kParallel, "parallel"},
      {PlotKind::kSlice, "slice"},           {PlotKind::kContour, "contour"},
      {PlotKind::kIntermediate, "intermediate"}, {PlotKind::kEdf, "edf"},
      {PlotKind::kTimeline, "timeline"},     {PlotKind::kParetoFront, "pareto"},
      {PlotKind::kHypervolume, "hypervolume"}};
  return *names;
}

// A completed trial's objective value (infeasible ones too: they are trials the study ran).
struct Valued {
  const TrialData* trial;
  double value;
};

std::vector<Valued> CompletedValues(const StudyData& study, int objective) {
  std::vector<Valued> out;
  for (const TrialData& trial : study.trials) {
    if (trial.state == TrialState::kCompleted &&
        static_cast<int>(trial.values.size()) > objective &&
        std::isfinite(trial.values[objective])) {
      out.push_back({&trial, trial.values[objective]});
    }
  }
  return out;
}

bool Better(const ObjectiveInfo& objective, double a, double b) {
  return objective.maximize ? a > b : a < b;
}

PlotAxis ObjectiveAxis(const ObjectiveInfo& objective, const std::vector<Valued>& values) {
  PlotAxis axis;
  axis.label = absl::StrCat(objective.metric, objective.maximize ? " (maximised)" : " (minimised)");
  if (!values.empty()) {
    auto [low, high] = std::minmax_element(values.begin(), values.end(),
                                           [](const Valued& a, const Valued& b) {
                                             return a.value < b.value;
                                           });
    axis.min = low->value;
    axis.max = high->value;
  }
  return axis;
}

// A parameter's axis over its whole range, so that no trial falls outside it.
PlotAxis ParamAxis(const optimizer::ParameterSpec& param) {
  PlotAxis axis;
  axis.label = param.name;
  switch (param.kind) {
    case optimizer::ParameterKind::kCategorical:
      axis.categories = param.categories;
      axis.min = -0.5;
      axis.max = static_cast<double>(param.categories.size()) - 0.5;
      break;
    case optimizer::ParameterKind::kDiscrete: {
      auto [low, high] = std::minmax_element(param.discrete_values.begin(),
                                             param.discrete_values.end());
      axis.min = param.discrete_values.empty() ? 0 : *low;
      axis.max = param.discrete_values.empty() ? 1 : *high;
      break;
    }
    default:
      axis.min = param.min;
      axis.max = param.max;
      axis.log = param.log && param.min > 0;
      if (axis.log) axis.label += " (log scale)";
  }
  return axis;
}

std::vector<double> SortedValues(const optimizer::ParameterSpec& param) {
  std::vector<double> sorted = param.discrete_values;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

absl::StatusOr<std::vector<int>> ChosenParams(const StudyData& study,
                                              const std::vector<std::string>& names) {
  std::vector<int> chosen;
  if (names.empty()) {
    for (size_t p = 0; p < study.params.size(); ++p) chosen.push_back(static_cast<int>(p));
    return chosen;
  }
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(const int p, ParamIndex(study, name));
    chosen.push_back(p);
  }
  return chosen;
}

// The indices of `values`, the best first, cut to `max` curves: the best tenth, then evenly.
std::vector<size_t> BestAndSpread(const ObjectiveInfo& objective,
                                  const std::vector<Valued>& values, int max) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  if (static_cast<int>(values.size()) <= max) return order;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Better(objective, values[a].value, values[b].value);
  });
  const size_t best = static_cast<size_t>(max / 10);
  std::vector<size_t> keep(order.begin(), order.begin() + best);
  for (size_t i : Downsample(values.size() - best, max - static_cast<int>(best))) {
    keep.push_back(order[best + i]);
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

PlotData History(const StudyData& study, const ObjectiveInfo& objective, int index,
                 bool by_time, int max_points) {
  PlotData plot;
  plot.kind = by_time ? PlotKind::kHistoryByTime : PlotKind::kHistory;
  plot.title = absl::StrCat(study.name, ": ", objective.metric, " of each trial and the best so far",
                            by_time ? ", over time" : "");
  std::vector<Valued> values = CompletedValues(study, index);
  if (by_time) {
    std::erase_if(values, [](const Valued& v) { return std::isnan(v.trial->end_seconds); });
    std::stable_sort(values.begin(), values.end(), [](const Valued& a, const Valued& b) {
      return a.trial->end_seconds < b.trial->end_seconds;
    });
  }
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = by_time ? "seconds since the study's first trial was created" : "trial number";
  panel.y = ObjectiveAxis(objective, values);
  plot.points_total = static_cast<int64_t>(values.size());
  if (values.empty()) {
    plot.empty_reason = "no completed trial yet";
    return plot;
  }
  auto x_of = [&](const Valued& v) {
    return by_time ? v.trial->end_seconds : static_cast<double>(v.trial->number);
  };
  panel.x.min = x_of(values.front());
  panel.x.max = x_of(values.back());
  PlotSeries best;
  best.name = "best so far";
  best.line = true;
  std::vector<size_t> changes;
  double so_far = values[0].value;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i == 0 || Better(objective, values[i].value, so_far)) {
      so_far = values[i].value;
      changes.push_back(i);
      best.x.push_back(x_of(values[i]));
      best.y.push_back(so_far);
      best.trials.push_back(values[i].trial->number);
    }
  }
  // The line reaches the last trial.
  best.x.push_back(x_of(values.back()));
  best.y.push_back(so_far);
  best.trials.push_back(-1);
  PlotSeries all;
  all.name = "completed trial";
  const std::vector<size_t> kept = Downsample(values.size(), max_points, changes);
  plot.downsampled = kept.size() < values.size();
  for (size_t i : kept) {
    all.x.push_back(x_of(values[i]));
    all.y.push_back(values[i].value);
    all.trials.push_back(values[i].trial->number);
  }
  panel.series.push_back(std::move(all));
  panel.series.push_back(std::move(best));
  return plot;
}

PlotData Importance(const StudyData& study, const ImportanceResult& result) {
  PlotData plot;
  plot.kind = PlotKind::kImportance;
  plot.title = absl::StrCat(study.name, ": importance of each parameter for ", result.objective,
                            " (", EvaluatorName(result.evaluator), ", ", result.trials_used,
                            " trials)");
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = "share of the objective's variation explained";
  panel.x.min = 0;
  panel.x.max = 1;
  panel.y.label = "parameter";
  PlotSeries bars;
  bars.name = "importance";
  // Least important first, so that a horizontal bar chart lists the most important on top.
  for (auto it = result.importances.rbegin(); it != result.importances.rend(); ++it) {
    panel.y.categories.push_back(it->name);
    bars.x.push_back(it->importance);
    bars.y.push_back(static_cast<double>(panel.y.categories.size() - 1));
    bars.trials.push_back(-1);
  }
  panel.y.min = -0.5;
  panel.y.max = static_cast<double>(panel.y.categories.size()) - 0.5;
  plot.points_total = static_cast<int64_t>(bars.x.size());
  panel.series.push_back(std::move(bars));
  return plot;
}

PlotData Slice(const StudyData& study, const ObjectiveInfo& objective, int index,
               const std::vector<int>& chosen, int max_points) {
  PlotData plot;
  plot.kind = PlotKind::kSlice;
  plot.title = absl::StrCat(study.name, ": ", objective.metric, " against each parameter");
  const std::vector<Valued> values = CompletedValues(study, index);
  plot.points_total = static_cast<int64_t>(values.size());
  if (values.empty()) plot.empty_reason = "no completed trial yet";
  const std::vector<size_t> kept = Downsample(values.size(), max_points);
  plot.downsampled = kept.size() < values.size();
  for (int p : chosen) {
    PlotPanel& panel = plot.panels.emplace_back();
    panel.title = study.params[p].name;
    panel.x = ParamAxis(study.params[p]);
    panel.y = ObjectiveAxis(objective, values);
    panel.z.label = "trial number";
    PlotSeries series;
    series.name = "completed trial";
    for (size_t i : kept) {
      const double x = values[i].trial->params[p];
      if (std::isnan(x)) continue;
      series.x.push_back(x);
      series.y.push_back(values[i].value);
      series.z.push_back(static_cast<double>(values[i].trial->number));
      series.trials.push_back(values[i].trial->number);
    }
    if (!values.empty()) {
      panel.z.min = static_cast<double>(values.front().trial->number);
      panel.z.max = static_cast<double>(values.back().trial->number);
    }
    panel.series.push_back(std::move(series));
  }
  return plot;
}

absl::StatusOr<PlotData> Contour(const StudyData& study, const ObjectiveInfo& objective,
                                 int index, const PlotOptions& options) {
  std::vector<int> pair;
  if (!options.params.empty()) {
    if (options.params.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a contour plot draws two parameters; --params names ", options.params.size()));
    }
    ASSIGN_OR_RETURN(pair, ChosenParams(study, options.params));
  } else if (options.importance != nullptr && options.importance->importances.size() >= 2) {
    for (int i = 0; i < 2; ++i) {
      ASSIGN_OR_RETURN(const int p, ParamIndex(study, options.importance->importances[i].name));
      pair.push_back(p);
    }
  } else {
    if (study.params.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a contour plot draws two parameters; study \"", study.name, "\" has ",
          study.params.size()));
    }
    pair = {0, 1};
  }
  if (pair[0] == pair[1]) {
    return absl::InvalidArgumentError("a contour plot draws two different parameters");
  }
  PlotData plot;
  plot.kind = PlotKind::kContour;
  plot.title = absl::StrCat(study.name, ": ", objective.metric, " over ",
                            study.params[pair[0]].name, " and ", study.params[pair[1]].name);
  const std::vector<Valued> values = CompletedValues(study, index);
  plot.points_total = static_cast<int64_t>(values.size());
  if (values.empty()) plot.empty_reason = "no completed trial yet";
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x = ParamAxis(study.params[pair[0]]);
  panel.y = ParamAxis(study.params[pair[1]]);
  panel.z = ObjectiveAxis(objective, values);
  // The grid: each cell the mean objective of its trials (cells without a trial stay empty;
  // an interpolation would draw values no trial measured).
  const int cells = kContourGridCells;
  std::vector<double> sum(cells * cells, 0.0), count(cells * cells, 0.0);
  PlotSeries points;
  points.name = "completed trial";
  const std::vector<size_t> kept = Downsample(values.size(), options.max_points);
  plot.downsampled = kept.size() < values.size();
  auto cell = [&](int p, double raw) {
    const optimizer::ParameterSpec& param = study.params[p];
    if (param.kind == optimizer::ParameterKind::kCategorical) {
      return std::min(cells - 1, static_cast<int>(raw));  // Few choices: one cell each.
    }
    if (param.kind == optimizer::ParameterKind::kDiscrete) {
      // A cell per value, at the value (unevenly spaced values would miss an even grid).
      const std::vector<double> sorted = SortedValues(param);
      const auto it = std::lower_bound(sorted.begin(), sorted.end(), raw - 1e-12 * std::abs(raw));
      return std::min(cells - 1, static_cast<int>(it - sorted.begin()));
    }
    return std::min(cells - 1, static_cast<int>(UnitCoordinate(param, raw) * cells));
  };
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = values[i].trial->params[pair[0]], y = values[i].trial->params[pair[1]];
    if (std::isnan(x) || std::isnan(y)) continue;
    const int c = cell(pair[1], y) * cells + cell(pair[0], x);
    sum[c] += values[i].value;
    count[c] += 1;
  }
  for (size_t i : kept) {
    const double x = values[i].trial->params[pair[0]], y = values[i].trial->params[pair[1]];
    if (std::isnan(x) || std::isnan(y)) continue;
    points.x.push_back(x);
    points.y.push_back(y);
    points.z.push_back(values[i].value);
    points.trials.push_back(values[i].trial->number);
  }
  // Cell centres in the parameters' own units (log axes: the geometric centre).
  auto centre = [&](int p, int c) {
    const optimizer::ParameterSpec& param = study.params[p];
    if (param.kind == optimizer::ParameterKind::kCategorical) return static_cast<double>(c);
    if (param.kind == optimizer::ParameterKind::kDiscrete) return SortedValues(param)[c];
    const PlotAxis axis = ParamAxis(param);
    const double u = (c + 0.5) / cells;
    if (axis.log) return std::exp(std::log(axis.min) + u * (std::log(axis.max) - std::log(axis.min)));
    return axis.min + u * (axis.max - axis.min);
  };
  PlotSeries grid;
  grid.name = "mean of the trials in the cell";
  for (int cy = 0; cy < cells; ++cy) {
    for (int cx = 0; cx < cells; ++cx) {
      const int c = cy * cells + cx;
      if (count[c] == 0) continue;
      grid.x.push_back(centre(pair[0], cx));
      grid.y.push_back(centre(pair[1], cy));
      grid.z.push_back(sum[c] / count[c]);
      grid.trials.push_back(-1);
    }
  }
  panel.series.push_back(std::move(grid));
  panel.series.push_back(std::move(points));
  return plot;
}

PlotData Intermediate(const StudyData& study, int max_curves, int max_points) {
  PlotData plot;
  plot.kind = PlotKind::kIntermediate;
  plot.title = absl::StrCat(study.name, ": intermediate values of each trial (pruned ones marked)");
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = "step";
  panel.y.label = absl::StrCat(study.objectives[0].metric, " reported at the step");
  std::vector<const TrialData*> curves;
  for (const TrialData& trial : study.trials) {
    if (!trial.steps.empty()) curves.push_back(&trial);
  }
  plot.points_total = static_cast<int64_t>(curves.size());
  if (curves.empty()) {
    plot.empty_reason = "no trial reported intermediate values";
    return plot;
  }
  bool first = true;
  for (const TrialData* trial : curves) {
    for (size_t i = 0; i < trial->steps.size(); ++i) {
      const double x = static_cast<double>(trial->steps[i]), y = trial->step_values[i];
      if (!std::isfinite(y)) continue;
      panel.x.min = first ? x : std::min(panel.x.min, x);
      panel.x.max = first ? x : std::max(panel.x.max, x);
      panel.y.min = first ? y : std::min(panel.y.min, y);
      panel.y.max = first ? y : std::max(panel.y.max, y);
      first = false;
    }
  }
  // Every pruned trial's mark stays; the curves are thinned evenly.
  const std::vector<size_t> kept = Downsample(curves.size(), max_curves);
  plot.downsampled = kept.size() < curves.size();
  PlotSeries marks;
  marks.name = "pruned here";
  for (const TrialData* trial : curves) {
    if (trial->state != TrialState::kPruned) continue;
    marks.x.push_back(static_cast<double>(trial->steps.back()));
    marks.y.push_back(trial->step_values.back());
    marks.trials.push_back(trial->number);
  }
  // A tenth of a series' points per curve, so that all curves together stay near one series'
  // worth times kMaxCurvesPerPlot / 10.
  const int per_curve = std::max(20, max_points / 10);
  for (size_t c : kept) {
    const TrialData* trial = curves[c];
    PlotSeries& series = panel.series.emplace_back();
    series.name = trial->state == TrialState::kPruned      ? "pruned"
                  : trial->state == TrialState::kCompleted ? "completed"
                                                           : "other";
    series.line = true;
    for (size_t i : Downsample(trial->steps.size(), per_curve, {trial->steps.size() - 1})) {
      series.x.push_back(static_cast<double>(trial->steps[i]));
      series.y.push_back(trial->step_values[i]);
      series.trials.push_back(trial->number);
    }
  }
  if (marks.x.size() > static_cast<size_t>(max_points)) {
    PlotSeries thinned;
    thinned.name = marks.name;
    for (size_t i : Downsample(marks.x.size(), max_points)) {
      thinned.x.push_back(marks.x[i]);
      thinned.y.push_back(marks.y[i]);
      thinned.trials.push_back(marks.trials[i]);
    }
    marks = std::move(thinned);
    plot.downsampled = true;
  }
  panel.series.push_back(std::move(marks));
  return plot;
}

PlotData Edf(const StudyData& study, const ObjectiveInfo& objective, int index, int max_points) {
  PlotData plot;
  plot.kind = PlotKind::kEdf;
  plot.title = absl::StrCat(study.name, ": empirical distribution of ", objective.metric);
  std::vector<Valued> values = CompletedValues(study, index);
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x = ObjectiveAxis(objective, values);
  panel.y.label = "share of completed trials at or below the value";
  panel.y.min = 0;
  panel.y.max = 1;
  plot.points_total = static_cast<int64_t>(values.size());
  if (values.empty()) {
    plot.empty_reason = "no completed trial yet";
    return plot;
  }
  std::stable_sort(values.begin(), values.end(),
                   [](const Valued& a, const Valued& b) { return a.value < b.value; });
  PlotSeries series;
  series.name = "completed trials";
  series.line = true;
  const std::vector<size_t> kept = Downsample(values.size(), max_points, {0, values.size() - 1});
  plot.downsampled = kept.size() < values.size();
  for (size_t i : kept) {
    series.x.push_back(values[i].value);
    series.y.push_back(static_cast<double>(i + 1) / values.size());
    series.trials.push_back(values[i].trial->number);
  }
  panel.series.push_back(std::move(series));
  return plot;
}

const char* StateName(TrialState state) {
  switch (state) {
    case TrialState::kCompleted: return "completed";
    case TrialState::kPruned: return "pruned";
    case TrialState::kFailed: return "failed";
    case TrialState::kRunning: return "running";
    case TrialState::kCancelled: return "cancelled";
    case TrialState::kPending: return "pending";
  }
  return "pending";
}

PlotData Timeline(const StudyData& study, int max_points) {
  PlotData plot;
  plot.kind = PlotKind::kTimeline;
  plot.title = absl::StrCat(study.name, ": trials per worker over time (gaps: idle)");
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = "seconds since the study's first trial was created";
  panel.y.label = "worker";
  std::vector<const TrialData*> ran;
  double latest = 0;
  for (const TrialData& trial : study.trials) {
    if (std::isnan(trial.start_seconds)) continue;
    ran.push_back(&trial);
    latest = std::max(latest, trial.start_seconds);
    if (!std::isnan(trial.end_seconds)) latest = std::max(latest, trial.end_seconds);
  }
  plot.points_total = static_cast<int64_t>(ran.size());
  if (ran.empty()) {
    plot.empty_reason = "no trial has started yet";
    return plot;
  }
  std::map<std::string, int> rows;
  for (const TrialData* trial : ran) rows.emplace(trial->worker.empty() ? "(none)" : trial->worker, 0);
  for (auto& [worker, row] : rows) {
    row = static_cast<int>(panel.y.categories.size());
    panel.y.categories.push_back(worker);
  }
  panel.y.min = -0.5;
  panel.y.max = static_cast<double>(rows.size()) - 0.5;
  panel.x.min = 0;
  panel.x.max = latest;
  const std::vector<size_t> kept = Downsample(ran.size(), max_points);
  plot.downsampled = kept.size() < ran.size();
  std::map<TrialState, PlotSeries> by_state;
  for (size_t i : kept) {
    const TrialData* trial = ran[i];
    PlotSeries& series = by_state[trial->state];
    series.name = StateName(trial->state);
    series.x.push_back(trial->start_seconds);
    series.z.push_back(std::isnan(trial->end_seconds) ? latest : trial->end_seconds);
    series.y.push_back(rows.at(trial->worker.empty() ? "(none)" : trial->worker));
    series.trials.push_back(trial->number);
  }
  for (auto& [state, series] : by_state) panel.series.push_back(std::move(series));
  return plot;
}

absl::Status CheckTwoObjectives(const StudyData& study, const PlotOptions& options) {
  if (study.objectives.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "study \"", study.name, "\" has one objective; Pareto front and hypervolume plots need "
        "a study with several (spec.objectives)"));
  }
  RETURN_IF_ERROR(Objective(study, options.objective_x).status());
  RETURN_IF_ERROR(Objective(study, options.objective_y).status());
  if (options.objective_x == options.objective_y) {
    return absl::InvalidArgumentError("a Pareto plot draws two different objectives");
  }
  return absl::OkStatus();
}

// Feasible completed trials with every objective's value.
std::vector<const TrialData*> FeasibleComplete(const StudyData& study) {
  std::vector<const TrialData*> out;
  for (const TrialData& trial : study.trials) {
    if (trial.state == TrialState::kCompleted && !trial.infeasible &&
        trial.values.size() == study.objectives.size()) {
      out.push_back(&trial);
    }
  }
  return out;
}

absl::StatusOr<PlotData> Pareto(const StudyData& study, const PlotOptions& options) {
  RETURN_IF_ERROR(CheckTwoObjectives(study, options));
  const ObjectiveInfo& ox = study.objectives[options.objective_x];
  const ObjectiveInfo& oy = study.objectives[options.objective_y];
  PlotData plot;
  plot.kind = PlotKind::kParetoFront;
  plot.title = absl::StrCat(study.name, ": Pareto front of ", ox.metric, " and ", oy.metric);
  const std::vector<const TrialData*> feasible = FeasibleComplete(study);
  std::vector<std::vector<double>> values;
  std::vector<Valued> xs, ys;
  for (const TrialData* trial : feasible) {
    values.push_back({trial->values[options.objective_x], trial->values[options.objective_y]});
    xs.push_back({trial, values.back()[0]});
    ys.push_back({trial, values.back()[1]});
  }
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x = ObjectiveAxis(ox, xs);
  panel.y = ObjectiveAxis(oy, ys);
  plot.points_total = static_cast<int64_t>(feasible.size());
  if (feasible.empty()) {
    plot.empty_reason = "no feasible completed trial yet";
    return plot;
  }
  // The front of the two objectives drawn: a sweep in order of the first loss, keeping each
  // point that beats every earlier one on the second (O(n log n); duplicates all kept).
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  auto loss = [&](size_t i, int o) {
    const bool maximize = o == 0 ? ox.maximize : oy.maximize;
    return maximize ? -values[i][o] : values[i][o];
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(loss(a, 0), loss(a, 1)) < std::make_pair(loss(b, 0), loss(b, 1));
  });
  std::vector<size_t> front;
  for (size_t i : order) {
    if (front.empty() || loss(i, 1) < loss(front.back(), 1) ||
        (loss(i, 0) == loss(front.back(), 0) && loss(i, 1) == loss(front.back(), 1))) {
      front.push_back(i);
    }
  }
  PlotSeries others, members;
  others.name = "trial";
  members.name = "Pareto front";
  members.line = true;
  const std::vector<size_t> kept = Downsample(feasible.size(), options.max_points, front);
  plot.downsampled = kept.size() < feasible.size();
  std::vector<bool> on_front(feasible.size(), false);
  for (size_t f : front) on_front[f] = true;
  for (size_t i : kept) {
    if (on_front[i]) continue;
    others.x.push_back(values[i][0]);
    others.y.push_back(values[i][1]);
    others.trials.push_back(feasible[i]->number);
  }
  std::sort(front.begin(), front.end(), [&](size_t a, size_t b) { return values[a][0] < values[b][0]; });
  // A front of more points than a series holds is thinned evenly along it, ends kept.
  if (front.size() > static_cast<size_t>(options.max_points)) {
    std::vector<size_t> thinned;
    for (size_t i : Downsample(front.size(), options.max_points)) thinned.push_back(front[i]);
    front = std::move(thinned);
    plot.downsampled = true;
  }
  for (size_t f : front) {
    members.x.push_back(values[f][0]);
    members.y.push_back(values[f][1]);
    members.trials.push_back(feasible[f]->number);
  }
  panel.series.push_back(std::move(others));
  panel.series.push_back(std::move(members));
  return plot;
}

absl::StatusOr<PlotData> HypervolumeHistory(const StudyData& study, const PlotOptions& options) {
  RETURN_IF_ERROR(CheckTwoObjectives(study, options));
  PlotData plot;
  plot.kind = PlotKind::kHypervolume;
  plot.title = absl::StrCat(study.name, ": hypervolume of the Pareto front after each trial");
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = "trial number";
  panel.y.label = "hypervolume (objectives' units multiplied)";
  const std::vector<const TrialData*> feasible = FeasibleComplete(study);
  plot.points_total = static_cast<int64_t>(feasible.size());
  if (feasible.empty()) {
    plot.empty_reason = "no feasible completed trial yet";
    return plot;
  }
  const size_t d = study.objectives.size();
  // Losses (minimised), and the reference: given, else the worst value of every trial.
  std::vector<std::vector<double>> losses;
  for (const TrialData* trial : feasible) {
    std::vector<double>& loss = losses.emplace_back();
    for (size_t o = 0; o < d; ++o) {
      loss.push_back(study.objectives[o].maximize ? -trial->values[o] : trial->values[o]);
    }
  }
  std::vector<double> reference(d, -std::numeric_limits<double>::infinity());
  for (size_t o = 0; o < d; ++o) {
    if (study.objectives[o].reference) {
      reference[o] = study.objectives[o].maximize ? -*study.objectives[o].reference
                                                  : *study.objectives[o].reference;
    } else {
      for (const std::vector<double>& loss : losses) reference[o] = std::max(reference[o], loss[o]);
    }
  }
  // The front is kept as trials come; the hypervolume is computed at the kept points only.
  const std::vector<size_t> kept =
      Downsample(losses.size(), std::min(options.max_points, kMaxHypervolumePoints),
                 {losses.size() - 1});
  plot.downsampled = kept.size() < losses.size();
  PlotSeries series;
  series.name = "hypervolume";
  series.line = true;
  // Two objectives: the front is a staircase (first loss ascending, second descending), so a
  // new point costs O(log n) and the area a sweep; more objectives use the general check.
  std::map<double, double> staircase;
  std::vector<std::vector<double>> front;
  auto add = [&](const std::vector<double>& point) {
    if (d == 2) {
      auto it = staircase.upper_bound(point[0]);
      if (it != staircase.begin() && std::prev(it)->second <= point[1]) return;  // Dominated.
      it = staircase.lower_bound(point[0]);
      while (it != staircase.end() && it->second >= point[1]) it = staircase.erase(it);
      staircase[point[0]] = point[1];
      return;
    }
    for (const std::vector<double>& member : front) {
      if (optimizer::Dominates(member, point) || member == point) return;
    }
    std::erase_if(front, [&](const std::vector<double>& member) {
      return optimizer::Dominates(point, member);
    });
    front.push_back(point);
  };
  auto volume = [&]() {
    if (d != 2) return optimizer::Hypervolume(front, reference);
    double area = 0, previous_y = reference[1];
    for (const auto& [x, y] : staircase) {
      if (x >= reference[0]) break;
      if (y < previous_y) {
        area += (reference[0] - x) * (previous_y - y);
        previous_y = y;
      }
    }
    return area;
  };
  size_t next = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    add(losses[i]);
    if (next < kept.size() && kept[next] == i) {
      ++next;
      series.x.push_back(static_cast<double>(feasible[i]->number));
      series.y.push_back(volume());
      series.trials.push_back(feasible[i]->number);
    }
  }
  panel.x.min = series.x.front();
  panel.x.max = series.x.back();
  panel.y.min = *std::min_element(series.y.begin(), series.y.end());
  panel.y.max = *std::max_element(series.y.begin(), series.y.end());
  panel.series.push_back(std::move(series));
  return plot;
}

PlotData Parallel(const StudyData& study, const ObjectiveInfo& objective, int index,
                  const std::vector<int>& chosen, int max_curves) {
  PlotData plot;
  plot.kind = PlotKind::kParallel;
  plot.title = absl::StrCat(study.name, ": parallel coordinates of the completed trials");
  const std::vector<Valued> values = CompletedValues(study, index);
  for (int p : chosen) plot.axes.push_back(ParamAxis(study.params[p]));
  plot.axes.push_back(ObjectiveAxis(objective, values));
  PlotPanel& panel = plot.panels.emplace_back();
  panel.x.label = "parameter";
  panel.y.label = "position on each axis (its range from bottom to top)";
  panel.z = plot.axes.back();
  plot.points_total = static_cast<int64_t>(values.size());
  if (values.empty()) {
    plot.empty_reason = "no completed trial yet";
    return plot;
  }
  const std::vector<size_t> kept = BestAndSpread(objective, values, max_curves);
  plot.downsampled = kept.size() < values.size();
  const PlotAxis& objective_axis = plot.axes.back();
  for (size_t i : kept) {
    PlotSeries& line = panel.series.emplace_back();
    line.name = "trial";
    line.line = true;
    for (size_t a = 0; a < chosen.size(); ++a) {
      line.x.push_back(static_cast<double>(a));
      line.y.push_back(UnitCoordinate(study.params[chosen[a]], values[i].trial->params[chosen[a]]));
      line.z.push_back(values[i].value);
      line.trials.push_back(values[i].trial->number);
    }
    line.x.push_back(static_cast<double>(chosen.size()));
    line.y.push_back(FractionOfRange(values[i].value, objective_axis.min, objective_axis.max));
    line.z.push_back(values[i].value);
    line.trials.push_back(values[i].trial->number);
  }
  return plot;
}

}  // namespace

std::string PlotKindName(PlotKind kind) {
  for (const auto& [k, name] : KindNames()) {
    if (k == kind) return name;
  }
  return "history";
}

absl::StatusOr<PlotKind> ParsePlotKind(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& [kind, text] : KindNames()) {
    if (name == text) return kind;
    names.push_back(text);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown plot kind \"", name,
                                                 "\": use one of ", absl::StrJoin(names, ", ")));
}

std::vector<PlotKind> AllPlotKinds() {
  std::vector<PlotKind> kinds;
  for (const auto& [kind, name] : KindNames()) kinds.push_back(kind);
  return kinds;
}

std::vector<size_t> Downsample(size_t n, int max, const std::vector<size_t>& keep) {
  std::vector<size_t> out;
  if (n == 0) return out;
  if (max <= 0 || n <= static_cast<size_t>(max)) {
    out.resize(n);
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  const double stride = static_cast<double>(n - 1) / std::max(1, max - 1);
  for (int i = 0; i < max; ++i) out.push_back(static_cast<size_t>(std::llround(i * stride)));
  for (size_t k : keep) {
    if (k < n) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<PlotData> MakePlot(const StudyData& study, PlotKind kind,
                                  const PlotOptions& options) {
  ASSIGN_OR_RETURN(const ObjectiveInfo objective, Objective(study, options.objective));
  const int max_points = options.max_points > 0 ? options.max_points : kMaxPointsPerSeries;
  switch (kind) {
    case PlotKind::kHistory:
    case PlotKind::kHistoryByTime:
      return History(study, objective, options.objective, kind == PlotKind::kHistoryByTime,
                     max_points);
    case PlotKind::kImportance:
      if (options.importance == nullptr) {
        return absl::InvalidArgumentError("an importance plot needs the importances computed");
      }
      return Importance(study, *options.importance);
    case PlotKind::kParallel: {
      ASSIGN_OR_RETURN(const std::vector<int> chosen, ChosenParams(study, options.params));
      return Parallel(study, objective, options.objective, chosen,
                      std::min(max_points, kMaxCurvesPerPlot));
    }
    case PlotKind::kSlice: {
      ASSIGN_OR_RETURN(const std::vector<int> chosen, ChosenParams(study, options.params));
      return Slice(study, objective, options.objective, chosen, max_points);
    }
    case PlotKind::kContour:
      return Contour(study, objective, options.objective, options);
    case PlotKind::kIntermediate:
      return Intermediate(study, std::min(max_points, kMaxCurvesPerPlot), max_points);
    case PlotKind::kEdf:
      return Edf(study, objective, options.objective, max_points);
    case PlotKind::kTimeline:
      return Timeline(study, max_points);
    case PlotKind::kParetoFront:
      return Pareto(study, options);
    case PlotKind::kHypervolume:
      return HypervolumeHistory(study, options);
  }
  return absl::InvalidArgumentError("unknown plot kind");
}

}  // namespace dhpt::analysis
