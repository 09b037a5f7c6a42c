#pragma once

// How a worker's result becomes a trial's outcome, shared by the scheduler and by sequential
// runs (dhpt compare), so that both judge a trial the same way.

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"

namespace dhpt::scheduler {

// Copies the result's measurements and device onto `trial` and settles its state: COMPLETED
// only with a finite value of the study's objective metric, FAILED otherwise (with the
// worker's reason, or the missing metric). Times and worker fields are the caller's.
void RecordResult(const v1::StudySpec& spec, const v1::TrialResult& result, v1::Trial& trial);

// Settles a trial its study's early-stopping rule stopped after reporting `value` at `step`:
// PRUNED, with the step (kMetricPrunedStep), the value under the objective metric's name, and
// the reason. What it measured until then is the caller's (RecordCostOfPrunedAttempt).
void RecordPruned(const v1::StudySpec& spec, int64_t step, double value, v1::Trial& trial);

// Adds to a PRUNED trial what its stopped attempt measured (the worker's answer to the Cancel:
// time, CPU, memory, device; never its model's scores), once: false, changing nothing, when it
// holds them already or the result carries none. Existing metrics are never overwritten.
bool RecordCostOfPrunedAttempt(const v1::TrialResult& result, v1::Trial& trial);

// Whether `candidate` beats `incumbent` under the study's goal.
bool IsBetterObjective(const v1::StudySpec& spec, double candidate, double incumbent);

}  // namespace dhpt::scheduler
