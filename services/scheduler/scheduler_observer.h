#pragma once

// What the scheduler core reports as it happens, for metrics (scheduler_metrics.h implements
// it; tests may record). Called under the core's mutex: implementations must be cheap, must
// not block and must not call back into the core.

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"

namespace dhpt::scheduler {

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // A trial was assigned to a worker with `device` ("cpu", "cuda") after waiting `queue_wait`
  // since it became pending.
  virtual void TrialStarted(const v1::StudySpec& spec, absl::string_view device,
                            absl::Duration queue_wait) {}
  // A trial reached COMPLETED, FAILED, CANCELLED or PRUNED; `run_time` is its last attempt's time on a
  // worker (zero when it never ran), `device` where that was ("" when it never ran).
  virtual void TrialEnded(const v1::StudySpec& spec, v1::Trial::State state,
                          absl::string_view device, absl::Duration run_time) {}
  // The study's early-stopping rule judged a running trial's latest report; `stopped` when it
  // pruned the trial at `step`. `steps_saved`: how far short of the study's longest completed
  // trial it stopped (0 before any trial completed), an estimate of the training not done.
  virtual void EarlyStoppingDecided(const v1::StudySpec& spec, absl::Duration took, bool stopped,
                                    int64_t steps_saved) {}
  // A running trial went back to pending because its worker was lost or gave it back.
  virtual void TrialRequeued(const v1::StudySpec& spec) {}
  // A duplicate of a slow worker's trial started on a faster one (SchedulerOptions::
  // duplicate_margin).
  virtual void TrialDuplicated(const v1::StudySpec& spec) {}
  virtual void SuggestionMade(v1::Algorithm::Name algorithm, absl::Duration took) {}
  virtual void WorkerConnected(const v1::WorkerCapabilities& worker) {}
};

}  // namespace dhpt::scheduler
