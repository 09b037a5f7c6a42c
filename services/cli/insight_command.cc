#include "services/cli/insight_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/time_util.h"
#include "services/analysis/plot_data.h"
#include "services/cli/pareto_report.h"
#include "services/cli/study_file.h"
#include "services/cli/study_plots.h"
#include "services/common/param_values.h"
#include "services/common/status_macros.h"

namespace dhpt::cli {
namespace {

using analysis::PlotKind;

// Bar width of the importance table, in characters.
constexpr int kImportanceBarWidth = 40;

// What the plots and the report read: the study's export and its importances.
struct StudyInsight {
  v1::StudyExport exported;
  analysis::StudyData data;
  std::optional<analysis::ImportanceResult> importance;
  std::string importance_error;  // Why there are no importances, when there are none.
};

analysis::ImportanceResult FromResponse(const v1::GetParamImportancesResponse& response) {
  analysis::ImportanceResult result;
  result.evaluator = response.evaluator() == v1::GetParamImportancesRequest::FANOVA
                         ? analysis::Evaluator::kFanova
                         : analysis::Evaluator::kPedAnova;
  result.objective = response.objective_metric();
  result.trials_considered = response.trials_considered();
  result.trials_used = response.trials_used();
  for (const v1::ParamImportance& p : response.importances()) {
    result.importances.push_back({p.name(), p.importance(), p.constant()});
  }
  return result;
}

absl::StatusOr<StudyInsight> Fetch(StudyClient& client, const std::string& study,
                                   const InsightOptions& options) {
  StudyInsight insight;
  ASSIGN_OR_RETURN(insight.exported, client.ExportStudy(study));
  insight.data = analysis::StudyDataFromProto(
      insight.exported.study().spec(),
      std::vector<v1::Trial>(insight.exported.trials().begin(), insight.exported.trials().end()),
      std::vector<v1::TrialCurve>(insight.exported.curves().begin(),
                                  insight.exported.curves().end()));
  ASSIGN_OR_RETURN(const v1::GetParamImportancesRequest request, ImportanceRequest(study, options));
  absl::StatusOr<v1::GetParamImportancesResponse> importance = client.GetParamImportances(request);
  if (importance.ok()) {
    insight.importance = FromResponse(*importance);
  } else if (absl::IsFailedPrecondition(importance.status())) {
    insight.importance_error = std::string(importance.status().message());
  } else {
    return importance.status();
  }
  return insight;
}

// The plots a study can have: Pareto front and hypervolume with several objectives, a contour
// with two parameters or more.
std::vector<PlotKind> KindsFor(const analysis::StudyData& data) {
  std::vector<PlotKind> kinds;
  for (PlotKind kind : analysis::AllPlotKinds()) {
    const bool several = data.objectives.size() >= 2;
    if ((kind == PlotKind::kParetoFront || kind == PlotKind::kHypervolume) && !several) continue;
    if (kind == PlotKind::kContour && data.params.size() < 2) continue;
    kinds.push_back(kind);
  }
  return kinds;
}

absl::StatusOr<std::vector<std::string>> DrawOne(StudyClient& client, const StudyInsight& insight,
                                                 PlotKind kind, const InsightOptions& options) {
  if (kind == PlotKind::kParetoFront) {
    // The existing Pareto plot: every objective pair, infeasible trials, the front.
    ASSIGN_OR_RETURN(const v1::GetParetoFrontResponse front,
                     client.GetParetoFront(insight.exported.study().spec().name()));
    return DrawParetoPlot(insight.exported.study(),
                          std::vector<v1::Trial>(insight.exported.trials().begin(),
                                                 insight.exported.trials().end()),
                          front, options.out);
  }
  analysis::PlotOptions plot_options;
  plot_options.objective = options.objective;
  plot_options.params = options.params;
  plot_options.importance = insight.importance ? &*insight.importance : nullptr;
  if (kind == PlotKind::kContour && options.params.size() > 2) plot_options.params.clear();
  absl::StatusOr<analysis::PlotData> plot;
  if (kind == PlotKind::kImportance && !insight.importance) {
    plot = analysis::PlotData();
    plot->kind = kind;
    plot->title = absl::StrCat(insight.data.name, ": importance of each parameter");
    plot->empty_reason = insight.importance_error;
  } else {
    plot = analysis::MakePlot(insight.data, kind, plot_options);
  }
  if (!plot.ok()) return plot.status();
  return DrawStudyPlot(*plot, options.out, analysis::PlotKindName(kind));
}

std::string Bar(double share) {
  const int cells = static_cast<int>(std::lround(share * kImportanceBarWidth));
  std::string bar;
  for (int i = 0; i < cells; ++i) bar += "#";
  return bar;
}

// An SVG file's <svg> element, its ids made unique to the page (several plots share one).
std::string InlineSvg(const std::string& svg, const std::string& prefix) {
  const size_t start = svg.find("<svg");
  std::string element = start == std::string::npos ? "" : svg.substr(start);
  return absl::StrReplaceAll(element, {{"id='", absl::StrCat("id='", prefix)},
                                       {"id=\"", absl::StrCat("id=\"", prefix)},
                                       {"href='#", absl::StrCat("href='#", prefix)},
                                       {"href=\"#", absl::StrCat("href=\"#", prefix)},
                                       {"url(#", absl::StrCat("url(#", prefix)}});
}

std::string StateName(v1::Trial::State state) {
  std::string name = v1::Trial::State_Name(state);
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  return name;
}

std::string TrialRows(const v1::StudyExport& exported, int* left_out) {
  const v1::StudySpec& spec = exported.study().spec();
  std::vector<const v1::Trial*> rows;
  for (const v1::Trial& trial : exported.trials()) {
    if (trial.state() == v1::Trial::FAILED && rows.size() < kMaxReportTrialRows) {
      rows.push_back(&trial);
    }
  }
  for (const v1::Trial& trial : exported.trials()) {
    if (trial.state() != v1::Trial::FAILED && rows.size() < kMaxReportTrialRows) {
      rows.push_back(&trial);
    }
  }
  *left_out = exported.trials_size() - static_cast<int>(rows.size());
  std::sort(rows.begin(), rows.end(),
            [](const v1::Trial* a, const v1::Trial* b) { return a->number() < b->number(); });
  std::string html = "<tr><th>trial</th><th>state</th>";
  const int objectives = std::max(1, spec.objectives_size());
  for (int o = 0; o < objectives; ++o) {
    absl::StrAppend(&html, "<th>", HtmlEscape(spec.objectives_size() > 0 ? spec.objectives(o).metric()
                                                                         : spec.objective().metric()),
                    "</th>");
  }
  for (const v1::Parameter& param : spec.parameters()) {
    absl::StrAppend(&html, "<th>", HtmlEscape(param.name()), "</th>");
  }
  absl::StrAppend(&html, "<th>worker</th><th>reason</th></tr>\n");
  for (const v1::Trial* trial : rows) {
    absl::StrAppend(&html, "<tr class='", StateName(trial->state()), "'><td>", trial->number(),
                    "</td><td>", StateName(trial->state()), "</td>");
    for (int o = 0; o < objectives; ++o) {
      std::string value;
      if (spec.objectives_size() > 0 && o < trial->objective_values_size()) {
        value = absl::StrFormat("%.6g", trial->objective_values(o));
      } else if (spec.objectives_size() == 0 && trial->has_objective_value()) {
        value = absl::StrFormat("%.6g", trial->objective_value());
      }
      absl::StrAppend(&html, "<td>", value, "</td>");
    }
    for (const v1::Parameter& param : spec.parameters()) {
      auto it = trial->params().find(param.name());
      absl::StrAppend(&html, "<td>",
                      it == trial->params().end() ? "" : HtmlEscape(FormatParameterValue(it->second)),
                      "</td>");
    }
    absl::StrAppend(&html, "<td>", HtmlEscape(trial->worker_id()), "</td><td class='reason'>",
                    HtmlEscape(trial->error()), "</td></tr>\n");
  }
  return html;
}

std::string SummaryHtml(const v1::Study& study) {
  const v1::StudySpec& spec = study.spec();
  std::vector<std::string> objectives;
  if (spec.objectives_size() > 0) {
    for (const v1::Objective& o : spec.objectives()) {
      objectives.push_back(absl::StrCat(o.metric(), " (", v1::Objective::Goal_Name(o.goal()), ")"));
    }
  } else {
    objectives.push_back(absl::StrCat(spec.objective().metric(), " (",
                                      v1::Objective::Goal_Name(spec.objective().goal()), ")"));
  }
  std::string html = absl::StrCat(
      "<table class='summary'>",
      "<tr><th>state</th><td>", HtmlEscape(v1::Study::State_Name(study.state())),
      study.state_reason().empty() ? "" : absl::StrCat(": ", HtmlEscape(study.state_reason())),
      "</td></tr>", "<tr><th>objective</th><td>", HtmlEscape(absl::StrJoin(objectives, ", ")),
      "</td></tr>", "<tr><th>algorithm</th><td>",
      HtmlEscape(v1::Algorithm::Name_Name(spec.algorithm().name())), "</td></tr>",
      "<tr><th>trials</th><td>", study.trials_completed(), " completed, ", study.trials_pruned(),
      " pruned, ", study.trials_failed(), " failed, ", study.trials_cancelled(), " cancelled, ",
      study.trials_running(), " running, ", study.trials_pending(), " pending</td></tr>");
  if (spec.objectives_size() >= 2) {
    absl::StrAppend(&html, "<tr><th>Pareto front</th><td>", study.pareto_front_size(),
                    " trials, hypervolume ", absl::StrFormat("%.6g", study.hypervolume()),
                    "</td></tr>");
  }
  absl::StrAppend(&html, "</table>\n");
  if (study.has_best_trial()) {
    const v1::Trial& best = study.best_trial();
    absl::StrAppend(&html, "<h2>Best trial</h2>\n<table class='best'><tr><th>trial</th><td>",
                    best.number(), "</td></tr>");
    if (best.has_objective_value()) {
      absl::StrAppend(&html, "<tr><th>", HtmlEscape(spec.objective().metric()), "</th><td>",
                      absl::StrFormat("%.9g", best.objective_value()), "</td></tr>");
    }
    std::map<std::string, std::string> params;
    for (const auto& [name, value] : best.params()) params[name] = FormatParameterValue(value);
    for (const auto& [name, value] : params) {
      absl::StrAppend(&html, "<tr><th>", HtmlEscape(name), "</th><td>", HtmlEscape(value),
                      "</td></tr>");
    }
    absl::StrAppend(&html, "</table>\n");
  }
  return html;
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ImportanceTable(const v1::GetParamImportancesResponse& response) {
  size_t width = 9;
  for (const v1::ParamImportance& p : response.importances()) width = std::max(width, p.name().size());
  std::string text = absl::StrFormat(
      "importance of each parameter for %s (%s, %d of %d trials)\n\n%-*s  %6s\n",
      response.objective_metric(),
      response.evaluator() == v1::GetParamImportancesRequest::FANOVA ? "fANOVA" : "PED-ANOVA",
      response.trials_used(), response.trials_considered(), width, "parameter", "share");
  for (const v1::ParamImportance& p : response.importances()) {
    absl::StrAppendFormat(&text, "%-*s  %5.1f%%  %s%s\n", width, p.name(), 100 * p.importance(),
                          Bar(p.importance()), p.constant() ? "(never varied)" : "");
  }
  return text;
}

absl::StatusOr<v1::GetParamImportancesRequest> ImportanceRequest(const std::string& study,
                                                                 const InsightOptions& options) {
  ASSIGN_OR_RETURN(const analysis::Evaluator evaluator, analysis::ParseEvaluator(options.evaluator));
  v1::GetParamImportancesRequest request;
  request.set_study(study);
  request.set_evaluator(evaluator == analysis::Evaluator::kFanova
                            ? v1::GetParamImportancesRequest::FANOVA
                            : v1::GetParamImportancesRequest::PED_ANOVA);
  request.set_objective_index(options.objective);
  for (const std::string& param : options.params) request.add_params(param);
  return request;
}

absl::StatusOr<std::vector<std::string>> DrawInsightPlots(StudyClient& client,
                                                          const std::string& study,
                                                          const InsightOptions& options) {
  std::vector<PlotKind> kinds;
  if (options.kind != "all") {
    ASSIGN_OR_RETURN(const PlotKind kind, analysis::ParsePlotKind(options.kind));
    kinds.push_back(kind);
  }
  // Importances over the parameters asked for; a contour's pair comes from --params itself.
  InsightOptions importance_options = options;
  if (!kinds.empty() && kinds[0] == PlotKind::kContour) importance_options.params.clear();
  ASSIGN_OR_RETURN(const StudyInsight insight, Fetch(client, study, importance_options));
  if (kinds.empty()) kinds = KindsFor(insight.data);
  std::vector<std::string> files;
  for (PlotKind kind : kinds) {
    ASSIGN_OR_RETURN(std::vector<std::string> drawn, DrawOne(client, insight, kind, options));
    files.insert(files.end(), drawn.begin(), drawn.end());
  }
  return files;
}

absl::StatusOr<std::string> WriteStudyReport(StudyClient& client, const std::string& study,
                                             const InsightOptions& options) {
  InsightOptions all = options;
  all.params.clear();
  ASSIGN_OR_RETURN(const StudyInsight insight, Fetch(client, study, all));
  const v1::Study& summary = insight.exported.study();
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>\n<title>",
      HtmlEscape(study), ": DHPT study report</title>\n<style>\n"
      "body { font-family: 'DejaVu Sans', sans-serif; margin: 2em; color: #222; }\n"
      "table { border-collapse: collapse; margin: 0.5em 0; }\n"
      "th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; font-size: 90%; }\n"
      "tr.failed td { background: #fde8e8; } tr.pruned td { background: #fff4e0; }\n"
      "td.reason { max-width: 40em; white-space: pre-wrap; }\n"
      ".plot svg { max-width: 100%; height: auto; }\n"
      ".bar { background: #1f77b4; height: 0.9em; display: inline-block; }\n"
      "</style></head><body>\n<h1>Study ", HtmlEscape(study), "</h1>\n",
      SummaryHtml(summary));
  // Importance.
  absl::StrAppend(&html, "<h2>Parameter importance</h2>\n");
  if (insight.importance) {
    absl::StrAppend(&html, "<p>", HtmlEscape(analysis::EvaluatorName(insight.importance->evaluator)),
                    " over ", insight.importance->trials_used, " of ",
                    insight.importance->trials_considered, " trials, for ",
                    HtmlEscape(insight.importance->objective), ".</p>\n<table class='importance'>"
                    "<tr><th>parameter</th><th>share</th><th></th></tr>\n");
    for (const analysis::ParamImportance& p : insight.importance->importances) {
      absl::StrAppendFormat(&html,
                            "<tr><td>%s</td><td>%.1f%%</td><td><span class='bar' "
                            "style='width: %.0fpx'></span>%s</td></tr>\n",
                            HtmlEscape(p.name), 100 * p.importance, 300 * p.importance,
                            p.constant ? " never varied" : "");
    }
    absl::StrAppend(&html, "</table>\n");
  } else {
    absl::StrAppend(&html, "<p>", HtmlEscape(insight.importance_error), "</p>\n");
  }
  // Every plot the study can have, inline.
  absl::StrAppend(&html, "<h2>Plots</h2>\n");
  int n = 0;
  for (PlotKind kind : KindsFor(insight.data)) {
    const std::string name = analysis::PlotKindName(kind);
    absl::StatusOr<std::vector<std::string>> drawn = DrawOne(client, insight, kind, all);
    absl::StrAppend(&html, "<section class='plot' id='plot-", name, "'>\n");
    if (!drawn.ok()) {
      absl::StrAppend(&html, "<p>", HtmlEscape(name), ": ", HtmlEscape(std::string(drawn.status().message())),
                      "</p>\n</section>\n");
      continue;
    }
    for (const std::string& file : *drawn) {
      if (!file.ends_with(".svg")) continue;
      ASSIGN_OR_RETURN(const std::string svg,
                       ReadTextFile((std::filesystem::path(options.out) / file).string(), kMaxExportFileBytes));
      absl::StrAppend(&html, InlineSvg(svg, absl::StrCat("p", n++, "_")), "\n");
    }
    absl::StrAppend(&html, "</section>\n");
  }
  // The trials.
  int left_out = 0;
  const std::string rows = TrialRows(insight.exported, &left_out);
  absl::StrAppend(&html, "<h2>Trials</h2>\n");
  if (left_out > 0) {
    absl::StrAppend(&html, "<p>", left_out, " of ", insight.exported.trials_size(),
                    " trials are left out (every failed one is listed); dhpt trials ",
                    HtmlEscape(study), " lists all.</p>\n");
  }
  absl::StrAppend(&html, "<table class='trials'>\n", rows, "</table>\n</body></html>\n");
  const std::string path = (std::filesystem::path(options.out) / "report.html").string();
  RETURN_IF_ERROR(WriteTextFile(path, html));
  return path;
}

}  // namespace dhpt::cli
