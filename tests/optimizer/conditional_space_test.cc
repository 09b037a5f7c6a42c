// Conditional search spaces (issue 33): every algorithm suggests only canonical points (a value
// for exactly the active parameters), never a forbidden one; GRID enumerates each branch; and a
// rebuilt optimiser repeats the suggestions of a running one.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "services/optimizer/conditional_benchmark.h"
#include "services/optimizer/optimizer.h"
#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer::conditional_test {
namespace {

// Why `point` is not a canonical, allowed point of `space`; empty when it is.
std::string Defect(const SearchSpace& space, const Point& point) {
  for (int i : space.order()) {
    const bool has_value = !std::holds_alternative<Inactive>(point[i]);
    if (has_value != space.Active(point, i)) {
      return space.parameters()[i].name + (has_value ? " has a value but is inactive"
                                                     : " is active but has no value");
    }
  }
  return space.Forbidden(point) ? "forbidden" : "";
}

struct Case {
  std::string name;
  OptimizerConfig config;
  int budget;
};

std::vector<Case> Cases() {
  auto config = [](Algorithm algorithm) {
    OptimizerConfig c;
    c.algorithm = algorithm;
    c.tpe.n_startup_trials = 5;
    c.bayesian.n_startup_trials = 5;
    c.bayesian.candidates = 64;
    c.bayesian.fit_iterations = 10;
    c.nsga2.population_size = 6;
    return c;
  };
  std::vector<Case> cases = {{"RANDOM", config(Algorithm::kRandom), 40},
                             {"GRID", config(Algorithm::kGrid), 40},
                             {"TPE", config(Algorithm::kTpe), 40},
                             {"HILL_CLIMBING", config(Algorithm::kHillClimbing), 40},
                             {"BAYESIAN", config(Algorithm::kBayesian), 14},
                             {"NSGA2", config(Algorithm::kNsga2), 40}};
  Case multivariate{"TPE multivariate", config(Algorithm::kTpe), 40};
  multivariate.config.tpe.multivariate = true;
  Case conditioned{"TPE condition_on_parent", config(Algorithm::kTpe), 40};
  conditioned.config.tpe.condition_on_parent = true;
  Case hill_steps{"HILL_CLIMBING small patience", config(Algorithm::kHillClimbing), 40};
  hill_steps.config.hill_climbing.patience = 1;
  hill_steps.config.hill_climbing.flip_probability = 0.6;
  cases.push_back(multivariate);
  cases.push_back(conditioned);
  cases.push_back(hill_steps);
  for (Algorithm a : {Algorithm::kTpe, Algorithm::kNsga2, Algorithm::kBayesian}) {
    Case mo{"multi-objective", config(a), a == Algorithm::kBayesian ? 14 : 40};
    mo.name += a == Algorithm::kTpe ? " MOTPE" : a == Algorithm::kNsga2 ? " NSGA2" : " ParEGO";
    mo.config.objectives_minimize = {true, true};
    cases.push_back(mo);
  }
  return cases;
}

// Completes `point` with the benchmark loss (and, for two objectives, a second one that
// disagrees with it).
TrialRecord Complete(const Point& point, bool multi) {
  TrialRecord trial{point, TrialStatus::kCompleted};
  const double loss = ConditionalBenchmarkLoss(point);
  if (multi) {
    trial.values = {loss, std::get<std::string>(point[0]) == "net" ? 0.0 : 1.0 - loss};
  } else {
    trial.value = loss;
  }
  return trial;
}

TEST(ConditionalSpaceTest, EveryAlgorithmSuggestsOnlyActiveParametersAndNoForbiddenPoint) {
  const SearchSpace space = ConditionalBenchmarkSpace();
  for (const Case& c : Cases()) {
    const int seeds = c.config.algorithm == Algorithm::kBayesian ? 3 : 12;
    for (int seed = 0; seed < seeds; ++seed) {
      OptimizerConfig config = c.config;
      config.seed = static_cast<uint64_t>(seed);
      auto optimizer = MakeOptimizer(space, config);
      ASSERT_TRUE(optimizer.ok()) << c.name << ": " << optimizer.status();
      TestStudy study;
      for (int t = 0; t < c.budget; ++t) {
        auto next = (*optimizer)->Suggest(study.history());
        ASSERT_TRUE(next.ok()) << c.name << " seed " << seed << ": " << next.status();
        ASSERT_TRUE(next->has_value()) << c.name;
        const Point& point = **next;
        ASSERT_EQ(Defect(space, point), "") << c.name << " seed " << seed << " trial " << t;
        ASSERT_TRUE(study.keys.insert(space.Key(point)).second) << c.name << ": duplicate";
        // Every fourth trial still runs, so constant liars and fantasies see inactive values.
        study.trials.push_back(t % 4 == 3 ? TrialRecord{point, TrialStatus::kRunning}
                                          : Complete(point, IsMultiObjective(config)));
      }
    }
  }
}

TEST(ConditionalSpaceTest, RandomDrawsEveryBranchAndChainedChildren) {
  const SearchSpace space = ConditionalBenchmarkSpace();
  auto optimizer = MakeOptimizer(space, {.algorithm = Algorithm::kRandom, .seed = 3});
  ASSERT_TRUE(optimizer.ok());
  TestStudy study;
  int rate_drops = 0, width_3s = 0;
  for (int t = 0; t < 200; ++t) {
    auto next = (*optimizer)->Suggest(study.history());
    ASSERT_TRUE(next.ok() && next->has_value());
    rate_drops += std::holds_alternative<double>((**next)[4]) ? 1 : 0;
    width_3s += std::holds_alternative<int64_t>((**next)[8]) ? 1 : 0;
    study.keys.insert(space.Key(**next));
    study.trials.push_back({**next, TrialStatus::kCompleted, 0.0});
  }
  // rate_drop needs model=tree and booster=dart (1/6), width_3 model=net and layers=3 (1/9).
  EXPECT_GT(rate_drops, 15);
  EXPECT_LT(rate_drops, 60);
  EXPECT_GT(width_3s, 8);
  EXPECT_LT(width_3s, 45);
}

// model in {a, b, c}; depth (3 values) for a and b; drop (2 values) for b only; lambda (4
// values) for c only: 3 + 3 * 2 + 4 = 13 points, where the product of the axes has 72.
SearchSpace BranchSpace(std::vector<ForbiddenClause> forbidden = {}) {
  return SearchSpace(
      {{.name = "model", .kind = ParameterKind::kCategorical, .categories = {"a", "b", "c"}},
       {.name = "depth", .kind = ParameterKind::kInt, .min = 2, .max = 4, .parent = 0,
        .active_values = {std::string("a"), std::string("b")}},
       {.name = "drop", .kind = ParameterKind::kDiscrete, .discrete_values = {0.1, 0.2},
        .parent = 0, .active_values = {std::string("b")}},
       {.name = "lambda", .kind = ParameterKind::kDiscrete, .discrete_values = {1, 2, 3, 4},
        .parent = 0, .active_values = {std::string("c")}}},
      std::move(forbidden));
}

TEST(ConditionalSpaceTest, GridWalksEachBranchOnceAndCountsTheSumOverBranches) {
  for (bool with_forbidden : {false, true}) {
    std::vector<ForbiddenClause> forbidden;
    if (with_forbidden) forbidden.push_back({{0, {std::string("b")}}, {1, {int64_t{4}}}});
    const SearchSpace space = BranchSpace(forbidden);
    const int64_t expected = with_forbidden ? 13 - 2 : 13;
    EXPECT_EQ(GridSize(space, 5), expected);
    EXPECT_EQ(space.FiniteSize(), expected);
    auto grid = MakeOptimizer(space, {.algorithm = Algorithm::kGrid, .seed = 7, .grid_points = 5});
    ASSERT_TRUE(grid.ok());
    EXPECT_EQ((*grid)->Capacity(), expected);
    TestStudy study;
    while (true) {
      auto next = (*grid)->Suggest(study.history());
      ASSERT_TRUE(next.ok());
      if (!next->has_value()) break;
      ASSERT_EQ(Defect(space, **next), "");
      ASSERT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate";
      study.trials.push_back({**next, TrialStatus::kCompleted, 0.0});
    }
    EXPECT_EQ(static_cast<int64_t>(study.trials.size()), expected);
    // Random search of the same countable space also ends after exactly those points.
    auto random = MakeOptimizer(space, {.algorithm = Algorithm::kRandom, .seed = 7});
    ASSERT_TRUE(random.ok());
    TestStudy drawn;
    for (int t = 0; t <= expected; ++t) {
      auto next = (*random)->Suggest(drawn.history());
      ASSERT_TRUE(next.ok()) << next.status();
      if (!next->has_value()) break;
      ASSERT_EQ(Defect(space, **next), "");
      ASSERT_TRUE(drawn.keys.insert(space.Key(**next)).second) << "duplicate";
      drawn.trials.push_back({**next, TrialStatus::kCompleted, 0.0});
    }
    EXPECT_EQ(static_cast<int64_t>(drawn.trials.size()), expected);
  }
}

TEST(ConditionalSpaceTest, AnUnconditionalGridKeepsItsOrder) {
  // The branch enumeration of a space without conditions is the plain mixed-radix product.
  const SearchSpace space = MixedSpace();
  const BranchGrid grid(space, GridAxes(space, 3));
  const std::vector<std::vector<ParameterValue>> axes = GridAxes(space, 3);
  ASSERT_EQ(grid.size(), 3 * 3 * 3);
  EXPECT_EQ(grid.PointAt(0), (Point{axes[0][0], axes[1][0], axes[2][0]}));
  EXPECT_EQ(grid.PointAt(1), (Point{axes[0][0], axes[1][0], axes[2][1]}));
  EXPECT_EQ(grid.PointAt(3), (Point{axes[0][0], axes[1][1], axes[2][0]}));
  EXPECT_EQ(grid.PointAt(26), (Point{axes[0][2], axes[1][2], axes[2][2]}));
}

TEST(ConditionalSpaceTest, ARebuiltOptimizerRepeatsTheSuggestionsOfARunningOne) {
  const SearchSpace space = ConditionalBenchmarkSpace();
  for (const Case& c : Cases()) {
    if (c.config.algorithm == Algorithm::kBayesian) continue;  // Slow; pure by the same code.
    auto running = MakeOptimizer(space, c.config);
    ASSERT_TRUE(running.ok());
    TestStudy study;
    for (int t = 0; t < 25; ++t) {
      auto next = (*running)->Suggest(study.history());
      auto rebuilt = MakeOptimizer(space, c.config);
      ASSERT_TRUE(rebuilt.ok());
      auto again = (*rebuilt)->Suggest(study.history());
      ASSERT_TRUE(next.ok() && again.ok() && next->has_value() && again->has_value());
      ASSERT_EQ(space.Key(**next), space.Key(**again)) << c.name << " trial " << t;
      study.keys.insert(space.Key(**next));
      study.trials.push_back(Complete(**next, IsMultiObjective(c.config)));
    }
  }
}

// BAYESIAN alike, past its start-up (the test above skips it for its cost): each suggestion on
// a conditional space is a function of the seed and the history alone.
TEST(ConditionalSpaceTest, ARebuiltBayesianRepeatsTheSuggestionsOfARunningOne) {
  const SearchSpace space = ConditionalBenchmarkSpace();
  OptimizerConfig config;
  config.algorithm = Algorithm::kBayesian;
  config.seed = 5;
  auto running = MakeOptimizer(space, config);
  ASSERT_TRUE(running.ok());
  TestStudy study;
  for (int t = 0; t < 16; ++t) {
    auto next = (*running)->Suggest(study.history());
    ASSERT_TRUE(next.ok() && next->has_value());
    if (t >= 10) {  // The start-up's ten are random search's, covered above.
      auto rebuilt = MakeOptimizer(space, config);
      ASSERT_TRUE(rebuilt.ok());
      auto again = (*rebuilt)->Suggest(study.history());
      ASSERT_TRUE(again.ok() && again->has_value());
      ASSERT_EQ(space.Key(**next), space.Key(**again)) << "trial " << t;
    }
    study.keys.insert(space.Key(**next));
    study.trials.push_back(Complete(**next, false));
  }
}

TEST(ConditionalSpaceTest, TpeFitsAChildOnlyToTheTrialsWhereItWasActive) {
  // The best trials are trees of depth 8; the other trees have other depths and the linear and
  // net trials have no depth at all. TPE's depth densities come from the trees alone, so whenever
  // it suggests a tree it keeps depth near 8.
  const SearchSpace space = ConditionalBenchmarkSpace();
  OptimizerConfig config{.algorithm = Algorithm::kTpe, .seed = 1};
  config.tpe.n_startup_trials = 5;
  TestStudy study;
  auto add = [&](Point point, double loss) {
    space.Canonicalize(point, nullptr);
    study.keys.insert(space.Key(point));
    study.trials.push_back({point, TrialStatus::kCompleted, loss});
  };
  const int64_t other_depths[] = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12};
  for (int k = 0; k < 30; ++k) {
    const int64_t depth = k < 6 ? 8 : other_depths[k % 11];
    // The best are distinct points: dart with distinct rate_drops.
    add({std::string("tree"), Inactive{}, depth, std::string(k < 6 ? "dart" : "gbtree"),
         0.01 * k, Inactive{}, Inactive{}, Inactive{}, Inactive{}, 0.8},
        k < 6 ? 0.01 * k : 1 + k);
    add({std::string("linear"), 1e-3 * (k + 1), Inactive{}, Inactive{}, Inactive{}, Inactive{},
         Inactive{}, Inactive{}, Inactive{}, Inactive{}},
        1 + k);
    add({std::string("net"), Inactive{}, Inactive{}, Inactive{}, Inactive{}, int64_t{1},
         int64_t{8 + k}, Inactive{}, Inactive{}, Inactive{}},
        1 + k);
  }
  auto tpe = MakeOptimizer(space, config);
  ASSERT_TRUE(tpe.ok());
  int trees = 0, near = 0;
  for (int t = 0; t < 20; ++t) {
    auto next = (*tpe)->Suggest(study.history());
    ASSERT_TRUE(next.ok() && next->has_value());
    if (std::get<std::string>((**next)[0]) != "tree") continue;
    ++trees;
    near += std::abs(std::get<int64_t>((**next)[2]) - 8) <= 1 ? 1 : 0;
    study.keys.insert(space.Key(**next));
    study.trials.push_back({**next, TrialStatus::kRunning});
  }
  EXPECT_GE(trees, 15);
  EXPECT_GE(near, trees * 3 / 4);
}

