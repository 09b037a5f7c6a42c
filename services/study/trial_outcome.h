#pragma once

// How a worker's result becomes a trial's outcome, shared by the scheduler and by sequential
// runs (dhpt compare), so that both judge a trial the same way.

#include <optional>
#include <string>

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::study {

// Copies the result's measurements and device onto `trial` and settles its state: COMPLETED
// only with a finite value of every objective and constrained metric of the study, FAILED
// otherwise (with the worker's reason, or the missing metric). A completed trial outside a
// constraint stays COMPLETED, marked infeasible with its violation. Times and worker fields
// are the caller's.
void RecordResult(const v1::StudySpec& spec, const v1::TrialResult& result, v1::Trial& trial);
// Why a completed result cannot settle its trial: a metric the study needs (an objective's, a
// constrained one) has no finite value; nullopt when it can.
std::optional<std::string> MissingMetric(const v1::StudySpec& spec,
                                         const v1::TrialResult& result);

// The sum of how far `metrics` lie outside the study's constraints; 0 when inside all.
double ConstraintViolation(const v1::StudySpec& spec,
                           const google::protobuf::Map<std::string, double>& metrics);

// What the optimiser learns from a COMPLETED trial: its objective value or values and its
// constraint violation.
void RecordCompleted(const v1::Trial& trial, optimizer::TrialRecord& record);
// What the optimiser learns from any ended trial (COMPLETED as RecordCompleted; PRUNED with the
// objective metric's value and the step it was stopped at; FAILED, CANCELLED and a failed
// added trial as failed): the one rule for a trial that ends now, one read back from the
// store, and one an ended study's importances read straight from the store.
void RecordEnded(const v1::StudySpec& spec, const v1::Trial& trial, optimizer::TrialRecord& record);

// Settles a trial its study's early-stopping rule stopped after reporting `value` at `step`:
// PRUNED, with the step (kMetricPrunedStep), the value under the objective metric's name, and
// the reason. What it measured until then is the caller's (RecordCostOfPrunedAttempt).
void RecordPruned(const v1::StudySpec& spec, int64_t step, double value, v1::Trial& trial);

// Adds to a PRUNED trial what its stopped attempt measured (the worker's answer to the Cancel:
// time, CPU, memory, device; never its model's scores), once: false, changing nothing, when it
// holds them already or the result carries none. Existing metrics are never overwritten.
bool RecordCostOfPrunedAttempt(const v1::TrialResult& result, v1::Trial& trial);

// Whether completed `candidate` beats `incumbent`: the smaller constraint violation (a
// feasible trial before any infeasible one), then the better value of the (first) objective.
bool IsBetterTrial(const v1::StudySpec& spec, const v1::Trial& candidate,
                   const v1::Trial& incumbent);

}  // namespace dhpt::study
