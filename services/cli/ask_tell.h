#pragma once

// The CLI's side of ask and tell and of enqueued points: `dhpt ask` prints trials a shell loop
// can read, `dhpt tell` and `dhpt enqueue` read name=value words.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dhpt/v1/study_service.pb.h"
#include "google/protobuf/map.h"
#include "google/protobuf/struct.pb.h"

namespace dhpt::cli {

// Exit codes of `dhpt ask` when it prints no trial, so that a shell loop can tell the cases.
// kExitNoTrialNow also when the scheduler answers RESOURCE_EXHAUSTED (near its memory cap).
inline constexpr int kExitStudyEnded = 3;
inline constexpr int kExitNoTrialNow = 4;

// The most metrics a scheduler keeps of one result (kMaxResultMetrics in
// services/scheduler/scheduler_core.h; the CLI does not link the scheduler).
inline constexpr int kMaxTellMetrics = 64;

// What a trial failed for its size keeps of the user's own --infeasible reason: the failure
// must itself fit under the smallest message limit (dhpt-scheduler --max_message_bytes >= 1024).
// As the Python client's KEPT_REASON_BYTES (clients/python/dhpt/study.py).
inline constexpr size_t kKeptTellReasonBytes = 256;

// Why a tell that gRPC refused for its size (RESOURCE_EXHAUSTED "Received message larger than
// max (N vs. M)", before the scheduler read it) could not be stored, in words its user can act
// on: it names neither the trial nor what is too big. This says which it is (the number of
// metrics, one metric name, or the --infeasible reason, in bytes) and the limit in bytes.
// nullopt for any other error. `dhpt tell` fails the trial with it, as the Python client does
// (oversized_result in clients/python/dhpt/study.py: keep the two alike), rather than leave it
// waiting for its lease.
std::optional<std::string> OversizedTellReason(const absl::Status& status,
                                               const v1::CompleteTrialRequest& request);
// The reason such a trial is failed with: "bad result: " and the above, after a cut of the
// user's own --infeasible reason if it gave one.
std::string OversizedTellFailure(absl::string_view oversized,
                                 const v1::CompleteTrialRequest& request);

// `word` as a POSIX shell reads it back, one word: as it is when it holds only letters, digits
// and _-.,:/@%+=, else in single quotes (a quote inside as '\'').
std::string ShellWord(absl::string_view word);

// "3 --eta=0.012345678901234568 --max_depth=6 '--kind=two words'": the trial's number, then
// its parameters as the arguments a COMMAND gets, exact and sorted by name, each a ShellWord:
// `eval "set -- $line"` gives the number and the arguments.
std::string AskLine(const v1::Trial& trial);

// `name=value` words: metrics (numbers) for `dhpt tell`.
absl::StatusOr<google::protobuf::Map<std::string, double>> ParseMetricWords(
    const std::vector<std::string>& words);
// `name=value` words: parameters for `dhpt enqueue`; a value that reads as a number is one,
// anything else a string.
absl::StatusOr<google::protobuf::Map<std::string, google::protobuf::Value>> ParseParameterWords(
    const std::vector<std::string>& words);

}  // namespace dhpt::cli
