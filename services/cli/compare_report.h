#pragma once

// dhpt compare's arithmetic and reports: what each run achieved and cost, whether the two
// runs are comparable, and the tables of report.md. Pure functions of the report messages
// (dhpt/v1/compare.proto); the runs themselves are compare_command's.

#include <string>
#include <vector>

#include "dhpt/v1/compare.pb.h"

namespace dhpt::cli {

// This machine: hostname, CPU model, cores, memory, OS, kernel, architecture.
v1::MachineInfo DescribeMachine();

// Fills run.summary from run.trials, run.processes and run.wall_seconds, judging objectives by
// `spec` (its metric and goal).
void Summarize(const v1::StudySpec& spec, v1::RunReport& run);

// Whether both runs tried the same multiset of parameter points (trials that ran: completed,
// failed or cancelled).
bool SamePoints(const v1::RunReport& a, const v1::RunReport& b);

// Summarises both runs (with multi-objective studies, each run's Pareto front and its
// hypervolume from one shared reference point) and fills the speedup, same_points and the
// warnings (more trial slots than cores, failed or missing trials, runs that did not complete). `cores` is this
// machine's, for the slot warning (0: no check, a remote cluster).
void Conclude(v1::CompareReport& report, int cores);

// Where each run ran: "sequential: one process on this machine: 1 x 1 trial slots x 2 threads".
std::string RunsLines(const v1::CompareReport& report);
// The side-by-side table: a row per measurement, a column per run.
std::string ComparisonTable(const v1::CompareReport& report, bool markdown = false);
// report.md: the study, the machine, the table, the processes, the rules the runs followed,
// the warnings and the plots (file names relative to the report).
std::string CompareMarkdown(const v1::CompareReport& report,
                            const std::vector<std::string>& plot_files);

// A matrix row from a cell's report.
v1::MatrixCell MatrixCellOf(const std::string& name, const v1::CompareReport& report);
// One row per cell.
std::string MatrixTable(const v1::MatrixReport& matrix, bool markdown = false);
std::string MatrixMarkdown(const v1::MatrixReport& matrix);

}  // namespace dhpt::cli
