#pragma once

#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

// Uniform sampling in the transformed (log) space. The n-th suggestion depends only on
// (seed, n): its generator is seeded from both, so a rebuilt optimiser repeats itself exactly.
// A point already tried is drawn again (up to kMaxDraws times); a countable space falls back
// to enumerating the untried points, and is exhausted when every point has been tried. In a
// conditional space every parameter is drawn and the inactive ones are dropped, so each branch
// is drawn with its parents' probability; a forbidden point is drawn again like a tried one.
class RandomSearch : public Optimizer {
 public:
  RandomSearch(SearchSpace space, uint64_t seed);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  bool cheap() const override { return true; }
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

  static constexpr int kMaxDraws = 64;
  static constexpr int64_t kMaxEnumerated = 1'000'000;

 private:
  SearchSpace space_;
  uint64_t seed_;
};

}  // namespace dhpt::optimizer
