#include "services/optimizer/hill_climbing.h"

#include <algorithm>

namespace dhpt::optimizer {
namespace {
constexpr uint64_t kHillStream = 0x48494c4c;  // "HILL"
constexpr int kNeighbourDraws = 20;
}  // namespace

HillClimbing::HillClimbing(SearchSpace space, uint64_t seed, bool minimize,
                           HillClimbingOptions options)
    : space_(space), seed_(seed), minimize_(minimize), options_(options), random_(space, seed) {}

HillClimbing::Climb HillClimbing::Replay(const History& history) const {
  Climb climb;
  climb.step = options_.initial_step;
  auto loss = [&](const TrialRecord& t) { return minimize_ ? *t.value : -*t.value; };
  for (size_t n = 0; n < history.trials.size(); ++n) {
    const TrialRecord& trial = history.trials[n];
    if (n < climb.start || trial.status == TrialStatus::kRunning) continue;
    // An infeasible result (violation > 0) counts as a miss and never becomes the incumbent.
    const bool completed = trial.status == TrialStatus::kCompleted && trial.value.has_value() &&
                           !(trial.violation > 0);
    if (!climb.incumbent) {
      if (completed) climb.incumbent = n;
      continue;
    }
    const double incumbent_loss = loss(history.trials[*climb.incumbent]);
    if (completed && loss(trial) <= incumbent_loss) {
      const bool improved = loss(trial) < incumbent_loss;
      climb.incumbent = n;
      climb.misses = improved ? 0 : climb.misses + 1;
    } else {
      ++climb.misses;
    }
    if (climb.misses >= options_.patience) {
      climb.misses = 0;
      climb.step *= options_.shrink_factor;
      if (climb.step < options_.min_step) {
        climb = Climb{.incumbent = std::nullopt,
                      .step = options_.initial_step,
                      .misses = 0,
                      .start = n + 1,
                      .restarts = climb.restarts + 1};
      }
    }
  }
  return climb;
}

absl::StatusOr<std::optional<Point>> HillClimbing::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;
  const Climb climb = Replay(history);
  std::mt19937_64 generator = SeededGenerator(seed_, kHillStream, history.trials.size());
  if (!climb.incumbent) {
    std::vector<double> unit(static_cast<size_t>(space_.dims()));
    for (int draw = 0; draw < kNeighbourDraws; ++draw) {
      for (double& u : unit) u = UniformUnit(generator);
      Point point = space_.FromUnitPoint(unit);
      if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
    }
    return random_.Suggest(history);
  }
  const Point& centre = history.trials[*climb.incumbent].point;
  for (int draw = 0; draw < kNeighbourDraws; ++draw) {
    Point point(static_cast<size_t>(space_.dims()), Inactive{});
    for (int i = 0; i < space_.dims(); ++i) {
      // Conditional spaces: only active parameters move; those a moved parent switches on are
      // drawn at random below (Canonicalize), those it switches off are dropped.
      if (std::holds_alternative<Inactive>(centre[i])) continue;
      const SearchSpace::Internal d = space_.InternalDomain(i);
      const double x = space_.ToInternal(i, centre[i]);
      if (d.choice) {
        double index = x;
        if (d.choices > 1 && UniformUnit(generator) < options_.flip_probability) {
          // Another value, uniformly among the rest.
          const int other = static_cast<int>(UniformUnit(generator) * (d.choices - 1));
          index = other >= static_cast<int>(x) ? other + 1 : other;
        }
        point[i] = space_.FromInternal(i, index);
      } else {
        const double moved = x + climb.step * (d.high - d.low) * StandardNormal(generator);
        point[i] = space_.FromInternal(i, std::clamp(moved, d.low, d.high));
      }
    }
    space_.Canonicalize(point, &generator);
    if (!space_.Forbidden(point) && !history.keys.contains(space_.Key(point))) return point;
  }
  return random_.Suggest(history);
}

}  // namespace dhpt::optimizer
