#include "services/optimizer/nsga2.h"

#include <algorithm>
#include <numeric>

#include "services/optimizer/pareto.h"
#include "services/optimizer/trial_losses.h"

namespace dhpt::optimizer {
namespace {

constexpr uint64_t kNsgaStream = 0x4e534741;  // "NSGA"

struct Member {
  int trial;
  std::vector<double> losses;
  double violation;
};

// Ranks (constrained non-dominated sort) and crowding distances within each front.
void RankAndCrowd(const std::vector<Member>& members, std::vector<int>* ranks,
                  std::vector<double>* crowding) {
  std::vector<std::vector<double>> losses;
  std::vector<double> violations;
  for (const Member& m : members) {
    losses.push_back(m.losses);
    violations.push_back(m.violation);
  }
  *ranks = NonDominatedRanks(losses, violations);
  crowding->assign(members.size(), 0.0);
  const int fronts = ranks->empty() ? 0 : *std::max_element(ranks->begin(), ranks->end()) + 1;
  for (int f = 0; f < fronts; ++f) {
    std::vector<int> front;
    std::vector<std::vector<double>> front_losses;
    for (size_t k = 0; k < members.size(); ++k) {
      if ((*ranks)[k] == f) {
        front.push_back(static_cast<int>(k));
        front_losses.push_back(members[k].losses);
      }
    }
    const std::vector<double> distances = CrowdingDistances(front_losses);
    for (size_t k = 0; k < front.size(); ++k) (*crowding)[front[k]] = distances[k];
  }
}

// The best `size` of `pool`: whole fronts while they fit, then the most isolated of the next.
std::vector<Member> Elite(std::vector<Member> pool, int size) {
  std::vector<int> ranks;
  std::vector<double> crowding;
  RankAndCrowd(pool, &ranks, &crowding);
  std::vector<int> order(pool.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return ranks[a] != ranks[b] ? ranks[a] < ranks[b] : crowding[a] > crowding[b];
  });
  std::vector<Member> elite;
  for (int k = 0; k < std::min<int>(size, static_cast<int>(order.size())); ++k) {
    elite.push_back(std::move(pool[order[k]]));
  }
  return elite;
}

}  // namespace

Nsga2::Nsga2(SearchSpace space, uint64_t seed, std::vector<bool> minimize, Nsga2Options options)
    : space_(space),
      seed_(seed),
      minimize_(std::move(minimize)),
      options_(options),
      random_(space, seed) {}

Nsga2::Parents Nsga2::ParentPopulation(const History& history) const {
  std::vector<Member> generation, parents;
  int full = -1;
  for (size_t t = 0; t < history.trials.size(); ++t) {
    const TrialRecord& trial = history.trials[t];
    std::optional<std::vector<double>> losses = CompletedLosses(trial, minimize_);
    if (!losses) continue;
    generation.push_back({static_cast<int>(t), std::move(*losses), trial.violation});
    if (static_cast<int>(generation.size()) < options_.population_size) continue;
    for (Member& m : parents) generation.push_back(std::move(m));
    parents = Elite(std::move(generation), options_.population_size);
    generation.clear();
    ++full;
  }
  Parents result;
  result.generation = full;
  for (const Member& m : parents) result.trials.push_back(m.trial);
  RankAndCrowd(parents, &result.ranks, &result.crowding);
  return result;
}

absl::StatusOr<std::optional<Point>> Nsga2::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;
  const Parents parents = ParentPopulation(history);
  if (parents.trials.empty()) return random_.Suggest(history);

  std::mt19937_64 generator = SeededGenerator(seed_, kNsgaStream, history.trials.size());
  const int dims = space_.dims();
  const double mutation_prob = options_.mutation_prob.value_or(1.0 / std::max(1, dims));
  auto draw = [&](int n) { return static_cast<int>(generator() % static_cast<uint64_t>(n)); };
  // Binary tournament among the parents at `positions`: returns a position in the population.
  auto tournament = [&](const std::vector<int>& positions) {
    const int a = positions[draw(static_cast<int>(positions.size()))];
    const int b = positions[draw(static_cast<int>(positions.size()))];
    const bool a_wins = parents.ranks[a] != parents.ranks[b]
                            ? parents.ranks[a] < parents.ranks[b]
                            : parents.crowding[a] > parents.crowding[b];
    return a_wins ? a : b;
  };
  const int size = static_cast<int>(parents.trials.size());
  std::vector<int> everyone(static_cast<size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);

  for (int breed = 0; breed < kMaxBreeds; ++breed) {
    Point child;
    if (UniformUnit(generator) < options_.crossover_prob && size >= 2) {
      const int first = tournament(everyone);
      std::vector<int> others;
      for (int p : everyone) {
        if (p != first) others.push_back(p);
      }
      const int second = tournament(others);
      const Point& a = history.trials[parents.trials[first]].point;
      const Point& b = history.trials[parents.trials[second]].point;
      for (int i = 0; i < dims; ++i)
        child.push_back(UniformUnit(generator) >= options_.swapping_prob ? b[i] : a[i]);
    } else {
      child = history.trials[parents.trials[draw(size)]].point;
    }
    for (int i = 0; i < dims; ++i) {
      if (UniformUnit(generator) < mutation_prob)
        child[i] = space_.FromUnit(i, UniformUnit(generator));
    }
    // Conditional spaces: a child may take its parent's value from one parent and lack the
    // children that value switches on (drawn at random) or carry some it switches off (dropped).
    space_.Canonicalize(child, &generator);
    if (!space_.Forbidden(child) && !history.keys.contains(space_.Key(child))) return child;
  }
  return random_.Suggest(history);
}

}  // namespace dhpt::optimizer
