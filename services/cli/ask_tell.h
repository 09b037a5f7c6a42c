#pragma once

// The CLI's side of ask and tell and of warm starts: `dhpt ask` prints trials a shell loop can
// read, `dhpt tell` and `dhpt enqueue` read name=value words, and `dhpt submit --warm-start`
// hands an earlier study's results to a new one.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/study_service.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/struct.pb.h"
#include "services/cli/study_client.h"

namespace dhpt::cli {

// Exit codes of `dhpt ask` when it prints no trial, so that a shell loop can tell the cases.
inline constexpr int kExitStudyEnded = 3;
inline constexpr int kExitNoTrialNow = 4;
// Trials sent per AddTrials call by a warm start (the scheduler takes up to 10,000).
inline constexpr int kWarmStartBatch = 1'000;

// "3 --eta=0.012345678901234568 --max_depth=6": the trial's number, then its parameters as the
// arguments a COMMAND gets, exact and sorted by name.
std::string AskLine(const v1::Trial& trial);

// `name=value` words: metrics (numbers) for `dhpt tell`.
absl::StatusOr<google::protobuf::Map<std::string, double>> ParseMetricWords(
    const std::vector<std::string>& words);
// `name=value` words: parameters for `dhpt enqueue`; a value that reads as a number is one,
// anything else a string.
absl::StatusOr<google::protobuf::Map<std::string, google::protobuf::Value>> ParseParameterWords(
    const std::vector<std::string>& words);

// The completed trials of `trials` as AddTrials entries, parameters as JSON values.
std::vector<v1::AddedTrial> CompletedAsAdded(const std::vector<v1::Trial>& trials);

// Adds the completed trials of study `from` to `study`, in batches; a point `study` already
// has is skipped, so a warm start run twice adds nothing the second time.
absl::StatusOr<v1::AddTrialsResponse> WarmStart(StudyClient& client, const std::string& study,
                                                const std::string& from);

}  // namespace dhpt::cli
