#pragma once

// dhpt extend: more trials, or other limits, for a study (UpdateStudy); reopens a finished one.

#include <iosfwd>
#include <optional>
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

// What `dhpt extend` was given: each limit to change, or nothing for one to keep. The flags
// live in the dhpt binary's main.cc, not here, so other binaries linking the CLI library (the
// dashboard) do not inherit them.
struct ExtendChanges {
  std::optional<int> max_trials;
  std::optional<int> parallel_trials;
  std::optional<std::string> max_failed_trials;  // a number, or "none" for no limit
  std::optional<std::string> trial_timeout;      // 600s, 10m, 1h30m, or "none"
};

// The request `changes` make for `study`; INVALID_ARGUMENT when there is none or one does not
// parse.
absl::StatusOr<v1::UpdateStudyRequest> ExtendRequest(const std::string& study,
                                                     const ExtendChanges& changes);

// Runs `dhpt extend STUDY`: prints the study's progress line to `out`, or the refusal to `err`
// (with the usage when refused before any call); returns the exit status: 0, 2 for flags
// refused before any call (a usage error), 1 when the scheduler refuses.
int RunExtend(StudyClient& client, const std::string& study, const ExtendChanges& changes,
              std::ostream& out, std::ostream& err);

}  // namespace dhpt::cli
