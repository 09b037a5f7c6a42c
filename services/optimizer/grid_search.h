#pragma once

#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

// Every point of GridAxes' cartesian product exactly once, in an order shuffled by the seed
// (Fisher-Yates with a platform-independent generator). The n-th suggestion is the n-th point
// of that order, so the history's length is all the state there is. In a conditional space the
// grid is each branch's own product (BranchGrid: the sum over branches, not the product of
// every axis), and forbidden points are skipped.
class GridSearch : public Optimizer {
 public:
  // `space` must have GridSize() <= max_points (the scheduler validates this first).
  GridSearch(SearchSpace space, int grid_points, uint64_t seed);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  bool cheap() const override { return true; }
  std::optional<int64_t> Capacity() const override { return capacity_; }

 private:
  SearchSpace space_;
  BranchGrid grid_;
  int64_t capacity_ = 0;  // The allowed points of grid_.
  std::vector<uint32_t> order_;
  // Grid points before it are all in the history: each point is looked up about once over a
  // study, however many off-grid points (enqueued, added) the history also holds.
  size_t cursor_ = 0;
};

}  // namespace dhpt::optimizer
