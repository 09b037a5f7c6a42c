#pragma once

// What the CLI prints: progress lines and tables of studies and trials.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::cli {

// Why a trial failed, on one line of at most `width` bytes: runs of white space (the lines of a
// stderr tail) become one space, and a longer text keeps its start and its end (a traceback's
// last line says most) around " ... ".
std::string ShortReason(absl::string_view error, size_t width);
// The width of the trials table's reason column, and of a failure's reason in watch lines.
inline constexpr size_t kReasonColumnWidth = 60;
inline constexpr size_t kFailureLineReasonWidth = 120;
// "trial 3 FAILED on w1: command gbr exited with status 1; ... (dhpt trial STUDY 3 shows all)",
// escaped for the terminal.
std::string FailedTrialLine(const std::string& study, const v1::Trial& trial);

// "demo-xgboost RUNNING  12/40 done (1 failed)  2 running  best r2 0.9123"
std::string ProgressLine(const v1::Study& study);
// What a table shows for a parameter absent from a trial: in a conditional space
// (docs/concepts.md#conditional-search-spaces) a parameter whose condition does not hold has
// no value, never a default.
inline constexpr absl::string_view kInactiveCell = "-";
// One row per trial: number, state, each parameter ("-" when inactive), the objective, time, CPU, memory, worker,
// and, when any trial has one, the reason it failed, was cancelled or waits again (cut to fit).
std::string TrialsTable(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials);
// The best trial's parameters and measurements, and the study's outcome.
std::string StudySummary(const v1::Study& study);
std::string StudiesTable(const std::vector<v1::Study>& studies);
// One row per connected worker: id, device, models, slots, running trials, node, arch.
std::string WorkersTable(const std::vector<v1::Worker>& workers);

}  // namespace dhpt::cli
