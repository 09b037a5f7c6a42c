#include "services/optimizer/optimizer.h"

#include <cmath>

#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/grid_search.h"
#include "services/optimizer/hill_climbing.h"
#include "services/optimizer/nsga2.h"
#include "services/optimizer/parego.h"
#include "services/optimizer/random_search.h"
#include "services/optimizer/tpe.h"

namespace dhpt::optimizer {

std::vector<std::vector<ParameterValue>> GridAxes(const SearchSpace& space, int grid_points) {
  std::vector<std::vector<ParameterValue>> axes;
  for (int i = 0; i < space.dims(); ++i) {
    const ParameterSpec& p = space.parameters()[i];
    const std::optional<int64_t> count = space.ValueCount(i);
    if (p.kind == ParameterKind::kCategorical || p.kind == ParameterKind::kDiscrete ||
        (count && *count <= grid_points)) {
      axes.push_back(space.CountableValues(i));
      continue;
    }
    // grid_points evenly spaced in the transformed range, ends included, rounded to the
    // lattice; rounding can merge neighbours, so keep each value once.
    std::vector<ParameterValue> values;
    for (int k = 0; k < grid_points; ++k) {
      const double u = grid_points == 1 ? 0.5 : static_cast<double>(k) / (grid_points - 1);
      double value = p.log ? std::exp(std::log(p.min) + u * (std::log(p.max) - std::log(p.min)))
                           : p.min + u * (p.max - p.min);
      const double step = p.kind == ParameterKind::kInt ? std::max(p.step, 1.0) : p.step;
      if (step > 0) value = NearestLatticePoint(p.min, p.max, step, value);
      ParameterValue typed = p.kind == ParameterKind::kInt
                                 ? ParameterValue(static_cast<int64_t>(std::llround(value)))
                                 : ParameterValue(value);
      if (values.empty() || values.back() != typed) values.push_back(std::move(typed));
    }
    axes.push_back(std::move(values));
  }
  return axes;
}

std::optional<int64_t> GridSize(const SearchSpace& space, int grid_points) {
  if (space.conditional() || !space.forbidden().empty()) {
    const BranchGrid grid(space, GridAxes(space, grid_points));
    if (!grid.size() || space.forbidden().empty()) return grid.size();
    // Forbidden points are counted one by one, so only on grids small enough for that.
    if (*grid.size() > SearchSpace::kMaxCountedPoints) return std::nullopt;
    int64_t allowed = 0;
    for (int64_t k = 0; k < *grid.size(); ++k) allowed += space.Forbidden(grid.PointAt(k)) ? 0 : 1;
    return allowed;
  }
  int64_t size = 1;
  for (const std::vector<ParameterValue>& axis : GridAxes(space, grid_points)) {
    const int64_t n = static_cast<int64_t>(axis.size());
    if (n == 0 || size > (int64_t{1} << 62) / n) return std::nullopt;
    size *= n;
  }
  return size;
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const SearchSpace& space,
                                                         const OptimizerConfig& config) {
  const bool multi = IsMultiObjective(config);
  switch (config.algorithm) {
    case Algorithm::kRandom:
      return std::make_unique<RandomSearch>(space, config.seed);
    case Algorithm::kGrid:
      return std::make_unique<GridSearch>(space, config.grid_points, config.seed);
    case Algorithm::kTpe:
      return std::make_unique<TpeSearch>(space, config.seed, config.minimize, config.tpe,
                                         multi ? config.objectives_minimize : std::vector<bool>{});
    case Algorithm::kBayesian:
      if (multi) {
        return std::make_unique<ParEgo>(space, config.seed, config.objectives_minimize,
                                        config.bayesian);
      }
      return std::make_unique<BayesianOptimization>(space, config.seed, config.minimize,
                                                    config.bayesian);
    case Algorithm::kHillClimbing:
      if (multi) {
        return absl::InvalidArgumentError(
            "HILL_CLIMBING supports one objective; use TPE, NSGA2 or BAYESIAN");
      }
      return std::make_unique<HillClimbing>(space, config.seed, config.minimize,
                                            config.hill_climbing);
    case Algorithm::kNsga2: {
      const Nsga2Options& o = config.nsga2;
      auto probability = [](double p) { return p >= 0 && p <= 1; };
      if (o.population_size < 2) {
        return absl::InvalidArgumentError("nsga2.population_size must be at least 2");
      }
      if (!probability(o.crossover_prob) || !probability(o.swapping_prob) ||
          (o.mutation_prob && !probability(*o.mutation_prob))) {
        return absl::InvalidArgumentError(
            "nsga2.crossover_prob, swapping_prob and mutation_prob must lie in [0, 1]");
      }
      // One objective is allowed: an elitist genetic algorithm on TrialRecord::value.
      return std::make_unique<Nsga2>(
          space, config.seed,
          multi ? config.objectives_minimize : std::vector<bool>{config.minimize}, o);
    }
  }
  return absl::InvalidArgumentError("unknown algorithm");
}

}  // namespace dhpt::optimizer
