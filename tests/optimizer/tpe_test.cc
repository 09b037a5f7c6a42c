#include "services/optimizer/tpe.h"

#include <gtest/gtest.h>

#include <numeric>

#include "services/common/random.h"

#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(TpeTest, StartsWithTheRandomSearchPoints) {
  SearchSpace space = MixedSpace();
  TpeSearch tpe(space, 5, true, {});
  RandomSearch random(space, 5);
  TestStudy a, b;
  std::vector<Point> from_tpe = RunMixed(tpe, space, 10, a);
  std::vector<Point> from_random = RunMixed(random, space, 10, b);
  EXPECT_EQ(from_tpe, from_random);
}

TEST(TpeTest, DeterministicAndRebuildable) {
  SearchSpace space = MixedSpace();
  TpeSearch first(space, 9, true, {}), second(space, 9, true, {});
  TestStudy a, b;
  std::vector<Point> all = RunMixed(first, space, 40, a);
  std::vector<Point> part = RunMixed(second, space, 25, b);
  TpeSearch rebuilt(space, 9, true, {});
  std::vector<Point> rest = RunMixed(rebuilt, space, 15, b);
  part.insert(part.end(), rest.begin(), rest.end());
  EXPECT_EQ(all, part);
}

// The sorted columns kept between suggestions are only a cache: a warm optimiser suggests what a
// fresh one suggests for the same history, also when the history is not an extension of the
// last one it saw.
TEST(TpeTest, KeptSortOrderNeverChangesASuggestion) {
  SearchSpace space({{.name = "a", .kind = ParameterKind::kDouble, .min = -1, .max = 1},
                     {.name = "b", .kind = ParameterKind::kDouble, .min = 1, .max = 100, .log = true},
                     {.name = "c", .kind = ParameterKind::kDouble, .min = 0, .max = 1, .step = 0.1}});
  std::mt19937_64 generator = SeededGenerator(4, 0, 0);
  TestStudy study;
  for (int t = 0; t < 40; ++t) {
    Point point = space.FromUnitPoint({UniformUnit(generator), UniformUnit(generator), UniformUnit(generator)});
    // Ties on purpose: every fifth trial repeats an earlier value of a.
    if (t % 5 == 4) point[0] = study.trials[t / 2].point[0];
    const TrialStatus status = t % 7 == 3 ? TrialStatus::kFailed : t % 11 == 5 ? TrialStatus::kRunning
                                                                               : TrialStatus::kCompleted;
    study.trials.push_back({point, status, UniformUnit(generator)});
    study.keys.insert(space.Key(point));
  }
  TpeSearch warm(space, 2, true, {});
  auto prefix = [&](size_t n) {
    TestStudy part;
    part.trials.assign(study.trials.begin(), study.trials.begin() + n);
    for (const TrialRecord& trial : part.trials) part.keys.insert(space.Key(trial.point));
    return part;
  };
  for (size_t n = 12; n <= 40; n += 4) {
    TestStudy part = prefix(n);
    TpeSearch fresh(space, 2, true, {});
    EXPECT_EQ(**warm.Suggest(part.history()), **fresh.Suggest(part.history())) << n;
  }
  // A history that does not extend the last one: an earlier trial's point differs.
  TestStudy changed = prefix(30);
  changed.trials[3].point[0] = 0.123;
  TpeSearch fresh(space, 2, true, {});
  EXPECT_EQ(**warm.Suggest(changed.history()), **fresh.Suggest(changed.history()));
}

TEST(TpeTest, ConcentratesOnTheGoodRegion) {
  SearchSpace space = MixedSpace();
  TpeSearch tpe(space, 3, true, {});
  TestStudy study;
  std::vector<Point> points = RunMixed(tpe, space, 80, study);
  int good_category = 0;
  for (size_t i = 40; i < points.size(); ++i) good_category += std::get<std::string>(points[i][2]) == "b";
  EXPECT_GT(good_category, 25);  // Random would give ~13 of 40.
}

TEST(TpeTest, MaximisingFlipsTheSplit) {
  SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  TpeSearch tpe(space, 1, /*minimize=*/false, {});
  TestStudy study;
  for (int i = 0; i < 60; ++i) {
    Point p = **tpe.Suggest(study.history());
    study.keys.insert(space.Key(p));
    study.trials.push_back({p, TrialStatus::kCompleted, std::get<double>(p[0])});  // Bigger is better.
  }
  double late = 0;
  for (int i = 40; i < 60; ++i) late += std::get<double>(study.trials[i].point[0]);
  EXPECT_GT(late / 20, 0.7);
}

