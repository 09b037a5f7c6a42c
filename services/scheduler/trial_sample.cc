#include "services/scheduler/trial_sample.h"

#include <cmath>

namespace dhpt::scheduler {

TrialSample::TrialSample(const v1::StudySpec& spec, int stride, std::optional<double> best)
    : stride_(stride), best_(best) {
  if (spec.objectives_size() == 0) {
    improving_ = spec.objective().goal() == v1::Objective::MAXIMIZE ? Improving::kHigher
                                                                    : Improving::kLower;
  }
}

bool TrialSample::Keep(const v1::Trial& trial) {
  // Not finished: the reader must see it to know that its sample may still change there.
  if (all() || trial.state() == v1::Trial::PENDING || trial.state() == v1::Trial::RUNNING) {
    return true;
  }
  bool improves = false;
  // A value that is not finite improves on nothing (NaN would otherwise stop every later one).
  if (improving_ != Improving::kNone && trial.state() == v1::Trial::COMPLETED &&
      trial.has_objective_value() && std::isfinite(trial.objective_value())) {
    const double value = trial.objective_value();
    improves = !best_ || (improving_ == Improving::kHigher ? value > *best_ : value < *best_);
    if (improves) best_ = value;
  }
  return improves || trial.number() % stride_ == 0;
}

}  // namespace dhpt::scheduler
