#include "services/optimizer/grid_search.h"

#include <numeric>

namespace dhpt::optimizer {
namespace {
constexpr uint64_t kGridStream = 0x47524944;  // "GRID"
}

GridSearch::GridSearch(SearchSpace space, int grid_points, uint64_t seed)
    : space_(std::move(space)),
      grid_(space_, GridAxes(space_, grid_points)),
      capacity_(GridSize(space_, grid_points).value_or(0)) {
  const int64_t size = grid_.size().value_or(0);
  order_.resize(static_cast<size_t>(size));
  std::iota(order_.begin(), order_.end(), 0u);
  std::mt19937_64 generator = SeededGenerator(seed, kGridStream, 0);
  DeterministicShuffle(order_.begin(), order_.end(), generator);
}

absl::StatusOr<std::optional<Point>> GridSearch::Suggest(const History& history) {
  // The first grid point, in the seeded order, that the history does not hold: points a
  // previous life of the study ran and points enqueued or added off the order are skipped,
  // and off-grid points take no grid point's place.
  for (; cursor_ < order_.size(); ++cursor_) {
    Point point = grid_.PointAt(order_[cursor_]);
    if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
  }
  return std::nullopt;
}

}  // namespace dhpt::optimizer
