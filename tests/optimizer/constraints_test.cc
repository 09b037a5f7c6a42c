// Constraints in the single-objective optimisers (TPE's ranking is in motpe_test.cc).

#include <gtest/gtest.h>

#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/hill_climbing.h"
#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

TEST(ConstraintsTest, HillClimbingNeverTakesAnInfeasibleIncumbent) {
  HillClimbing climber(LineSpace(1), 1, true, {.patience = 10});
  TestStudy study;
  auto add = [&](double value, double violation) {
    study.trials.push_back({.point = {0.1 * study.trials.size()},
                            .status = TrialStatus::kCompleted,
                            .value = value,
                            .violation = violation});
  };
  add(1.0, 0.5);  // Infeasible: not the first incumbent.
  add(5.0, 0);
  add(0.1, 2.0);  // Better objective but infeasible: a miss.
  const HillClimbing::Climb climb = climber.Replay(study.history());
  EXPECT_EQ(climb.incumbent, 1u);
  EXPECT_EQ(climb.misses, 1);
}

// Minimise x on [0, 1] subject to x >= 0.6: BO should end near 0.6 and mostly feasible,
// although the infeasible trials have the better objectives.
TEST(ConstraintsTest, BayesianOptimizationHeadsForTheFeasibleOptimum) {
  const SearchSpace space = LineSpace(1);
  BayesianOptimization bo(space, 3, true, {});
  TestStudy study;
  for (int t = 0; t < 30; ++t) {
    const Point point = **bo.Suggest(study.history());
    const double x = std::get<double>(point[0]);
    study.keys.insert(space.Key(point));
    study.trials.push_back({.point = point,
                            .status = TrialStatus::kCompleted,
                            .value = x,
                            .violation = std::max(0.0, 0.6 - x)});
  }
  int feasible_late = 0;
  double best_feasible = 1;
  for (int t = 0; t < 30; ++t) {
    const TrialRecord& trial = study.trials[t];
    if (trial.violation == 0) best_feasible = std::min(best_feasible, *trial.value);
    if (t >= 20) feasible_late += trial.violation == 0;
  }
  EXPECT_GE(feasible_late, 5);
  EXPECT_LT(best_feasible, 0.65);
}

// With no feasible trial yet, BO minimises the violation: the next point after a start where
// everything is infeasible lies closer to the feasible region.
TEST(ConstraintsTest, BayesianOptimizationSeeksFeasibilityFirst) {
  const SearchSpace space = LineSpace(1);
  BayesianOptimization bo(space, 5, true, {.n_startup_trials = 5});
  TestStudy study;
  for (double x : {0.0, 0.1, 0.2, 0.3, 0.4}) {
    study.keys.insert(space.Key({x}));
    // Smaller x: better objective, but feasible only from 0.8.
    study.trials.push_back(
        {.point = {x}, .status = TrialStatus::kCompleted, .value = x, .violation = 0.8 - x});
  }
  const double next = std::get<double>((**bo.Suggest(study.history()))[0]);
  EXPECT_GT(next, 0.4);
}

}  // namespace
}  // namespace dhpt::optimizer
