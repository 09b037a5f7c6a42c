#include "services/optimizer/nsga2.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/optimizer/multi_objective_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(Nsga2Test, FirstGenerationIsRandomSearch) {
  const SearchSpace space = Zdt1Space(4);
  Nsga2 nsga(space, 5, {true, true}, {.population_size = 10});
  RandomSearch random(space, 5);
  TestStudy a, b;
  std::vector<Point> from_nsga = RunZdt1(nsga, space, 10, a);
  std::vector<Point> from_random;
  for (int i = 0; i < 10; ++i) {
    from_random.push_back(**random.Suggest(b.history()));
    b.trials.push_back({.point = from_random.back()});
  }
  EXPECT_EQ(from_nsga, from_random);
  EXPECT_NE(**nsga.Suggest(a.history()), **random.Suggest(a.history()));
}

TEST(Nsga2Test, DeterministicAndRebuildable) {
  const SearchSpace space = Zdt1Space(5);
  const Nsga2Options options{.population_size = 8};
  Nsga2 first(space, 3, {true, true}, options), second(space, 3, {true, true}, options);
  TestStudy a, b;
  std::vector<Point> all = RunZdt1(first, space, 60, a);
  std::vector<Point> part = RunZdt1(second, space, 35, b);
  Nsga2 rebuilt(space, 3, {true, true}, options);
  std::vector<Point> rest = RunZdt1(rebuilt, space, 25, b);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

// Generations are the completed trials in suggestion order; others join none.
TEST(Nsga2Test, GenerationsAreFormedFromCompletedTrialsOnly) {
  const SearchSpace space = Zdt1Space(2);
  Nsga2 nsga(space, 1, {true, true}, {.population_size = 3});
  TestStudy study;
  auto add = [&](TrialStatus status, std::vector<double> values, double violation = 0) {
    study.trials.push_back({.point = {0.1 * study.trials.size(), 0.0},
                            .status = status,
                            .values = std::move(values),
                            .violation = violation});
  };
  add(TrialStatus::kCompleted, {1, 5});  // 0
  add(TrialStatus::kFailed, {});
  add(TrialStatus::kCompleted, {5, 1});  // 2
  add(TrialStatus::kRunning, {});
  add(TrialStatus::kCompleted, {NAN, 1});  // A NaN objective: like a failed trial.
  EXPECT_EQ(nsga.ParentPopulation(study.history()).generation, -1);
  add(TrialStatus::kCompleted, {6, 6});  // 5: generation 0 is full.
  Nsga2::Parents parents = nsga.ParentPopulation(study.history());
  EXPECT_EQ(parents.generation, 0);
  EXPECT_EQ(std::set<int>(parents.trials.begin(), parents.trials.end()), (std::set<int>{0, 2, 5}));
  // Generation 1 plus the parents: the infeasible (0, 0) ranks after every feasible trial,
  // however good its objectives; the elite is the first feasible front.
  add(TrialStatus::kCompleted, {0, 0}, 0.5);  // 6
  add(TrialStatus::kCompleted, {2, 2});       // 7
  add(TrialStatus::kPruned, {});
  add(TrialStatus::kCompleted, {3, 0.5});  // 9
  parents = nsga.ParentPopulation(study.history());
  EXPECT_EQ(parents.generation, 1);
  EXPECT_EQ(std::set<int>(parents.trials.begin(), parents.trials.end()), (std::set<int>{0, 7, 9}));
  // (1, 5), (2, 2) and (3, 0.5) form the first front; (3, 0.5) dominates (5, 1).
  for (int rank : parents.ranks) EXPECT_EQ(rank, 0);
}

TEST(Nsga2Test, ConstrainedEliteKeepsTheLeastViolatingWhenNoneIsFeasible) {
  const SearchSpace space = Zdt1Space(2);
  Nsga2 nsga(space, 1, {true, true}, {.population_size = 2});
  TestStudy study;
  for (double violation : {0.3, 0.1, 0.2, 0.4}) {
    study.trials.push_back({.point = {violation, 0.0},
                            .status = TrialStatus::kCompleted,
                            .values = {violation, 1 - violation},
                            .violation = violation});
  }
  const Nsga2::Parents parents = nsga.ParentPopulation(study.history());
  EXPECT_EQ(std::set<int>(parents.trials.begin(), parents.trials.end()), (std::set<int>{1, 2}));
}

TEST(Nsga2Test, CountableSpaceIsExhaustedWithoutDuplicates) {
  SearchSpace space({{.name = "n", .kind = ParameterKind::kInt, .min = 0, .max = 4},
                     {.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b"}}});
  Nsga2 nsga(space, 2, {true, false}, {.population_size = 3});
  TestStudy study;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<std::optional<Point>> next = nsga.Suggest(study.history());
    ASSERT_TRUE(next.ok());
    if (!next->has_value()) break;
    ASSERT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate at " << i;
    const double n = static_cast<double>(std::get<int64_t>((**next)[0]));
    study.trials.push_back(
        {.point = **next, .status = TrialStatus::kCompleted, .values = {n, n * n}});
  }
  EXPECT_EQ(study.trials.size(), 10u);
}

TEST(Nsga2Test, OneObjectiveWorks) {
  SearchSpace space = MixedSpace();
  Nsga2 nsga(space, 4, {true}, {.population_size = 10});
  TestStudy study;
  const std::vector<Point> points = RunMixed(nsga, space, 60, study);
  double early = 0, late = 0;
  for (int i = 0; i < 10; ++i) early += MixedLoss(points[i]);
  for (int i = 50; i < 60; ++i) late += MixedLoss(points[i]);
  EXPECT_LT(late, early);
}

// A real test: after 300 trials NSGA-II's front on ZDT1 covers more hypervolume than random
// search's, median of 5 seeds.
TEST(Nsga2Test, BeatsRandomSearchOnZdt1) {
  const double nsga = MedianZdt1Hypervolume({.algorithm = Algorithm::kNsga2}, 6, 300, 5);
  const double random = MedianZdt1Hypervolume({.algorithm = Algorithm::kRandom}, 6, 300, 5);
  EXPECT_GT(nsga, random);
}

TEST(Nsga2Test, RespectsConstraintsInARun) {
  // Feasible only where f1 >= 0.6: a run ends with most of its trials feasible.
  auto violation = [](const std::vector<double>& f) { return std::max(0.0, 0.6 - f[0]); };
  const std::vector<std::vector<double>> f =
      ObjectivesRun({.algorithm = Algorithm::kNsga2, .seed = 2, .nsga2 = {.population_size = 20}},
                    *FindMultiObjectiveFunction("zdt1"), 5, 200, violation);
  int feasible_late = 0;
  for (size_t t = 150; t < f.size(); ++t) feasible_late += violation(f[t]) == 0;
  EXPECT_GT(feasible_late, 40);  // Random search: 40% of 50 = 20.
}

TEST(Nsga2Test, MakeOptimizerValidatesOptions) {
  const SearchSpace space = Zdt1Space(2);
  OptimizerConfig config{.algorithm = Algorithm::kNsga2, .objectives_minimize = {true, true}};
  EXPECT_TRUE(MakeOptimizer(space, config).ok());
  config.nsga2.population_size = 1;
  EXPECT_EQ(MakeOptimizer(space, config).status().code(), absl::StatusCode::kInvalidArgument);
  config.nsga2 = {.mutation_prob = 1.5};
  EXPECT_EQ(MakeOptimizer(space, config).status().code(), absl::StatusCode::kInvalidArgument);
  config = {.algorithm = Algorithm::kHillClimbing, .objectives_minimize = {true, false}};
  EXPECT_EQ(MakeOptimizer(space, config).status().message(),
            "HILL_CLIMBING supports one objective; use TPE, NSGA2 or BAYESIAN");
}

}  // namespace
}  // namespace dhpt::optimizer
