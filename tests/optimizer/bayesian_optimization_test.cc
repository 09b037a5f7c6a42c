#include "services/optimizer/bayesian_optimization.h"

#include <gtest/gtest.h>

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(BayesianOptimizationTest, HandlesEveryParameterKindAndFindsTheOptimum) {
  SearchSpace space = MixedSpace();
  BayesianOptimization bo(space, 1, true, {});
  TestStudy study;
  std::vector<Point> points = RunMixed(bo, space, 35, study);
  double best = 1e9;
  for (const Point& p : points) best = std::min(best, MixedLoss(p));
  EXPECT_LT(best, 0.15);  // Random search needs far more trials for this.
}

TEST(BayesianOptimizationTest, DeterministicAndRebuildable) {
  SearchSpace space = MixedSpace();
  BayesianOptimization a(space, 4, true, {}), b(space, 4, true, {});
  TestStudy sa, sb;
  std::vector<Point> all = RunMixed(a, space, 16, sa);
  std::vector<Point> part = RunMixed(b, space, 12, sb);
  BayesianOptimization rebuilt(space, 4, true, {});
  std::vector<Point> rest = RunMixed(rebuilt, space, 4, sb);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

// The hyperparameters are fitted to a prefix that moves by about a tenth of the trials, so a
// running study refits every tenth trial or so at 100 and every fiftieth at 500.
TEST(BayesianOptimizationTest, FitPrefixStepsByATenth) {
  const BayesianOptions options;  // n_startup_trials 10, refit_growth 0.1.
  EXPECT_EQ(FitPrefix(10, options), 10);
  EXPECT_EQ(FitPrefix(15, options), 15);  // Steps of one up to 20.
  EXPECT_EQ(FitPrefix(21, options), 20);
  EXPECT_EQ(FitPrefix(23, options), 22);
  EXPECT_EQ(FitPrefix(100, options), 94);
  EXPECT_EQ(FitPrefix(112, options), 103);
  EXPECT_EQ(FitPrefix(113, options), 113);
  EXPECT_LE(500 - FitPrefix(500, options), 50);
  EXPECT_EQ(FitPrefix(37, {.refit_growth = 0}), 37);  // Refit on every suggestion.
}

// The kept fit is only a cache: a warm optimiser suggests what a fresh one (a restarted
// scheduler's) suggests for the same history, also when the history is not an extension of the
// last one it saw, and with pruned and running trials in it.
TEST(BayesianOptimizationTest, KeptFitNeverChangesASuggestion) {
  SearchSpace space = MixedSpace();
  std::mt19937_64 generator = SeededGenerator(6, 0, 0);
  TestStudy study;
  for (int t = 0; t < 60; ++t) {
    Point point =
        space.FromUnitPoint({UniformUnit(generator), UniformUnit(generator), UniformUnit(generator)});
    if (!study.keys.insert(space.Key(point)).second) continue;
    const TrialStatus status = t % 9 == 4 ? TrialStatus::kPruned
                               : t % 13 == 7 ? TrialStatus::kRunning
                                             : TrialStatus::kCompleted;
    study.trials.push_back({point, status, MixedLoss(point)});
  }
  auto prefix = [&](size_t n) {
    TestStudy part;
    part.trials.assign(study.trials.begin(), study.trials.begin() + n);
    for (const TrialRecord& trial : part.trials) part.keys.insert(space.Key(trial.point));
    return part;
  };
  BayesianOptimization warm(space, 3, true, {});
  for (size_t n = 12; n <= study.trials.size(); n += 3) {
    TestStudy part = prefix(n);
    BayesianOptimization fresh(space, 3, true, {});
    EXPECT_EQ(**warm.Suggest(part.history()), **fresh.Suggest(part.history())) << n;
  }
  // A history that does not extend the last one: an early trial's objective differs, so the
  // fit's inputs differ though the prefix's length is the same.
  TestStudy changed = prefix(study.trials.size());
  changed.trials[2].value = *changed.trials[2].value + 5;
  BayesianOptimization fresh(space, 3, true, {});
  EXPECT_EQ(**warm.Suggest(changed.history()), **fresh.Suggest(changed.history()));
}

TEST(BayesianOptimizationTest, PendingTrialsAreFantasisedSoParallelSuggestionsDiffer) {
  SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  BayesianOptimization bo(space, 2, true, {});
  TestStudy study;
  for (int i = 0; i < 12; ++i) {
    Point p = **bo.Suggest(study.history());
    study.keys.insert(space.Key(p));
    study.trials.push_back({p, TrialStatus::kCompleted, std::pow(std::get<double>(p[0]) - 0.3, 2)});
  }
  Point first = **bo.Suggest(study.history());
  study.keys.insert(space.Key(first));
  study.trials.push_back({first, TrialStatus::kRunning, std::nullopt});
  Point second = **bo.Suggest(study.history());
  EXPECT_GT(std::abs(std::get<double>(first[0]) - std::get<double>(second[0])), 1e-3);
}

// Pruned trials count toward the start-up trials and mark their region as poor: with the good
// region's trials pruned, BO looks elsewhere; with them absent, it would look there.
TEST(BayesianOptimizationTest, PrunedTrialsMarkTheirRegionAsPoor) {
  SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  TestStudy study;
  auto add = [&](double x, TrialStatus status, double value) {
    study.keys.insert(space.Key(Point{x}));
    study.trials.push_back({Point{x}, status, value, status == TrialStatus::kPruned ? 20 : 0});
  };
  // Completed trials say "lower towards x = 0"; pruned trials near 0 stopped with large losses.
  for (int i = 0; i < 6; ++i) add(0.4 + 0.1 * i, TrialStatus::kCompleted, 1.0 + 0.5 * i);
  for (int i = 0; i < 5; ++i) add(0.02 + 0.05 * i, TrialStatus::kPruned, 100.0);
  BayesianOptimization bo(space, 7, true, {.n_startup_trials = 10});
  RandomSearch random(space, 7);
  const Point next = **bo.Suggest(study.history());
  EXPECT_NE(next, **random.Suggest(study.history()));  // 6 completed + 5 pruned: past start-up.
  EXPECT_GT(std::get<double>(next[0]), 0.25) << "suggested inside the pruned region";
  EXPECT_LT(std::get<double>(next[0]), 0.6) << "not where the completed trials point";
}

TEST(BayesianOptimizationTest, BeatsRandomSearchOnBenchmarkFunctions) {
  for (const auto& [function, d] :
       std::vector<std::pair<std::string, int>>{{"branin", 2}, {"hartmann6", 6}}) {
    EXPECT_LT(MedianBest(Algorithm::kBayesian, function, d, 3, 40),
              MedianBest(Algorithm::kRandom, function, d, 3, 40))
        << function;
  }
}

}  // namespace
}  // namespace dhpt::optimizer
