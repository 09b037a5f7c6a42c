#pragma once

// What each model kind accepts and reports: the hyperparameters a study may tune or fix, and
// the metrics a trial of that kind reports (so an objective can be checked before any trial).

#include "absl/strings/string_view.h"
#include <vector>

#include "dhpt/v1/common.pb.h"

namespace dhpt {

// Hyperparameter names the model's trainer understands (aliases included).
const std::vector<absl::string_view>& KnownHyperparameters(v1::Model::Kind kind);
bool IsKnownHyperparameter(v1::Model::Kind kind, absl::string_view name);

// Metrics a completed trial of this kind reports, the measurements of every trial included.
const std::vector<absl::string_view>& ReportedMetrics(v1::Model::Kind kind);
bool IsReportedMetric(v1::Model::Kind kind, absl::string_view metric);

// Measurements every trial reports, whatever its model.
inline constexpr absl::string_view kMetricWallSeconds = "wall_seconds";
inline constexpr absl::string_view kMetricCpuSeconds = "cpu_seconds";
inline constexpr absl::string_view kMetricCpuUtilization = "cpu_utilization";
inline constexpr absl::string_view kMetricPeakRssBytes = "peak_rss_bytes";

}  // namespace dhpt
