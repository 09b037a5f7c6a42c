#pragma once

// dhpt importance, dhpt plot and dhpt report: what a study's trials say (issue 29). The
// importances come from the scheduler (GetParamImportances); the plots' data from
// services/analysis over the study's export (trials and intermediate values); drawing through
// gnuplot (study_plots.h, and pareto_report.h for the Pareto front).

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/study_service.pb.h"
#include "services/cli/study_client.h"

namespace dhpt::cli {

// Trials the report's table lists at most: every failed one first (with its reason), then the
// rest in number order; the page says how many it left out.
inline constexpr int kMaxReportTrialRows = 2'000;

struct InsightOptions {
  std::string evaluator = "ped-anova";  // ped-anova | fanova
  std::string kind;                     // dhpt plot: one of analysis::PlotKindName's, or "all"
  std::string out;                      // Folder for plots and the report.
  std::vector<std::string> params;      // Plots: only these parameters.
  int objective = 0;                    // Multi-objective studies: which objective.
};

// The importances as a table with a bar per parameter.
std::string ImportanceTable(const v1::GetParamImportancesResponse& response);

// The request for the study's importances from the CLI's options (INVALID_ARGUMENT for an
// unknown evaluator).
absl::StatusOr<v1::GetParamImportancesRequest> ImportanceRequest(const std::string& study,
                                                                 const InsightOptions& options);

// Draws the plot `options.kind` ("all": every plot the study can have) into options.out;
// returns the files written, relative to it.
absl::StatusOr<std::vector<std::string>> DrawInsightPlots(StudyClient& client,
                                                          const std::string& study,
                                                          const InsightOptions& options);

// Writes options.out/report.html (one self-contained page: summary, best trial, importance,
// every plot inline as SVG, the trial table) and the plots next to it; returns its path.
absl::StatusOr<std::string> WriteStudyReport(StudyClient& client, const std::string& study,
                                             const InsightOptions& options);

// Text for HTML: & < > " ' escaped. Exposed for tests.
std::string HtmlEscape(const std::string& text);

}  // namespace dhpt::cli
