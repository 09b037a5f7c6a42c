#pragma once

// What a study optimises and within which bounds: its objective or objectives, its
// constraints, the workers it may run on, and NSGA-II's settings. Part of NormalizeStudySpec;
// like the rest, every error names the field.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// Several objectives make the hypervolume and the non-dominated sort cost more; past a handful
// a Pareto front is most of the trials anyway.
inline constexpr int kMaxObjectives = 6;
inline constexpr int kMaxConstraints = 16;
// Larger references would overflow the hypervolume (a product over up to six objectives).
inline constexpr double kMaxReferenceMagnitude = 1e15;

// The metrics a completed trial of this spec reports: its model's (ReportedMetrics; f1..fM for
// a multi-objective FUNCTION), and those only some workers measure (GPU, power rails).
std::vector<std::string> TrialMetrics(const v1::StudySpec& spec);

// Fills the default objective, and normalises: one entry in `objectives` becomes `objective`;
// with two or more, `objective` is set to the first (the one GetBestTrial and the progress line
// use). Checks each metric, goal and reference, and what several objectives exclude.
absl::Status ValidateObjectives(v1::StudySpec& spec);
absl::Status ValidateConstraints(const v1::StudySpec& spec);
absl::Status ValidateWorkerSelector(const v1::StudySpec& spec);
// Fills NSGA-II's defaults (Optuna 3.1's) and checks its ranges; refuses the settings on
// another algorithm.
absl::Status ValidateNsga2(v1::StudySpec& spec);

}  // namespace dhpt::study
