#include "services/optimizer/grid_search.h"

#include <numeric>

namespace dhpt::optimizer {
namespace {
constexpr uint64_t kGridStream = 0x47524944;  // "GRID"
}

GridSearch::GridSearch(SearchSpace space, int grid_points, uint64_t seed)
    : space_(std::move(space)), axes_(GridAxes(space_, grid_points)) {
  const int64_t size = GridSize(space_, grid_points).value_or(0);
  order_.resize(static_cast<size_t>(size));
  std::iota(order_.begin(), order_.end(), 0u);
  std::mt19937_64 generator = SeededGenerator(seed, kGridStream, 0);
  DeterministicShuffle(order_.begin(), order_.end(), generator);
}

Point GridSearch::PointAt(int64_t index) const {
  Point point(axes_.size());
  for (int i = static_cast<int>(axes_.size()) - 1; i >= 0; --i) {
    const int64_t n = static_cast<int64_t>(axes_[i].size());
    point[i] = axes_[i][index % n];
    index /= n;
  }
  return point;
}

absl::StatusOr<std::optional<Point>> GridSearch::Suggest(const History& history) {
  // The first grid point, in the seeded order, that the history does not hold: points a
  // previous life of the study ran and points enqueued or added off the order are skipped,
  // and off-grid points take no grid point's place.
  for (; cursor_ < order_.size(); ++cursor_) {
    Point point = PointAt(order_[cursor_]);
    if (!history.keys.contains(space_.Key(point))) return point;
  }
  return std::nullopt;
}

}  // namespace dhpt::optimizer
