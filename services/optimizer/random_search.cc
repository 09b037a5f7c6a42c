#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {
namespace {
constexpr uint64_t kRandomStream = 0x52414e44;  // "RAND"
}

RandomSearch::RandomSearch(SearchSpace space, uint64_t seed)
    : space_(std::move(space)), seed_(seed) {}

absl::StatusOr<std::optional<Point>> RandomSearch::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;
  const std::optional<int64_t> size = space_.FiniteSize();

  std::mt19937_64 generator = SeededGenerator(seed_, kRandomStream, history.trials.size());
  std::vector<double> unit(space_.dims());
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    for (double& u : unit) u = UniformUnit(generator);
    Point point = space_.FromUnitPoint(unit);
    if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
  }
  if (!size || *size > kMaxEnumerated) {
    // Draws keep colliding in a space too large to enumerate: sampling on would only loop.
    // Report it rather than suggest a duplicate.
    return absl::ResourceExhaustedError(
        "random search drew only already-tried points; widen the ranges or remove steps");
  }
  // Countable and nearly exhausted: take the untried points in grid order from a seeded start.
  std::vector<std::vector<ParameterValue>> axes;
  for (int i = 0; i < space_.dims(); ++i) axes.push_back(space_.CountableValues(i));
  const BranchGrid grid(space_, std::move(axes));
  const int64_t points = grid.size().value_or(0);  // Forbidden ones included.
  if (points == 0) return std::nullopt;
  const int64_t start = static_cast<int64_t>(generator() % static_cast<uint64_t>(points));
  for (int64_t offset = 0; offset < points; ++offset) {
    Point point = grid.PointAt((start + offset) % points);
    if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
  }
  return std::nullopt;
}

}  // namespace dhpt::optimizer
