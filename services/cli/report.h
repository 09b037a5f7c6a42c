#pragma once

// What the CLI prints: progress lines and tables of studies and trials.

#include <string>
#include <vector>

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/study_service.pb.h"

namespace dhpt::cli {

// "demo-xgboost RUNNING  12/40 done (1 failed)  2 running  best r2 0.9123"
std::string ProgressLine(const v1::Study& study);
// One row per trial: number, state, each parameter, the objective, time, CPU, memory, worker.
std::string TrialsTable(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials);
// The best trial's parameters and measurements, and the study's outcome.
std::string StudySummary(const v1::Study& study);
std::string StudiesTable(const std::vector<v1::Study>& studies);
// One row per connected worker: id, device, models, slots, running trials, node, arch.
std::string WorkersTable(const std::vector<v1::Worker>& workers);

}  // namespace dhpt::cli
