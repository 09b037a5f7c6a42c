#pragma once

#include "services/optimizer/optimizer.h"
#include "services/optimizer/random_search.h"

namespace dhpt::optimizer {

// NSGA-II (Deb et al. 2002) with the defaults and operators of Optuna 3.1's NSGAIISampler.
// The rule, replayed over the history each time (so it is a pure function of it):
// - Generations: the completed trials with a full objective vector, in suggestion order, in
//   groups of `population_size` (generation 0 is the first group). Running, pruned and failed
//   trials, and completed ones with a missing or NaN objective, join no generation (Optuna
//   keeps only completed trials in its populations).
// - Until generation 0 is full, suggest as RandomSearch does.
// - The parent population after generation g is the elite of generation g plus the parents
//   before it: whole fronts of the constrained non-dominated sort (feasible before infeasible,
//   infeasible by violation; Optuna 3.1's constrained dominance) while they fit, then the rest
//   of the next front by decreasing crowding distance.
// - A child: with probability `crossover_prob`, UniformCrossover of two parents, each the
//   winner of a binary tournament (the lower rank wins, then the larger crowding distance, then
//   the second drawn), the second drawn from the parents without the first; each parameter
//   comes from either parent with probability `swapping_prob`. Otherwise a copy of a parent
//   drawn uniformly. Then each parameter is redrawn uniformly with probability
//   `mutation_prob` (1 / number of parameters when unset). In a conditional space the child
//   is then made canonical: parameters its parents' values switch off are dropped, and those
//   switched on that it got no value for (the other parent lacked them) are drawn uniformly;
//   a forbidden child is bred again like a tried one.
//   Optuna 3.1's tournament compares the two by constrained dominance only; rank then crowding
//   distance is the textbook NSGA-II rule (docs/multi-objective-optimizers.md compares the two
//   implementations).
// - A child that was tried already is bred again (up to kMaxBreeds times), then RandomSearch.
// The n-th suggestion's randomness comes from (seed, n) alone. With one objective (allowed)
// it is a plain elitist genetic algorithm with tournament selection.
class Nsga2 : public Optimizer {
 public:
  // `minimize`: the direction of each objective; one entry means TrialRecord::value is read,
  // two or more TrialRecord::values.
  Nsga2(SearchSpace space, uint64_t seed, std::vector<bool> minimize, Nsga2Options options);
  absl::StatusOr<std::optional<Point>> Suggest(const History& history) override;
  std::optional<int64_t> Capacity() const override { return space_.FiniteSize(); }

  static constexpr int kMaxBreeds = 32;

  // The parents for the next child after replaying `history` (exposed for tests): trial
  // indices, their ranks and crowding distances; empty while generation 0 is not yet full.
  struct Parents {
    int generation = -1;  // The last full generation.
    std::vector<int> trials;
    std::vector<int> ranks;
    std::vector<double> crowding;
  };
  Parents ParentPopulation(const History& history) const;

 private:
  SearchSpace space_;
  uint64_t seed_;
  std::vector<bool> minimize_;
  Nsga2Options options_;
  RandomSearch random_;
};

}  // namespace dhpt::optimizer
