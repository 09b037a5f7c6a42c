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

bool TrialSample::Keep(int64_t number, v1::Trial::State state,
                       std::optional<double> objective_value) {
  // Not finished: the reader must see it to know that its sample may still change there.
  if (all() || state == v1::Trial::PENDING || state == v1::Trial::RUNNING) return true;
  bool improves = false;
  // A value that is not finite improves on nothing (NaN would otherwise stop every later one).
  if (improving_ != Improving::kNone && state == v1::Trial::COMPLETED && objective_value &&
      std::isfinite(*objective_value)) {
    const double value = *objective_value;
    improves = !best_ || (improving_ == Improving::kHigher ? value > *best_ : value < *best_);
    if (improves) best_ = value;
  }
  return improves || number % stride_ == 0;
}

}  // namespace dhpt::scheduler
