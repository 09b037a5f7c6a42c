#pragma once

// ListTrials' sample of a large study for its plots (ListTrialsRequest.sample_stride): every
// stride-th trial by number, every trial not finished and, in a study of one objective, each
// completed trial better than every trial kept before it, so that a plot's best-so-far line and
// its best trial are exact though drawn from a part of the study, and a reader knows where the
// sample may still change. The core samples a study in memory and an evicted
// study's stored rows with this one rule; the best so far goes from page to page in the page
// token (TrialPageToken).

#include <cstdint>
#include <optional>

#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

// A stride larger than this is refused: a page then covers too many trials for one answer.
inline constexpr int kMaxSampleStride = 1'024;

class TrialSample {
 public:
  // Every trial is kept.
  TrialSample() = default;
  // `stride` over 1 samples `spec`'s study; `best` is the best value kept before the page.
  TrialSample(const v1::StudySpec& spec, int stride, std::optional<double> best);

  bool all() const { return stride_ <= 1; }
  int stride() const { return stride_; }
  std::optional<double> best() const { return best_; }
  // The best kept before the page a listing resumes at (from its token).
  void set_best(double best) { best_ = best; }

  // Whether `trial` is kept, by its number, state and (a single objective's) value; asked in
  // number order.
  bool Keep(int64_t number, v1::Trial::State state, std::optional<double> objective_value);
  bool Keep(const v1::Trial& trial) {
    return Keep(trial.number(), trial.state(),
                trial.has_objective_value() ? std::optional<double>(trial.objective_value())
                                            : std::nullopt);
  }

 private:
  int stride_ = 1;
  // Whose values improve: none in a study of several objectives (the stride alone samples it).
  enum class Improving { kNone, kLower, kHigher } improving_ = Improving::kNone;
  std::optional<double> best_;
};

}  // namespace dhpt::scheduler
