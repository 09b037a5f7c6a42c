#pragma once

// dhpt extend: more trials, or other limits, for a study (UpdateStudy); reopens a finished one.

#include <string>

#include "absl/status/statusor.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::cli {

class StudyClient;

inline constexpr char kExtendUsage[] =
    "dhpt extend STUDY [--max_trials=N] [--parallel_trials=N] [--max_failed_trials=N|none]\n"
    "            [--trial_timeout=DURATION|none] [--scheduler=HOST:PORT]";
inline constexpr char kExtendHelp[] =
    "Changes a study's budget and limits: the flags given, checked as at submit. A COMPLETED "
    "or\nSTOPPED study given a max_trials above the trials it has made runs again, its "
    "algorithm going\non from all of them; a FAILED one only when it failed for "
    "max_failed_trials and the change\nraises it. Durations as 600s, 10m or 1h30m.";

// The request the extend flags make for `study`; INVALID_ARGUMENT when none is given or one
// does not parse.
absl::StatusOr<v1::UpdateStudyRequest> ExtendRequestFromFlags(const std::string& study);

// Runs `dhpt extend STUDY`: prints the study's progress line; returns the exit status.
int RunExtend(StudyClient& client, const std::string& study);

}  // namespace dhpt::cli
