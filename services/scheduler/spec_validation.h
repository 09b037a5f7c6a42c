#pragma once

// Validation of user study specs. Every rule of DESIGN.md §3 answers INVALID_ARGUMENT naming
// the field ("parameters[1].double_range: ...") so a user can fix the spec without guessing.

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

// Limits that keep one study from exhausting the scheduler.
inline constexpr int kMaxTrialsLimit = 1'000'000;
inline constexpr int64_t kMaxGridPoints = 100'000;
inline constexpr int kDefaultGridPoints = 5;
inline constexpr int kDefaultMaxAttempts = 3;
inline constexpr double kDefaultValidationFraction = 0.2;

// Checks `spec` and returns it with every default filled in (objective, algorithm, grid
// points, max_trials of a grid, attempts, validation fraction).
absl::StatusOr<v1::StudySpec> NormalizeStudySpec(v1::StudySpec spec);

}  // namespace dhpt::scheduler
