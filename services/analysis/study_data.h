#pragma once

// A study as the analyses read it: its parameters (the optimisers' ParameterSpec), its
// objectives and its trials' values, independent of the API's types so that the scheduler,
// the CLI and the dashboard feed the same functions. No gRPC here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/study_service.pb.h"
#include "services/optimizer/optimizer.h"
#include "services/optimizer/search_space.h"

namespace dhpt::analysis {

struct ObjectiveInfo {
  std::string metric;
  bool maximize = false;
  std::optional<double> reference;  // The hypervolume's reference coordinate, when given.
};

enum class TrialState { kCompleted, kPruned, kFailed, kRunning, kPending, kCancelled };

struct TrialData {
  int64_t number = 0;
  TrialState state = TrialState::kPending;
  // One value per parameter of the study, in spec order: the number for ranges and discrete
  // parameters, the choice's index for categorical ones; NaN when the trial lacks it.
  std::vector<double> params;
  // COMPLETED: every objective's value, in spec order. PRUNED: the objective's value at the
  // step it was stopped at (one objective), else empty.
  std::vector<double> values;
  bool infeasible = false;
  // Seconds since the study was created; NaN when unknown (never started, not ended).
  double start_seconds = 0;
  double end_seconds = 0;
  std::string worker;  // Who ran the last attempt ("" for added or external trials).
  std::string error;   // Why it failed or was cancelled.
  // The last attempt's intermediate values, in step order (empty when none were fetched).
  std::vector<int64_t> steps;
  std::vector<double> step_values;
};

struct StudyData {
  std::string name;
  std::vector<optimizer::ParameterSpec> params;
  std::vector<ObjectiveInfo> objectives;  // At least one.
  std::vector<TrialData> trials;          // In number order.
};

// Translates a study's spec, its trials and (optionally) their curves. Trials the spec does not
// describe (a value of the wrong type) keep NaN for that parameter rather than failing the
// whole study: one odd trial should not hide the analysis of the rest.
StudyData StudyDataFromProto(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials,
                             const std::vector<v1::TrialCurve>& curves = {});

// The same from the optimiser's history of the study (what the scheduler keeps in memory):
// `numbers[i]` is the trial number of `records[i]`. Only parameters, states and values: no
// times, workers or curves.
StudyData StudyDataFromRecords(const v1::StudySpec& spec,
                               const std::vector<optimizer::TrialRecord>& records,
                               const std::vector<int64_t>& numbers);

// The parameter's value `raw` (as TrialData::params holds it) on [0, 1]: linear in the
// sampled space (log for log ranges), choices at (index + 0.5) / count.
double UnitCoordinate(const optimizer::ParameterSpec& param, double raw);
// Where x lies in [low, high], clamped to [0, 1]; 0.5 for an empty range. Exact for any
// finite doubles: the halves keep high - low from overflowing (values near ±1.7e308).
double FractionOfRange(double x, double low, double high);

// The number of the parameter named `name`, or INVALID_ARGUMENT listing the study's parameters.
absl::StatusOr<int> ParamIndex(const StudyData& study, const std::string& name);

// The study's objective `index`, or INVALID_ARGUMENT naming how many it has.
absl::StatusOr<ObjectiveInfo> Objective(const StudyData& study, int index);

}  // namespace dhpt::analysis
