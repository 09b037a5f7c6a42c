#pragma once

// A study run with no scheduler: the study's optimiser suggests a point, this process trains
// it with the worker's own TrialRunner, and the next suggestion sees the result; one trial
// after another. `dhpt compare` measures this against the same study run by the framework,
// so the rules here are the scheduler's: the same validation and defaults, the same optimiser
// and seed, the same judgement of a result (RecordResult), the same end conditions, and the
// same early stopping: each progress report is judged by the study's rule against the curves
// of the trials before it, and a stopped trial ends PRUNED (RecordPruned).

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dhpt/v1/common.pb.h"
#include "services/worker/trial_runner.h"

namespace dhpt::worker {

struct SequentialOptions {
  int threads_per_trial = 1;
  std::string worker_id = "sequential";
  std::string node_name;
  // Set from another thread to stop after the running trial (which ends CANCELLED).
  const std::atomic<bool>* cancelled = nullptr;
  // Called once the spec is accepted, before the first suggestion (the study RUNNING).
  std::function<void(const v1::Study&)> on_start;
  // Called after each trial ends, in order.
  std::function<void(const v1::Trial&)> on_trial_end;
};

struct SequentialRun {
  v1::Study study;  // The spec with its defaults, the final state and reason, the counts.
  std::vector<v1::Trial> trials;
};

// Runs `spec` to its end. INVALID_ARGUMENT for a spec the scheduler would refuse; otherwise
// the run, whatever its trials did.
absl::StatusOr<SequentialRun> RunStudySequentially(const v1::StudySpec& spec, TrialRunner& runner,
                                                   const SequentialOptions& options);

}  // namespace dhpt::worker