TEST(TpeTest, ConstantLiarSpreadsParallelSuggestions) {
  SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  auto spread = [&](bool liar) {
    TpeSearch tpe(space, 4, true, {.constant_liar = liar});
    TestStudy study;
    for (int i = 0; i < 20; ++i) {  // Finished trials with the optimum at 0.3.
      Point p = **tpe.Suggest(study.history());
      study.keys.insert(space.Key(p));
      study.trials.push_back({p, TrialStatus::kCompleted, std::abs(std::get<double>(p[0]) - 0.3)});
    }
    std::vector<double> running;
    for (int i = 0; i < 8; ++i) {  // Eight suggestions in flight at once.
      Point p = **tpe.Suggest(study.history());
      study.keys.insert(space.Key(p));
      study.trials.push_back({p, TrialStatus::kRunning, std::nullopt});
      running.push_back(std::get<double>(p[0]));
    }
    const double mean = std::accumulate(running.begin(), running.end(), 0.0) / running.size();
    double var = 0;
    for (double x : running) var += (x - mean) * (x - mean);
    return var / running.size();
  };
  EXPECT_GT(spread(true), spread(false));
}

// As Optuna 3.1: pruned trials count toward the start-up trials and rank after every completed
// trial, those that got further first and, at the same step, by their last value.
TEST(TpeTest, PrunedTrialsRankByHowFarTheyGotAfterCompletedOnes) {
  const SearchSpace space({{.name = "x", .kind = ParameterKind::kDouble, .min = 0, .max = 1}});
  TestStudy study;
  auto add = [&](TrialStatus status, std::optional<double> value, int64_t step) {
    const Point point{0.01 * static_cast<double>(study.trials.size())};
    study.keys.insert(space.Key(point));
    study.trials.push_back({point, status, value, step});
  };
  for (int t = 0; t < 9; ++t) add(TrialStatus::kPruned, 0.1 * t, 10);  // 0: the best value.
  add(TrialStatus::kPruned, 5.0, 30);                                  // 9: the furthest.
  add(TrialStatus::kFailed, std::nullopt, 0);
  add(TrialStatus::kRunning, std::nullopt, 0);
  TpeSearch tpe(space, 3, true, {.constant_liar = true});
  RandomSearch random(space, 3);
  // Ten pruned trials: past start-up; ceil(0.1 * 10) = 1 below, the one that got furthest.
  std::optional<TpeSearch::Split> split = tpe.SplitTrials(study.history());
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, std::vector<int>({9}));
  EXPECT_EQ(split->above.size(), 11u);  // The other pruned, the failed and the running trial.
  EXPECT_NE(**tpe.Suggest(study.history()), **random.Suggest(study.history()));

  // A completed trial, however poor, ranks before every pruned one; then the furthest.
  for (int t = 0; t < 10; ++t) add(TrialStatus::kPruned, 0.0, 10);
  add(TrialStatus::kCompleted, 100.0, 0);  // 22.
  split = tpe.SplitTrials(study.history());
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->below, std::vector<int>({0, 9, 22}));  // ceil(0.1 * 21) = 3: and then the
                                                          // best at step 10, the first of equals.
}

TEST(TpeTest, CountableSpaceIsExhaustedWithoutDuplicates) {
  SearchSpace space({{.name = "n", .kind = ParameterKind::kInt, .min = 0, .max = 4},
                     {.name = "c", .kind = ParameterKind::kCategorical, .categories = {"a", "b"}}});
  TpeSearch tpe(space, 2, true, {.n_startup_trials = 3});
  TestStudy study;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<std::optional<Point>> next = tpe.Suggest(study.history());
    ASSERT_TRUE(next.ok());
    if (!next->has_value()) break;
    ASSERT_TRUE(study.keys.insert(space.Key(**next)).second) << "duplicate at " << i;
    study.trials.push_back({**next, TrialStatus::kCompleted,
                            static_cast<double>(std::get<int64_t>((**next)[0]))});
  }
  EXPECT_EQ(study.trials.size(), 10u);
}

TEST(TpeTest, BeatsRandomSearchOnBenchmarkFunctions) {
  for (const auto& [function, d] : std::vector<std::pair<std::string, int>>{
           {"branin", 2}, {"hartmann6", 6}, {"styblinski_tang", 4}}) {
    const double tpe = MedianBest(Algorithm::kTpe, function, d, 7, 80);
    const double random = MedianBest(Algorithm::kRandom, function, d, 7, 80);
    EXPECT_LT(tpe, random) << function;
  }
}

}  // namespace
}  // namespace dhpt::optimizer
