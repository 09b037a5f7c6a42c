#pragma once

// `dhpt trial STUDY NUMBER`: everything about one trial on one screen, for finding out why it
// failed or how it ran.

#include <string>
#include <vector>

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::cli {

// The progress curve's values shown: the last ones of the latest attempt.
inline constexpr int kTrialViewCurveValues = 5;

// State and origin, parameters (spec order), the objective, every measurement, each attempt and
// where it ran, times, the last kTrialViewCurveValues intermediate values of `curves` (the
// trial's, any attempts) and the full error, line by line; text of others escaped.
std::string TrialView(const v1::StudySpec& spec, const v1::Trial& trial,
                      const std::vector<v1::TrialCurve>& curves);

}  // namespace dhpt::cli
