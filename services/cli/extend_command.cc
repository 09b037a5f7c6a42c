#include "services/cli/extend_command.h"

#include <iostream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/cli/report.h"
#include "services/cli/study_client.h"
#include "services/cli/terminal_text.h"

namespace dhpt::cli {

absl::StatusOr<v1::UpdateStudyRequest> ExtendRequest(const std::string& study,
                                                     const ExtendChanges& changes) {
  v1::UpdateStudyRequest request;
  request.set_name(study);
  v1::StudySpec& spec = *request.mutable_spec();
  auto& paths = *request.mutable_update_mask()->mutable_paths();
  if (std::optional<int> n = changes.max_trials) {
    if (*n < 1) {  // The scheduler's own upper limit is its to say.
      return absl::InvalidArgumentError(
          absl::StrCat("--max_trials: ", *n, " trials; a study runs at least 1"));
    }
    spec.set_max_trials(*n);
    paths.Add("max_trials");
  }
  if (std::optional<int> n = changes.parallel_trials) {
    if (*n < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--parallel_trials: ", *n, "; give 0 (no limit) or more"));
    }
    spec.set_parallel_trials(*n);
    paths.Add("parallel_trials");
  }
  if (std::optional<std::string> text = changes.max_failed_trials) {
    int n = 0;
    if (*text != "none") {
      if (!absl::SimpleAtoi(*text, &n)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--max_failed_trials: \"", *text, "\" is neither a number nor none"));
      }
      spec.set_max_failed_trials(n);
    }
    paths.Add("max_failed_trials");
  }
  if (std::optional<std::string> text = changes.trial_timeout) {
    absl::Duration timeout;
    if (*text != "none") {
      if (!absl::ParseDuration(*text, &timeout) || timeout <= absl::ZeroDuration() ||
          timeout == absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--trial_timeout: \"", *text, "\" is not a duration such as 600s, 10m or 1h30m"));
      }
      const int64_t seconds = absl::IDivDuration(timeout, absl::Seconds(1), &timeout);
      spec.mutable_trial_timeout()->set_seconds(seconds);
      spec.mutable_trial_timeout()->set_nanos(
          static_cast<int32_t>(absl::ToInt64Nanoseconds(timeout)));
    }
    paths.Add("trial_timeout");
  }
  if (paths.empty()) {
    return absl::InvalidArgumentError(
        "nothing to change: give at least one of --max_trials, --parallel_trials, "
        "--max_failed_trials, --trial_timeout");
  }
  return request;
}

int RunExtend(StudyClient& client, const std::string& study, const ExtendChanges& changes,
              std::ostream& out, std::ostream& err) {
  absl::StatusOr<v1::UpdateStudyRequest> request = ExtendRequest(study, changes);
  if (!request.ok()) {
    PrintRefusal(err, request.status(), kExtendUsage);  // Refused before any call:
    return 2;                                           // a usage error.
  }
  absl::StatusOr<v1::Study> updated = client.UpdateStudy(*request);
  if (!updated.ok()) {
    PrintRefusal(err, updated.status());
    return 1;
  }
  out << ProgressLine(*updated) << "\n";
  return 0;
}

}  // namespace dhpt::cli
