#pragma once

#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// Stochastic hill climbing. The rule, replayed over the finished trials in trial order each
// time (so the state is a pure function of the history):
// - A climb starts with no incumbent; its first suggestions are uniform random points.
// - The first completed trial of a climb becomes the incumbent. A later completed trial whose
//   objective is not worse replaces it ("accept if not worse").
// - A result that is not strictly better (a worse or equal objective, a pruned or a failed
//   trial) is a miss: a pruned neighbour was losing when it stopped, and its partial value
//   cannot be compared with the incumbent's final one. A pruned trial never becomes the
//   incumbent. A completed trial outside the study's constraints (violation > 0) is a miss too
//   and never the incumbent. After `patience` misses in a row the step shrinks by
//   `shrink_factor`.
// - When the step falls below `min_step`, the climb has stagnated: a new climb starts with the
//   trials suggested after that result, from a random point, with the initial step.
// - A suggestion is a neighbour of the incumbent: each numeric parameter moves by a Gaussian
//   step of `step` times its range in the transformed (log) space, clamped to the range and
//   rounded to its lattice; each categorical or discrete parameter takes another value with
//   probability `flip_probability`. A neighbour already tried is drawn again (20 times), then
//   a random untried point is used. In a conditional space only the incumbent's active
//   parameters move; a parent that takes another value drops the children it switched off and
//   draws those it switches on uniformly; forbidden neighbours are drawn again like tried ones.
// The n-th suggestion's randomness comes from (seed, n) alone.
class HillClimbing : public Optimizer {
 public:
  HillClimbing(SearchSpace space, uint64_t seed, bool minimize, HillClimbingOptions options);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

  // The climb's state after replaying `history` (exposed for tests).
  struct Climb {
    std::optional<size_t> incumbent;  // Trial number.
    double step = 0;
    int misses = 0;
    size_t start = 0;  // First trial number of the current climb.
    int restarts = 0;
  };
  Climb Replay(const History& history) const;

 private:
  SearchSpace space_;
  uint64_t seed_;
  bool minimize_;
  HillClimbingOptions options_;
  RandomSearch random_;
};

}  // namespace dhpt::optimizer
