#pragma once

// Validation of user study specs. Every rule of DESIGN.md §3 answers INVALID_ARGUMENT naming
// the field ("parameters[1].double_range: ...") so a user can fix the spec without guessing.

#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::study {

// Limits that keep one study from exhausting the scheduler or its workers. The first three
// are operator settings (SpecLimits, dhpt-scheduler flags); the rest are fixed.
inline constexpr int kMaxTrialsLimit = 1'000'000;
inline constexpr int kDefaultMaxParameters = 100;
// What the largest data set may take on a worker (features and target as floats, held once
// whole and once split); a worker checks again against its own memory.
inline constexpr int64_t kDefaultMaxDatasetBytes = int64_t{4} << 30;
inline constexpr int kMaxStringBytes = 1024;  // Categorical values, fixed strings, paths.
inline constexpr int kMaxChoices = 1000;      // Values of one categorical or discrete parameter.
// The longest DHPT_PARAMS a COMMAND trial may get: Linux's MAX_ARG_STRLEN (32 pages, the limit
// of one "NAME=value" string) less "DHPT_PARAMS=" and its NUL.
inline constexpr size_t kMaxCommandParamsJsonBytes = 32 * 4096 - 13;
inline constexpr int kMaxFixedHyperparameters = 64;
inline constexpr int64_t kMaxTrialTimeoutSeconds = 7 * 24 * 3600;
inline constexpr int64_t kMaxGridPoints = 100'000;
inline constexpr int kDefaultGridPoints = 5;
inline constexpr int kDefaultMaxAttempts = 3;
// A study whose first this-many finished trials all failed with the same error ends FAILED with
// it (StudySpec.fail_fast_trials): five alike are a broken setup, not bad luck of the draw.
inline constexpr int kDefaultFailFastTrials = 5;
inline constexpr double kDefaultValidationFraction = 0.2;

struct SpecLimits {
  int max_trials = kMaxTrialsLimit;
  int max_parameters = kDefaultMaxParameters;
  int64_t max_dataset_bytes = kDefaultMaxDatasetBytes;
};

// Bytes a worker holds for a generated data set (0 for CSV files, whose size only the worker
// knows).
int64_t EstimatedDatasetBytes(const v1::Dataset& dataset);

// Checks `spec` and returns it with every default filled in (objective, algorithm, grid
// points, max_trials of a grid, attempts, validation fraction); the first error otherwise.
absl::StatusOr<v1::StudySpec> NormalizeStudySpec(v1::StudySpec spec, const SpecLimits& limits = {});

// Every error of `spec` at once (`dhpt validate`), one per field, in the order of the spec's
// sections; empty exactly when NormalizeStudySpec accepts it, whose first error is the first
// here. Fills the defaults into `spec` as it goes. A section whose input is already wrong is
// left out (the parameters of an unknown model kind), so no error is the echo of another.
std::vector<absl::Status> StudySpecErrors(v1::StudySpec& spec, const SpecLimits& limits = {});

}  // namespace dhpt::study