TEST(ConditionalSpaceTest, MultivariateTpeModelsABranchsParametersJointly) {
  // Branch b's good trials lie on the diagonal x = y, at five places; its bad ones off it.
  // Modelled jointly (the parameters of one branch are one group, as Optuna's group=True), a
  // suggestion draws x and y from the same good trial and stays on the diagonal; modelled each
  // alone, x and y come from different good trials four times in five (11 of these 40 seeds
  // land on the diagonal that way; 28 jointly).
  const SearchSpace space({
      {.name = "branch", .kind = ParameterKind::kCategorical, .categories = {"a", "b"}},
      {.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1, .parent = 0,
       .active_values = {std::string("b")}},
      {.name = "y", .kind = ParameterKind::kDouble, .min = 0, .max = 1, .parent = 0,
       .active_values = {std::string("b")}},
  });
  TestStudy study;
  auto add = [&](Point point, double loss) {
    study.keys.insert(space.Key(point));
    study.trials.push_back({point, TrialStatus::kCompleted, loss});
  };
  add({std::string("a"), Inactive{}, Inactive{}}, 10);
  for (int k = 0; k < 40; ++k) {
    const double x = 0.1 + 0.2 * (k % 5) + 0.001 * k;
    const bool good = k < 5;
    const double y = good ? x : std::fmod(x + 0.2 + 0.2 * (k % 4), 1.0);
    add({std::string("b"), x, y}, good ? 0.01 * k : 1 + k);
  }
  int diagonal = 0;
  constexpr int kSeeds = 40;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    OptimizerConfig config{.algorithm = Algorithm::kTpe, .seed = seed};
    config.tpe.multivariate = true;
    auto next = (*MakeOptimizer(space, config))->Suggest(study.history());
    ASSERT_TRUE(next.ok() && next->has_value());
    ASSERT_EQ(std::get<std::string>((**next)[0]), "b");
    diagonal += std::abs(std::get<double>((**next)[1]) - std::get<double>((**next)[2])) < 0.1;
  }
  EXPECT_GE(diagonal, kSeeds * 3 / 5) << diagonal << " of " << kSeeds << " on the diagonal";
}

}  // namespace
}  // namespace dhpt::optimizer::conditional_test
