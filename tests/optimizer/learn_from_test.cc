// History::learn_from (Hyperband: the next trial's bracket), alike for the model-based
// optimisers that honour it: TPE and Bayesian optimisation.

#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/tpe.h"
#include "tests/optimizer/optimizer_test_util.h"

namespace dhpt::optimizer {
namespace {

template <typename Optimizer>
class LearnFromTest : public ::testing::Test {
 protected:
  // 40 trials on a line: those near x = 0.9 have the best values, those near 0.1 are worse;
  // learn_from holds only the ones near 0.1. Returns the suggestion from every trial and the
  // one with learn_from.
  static std::pair<double, double> SuggestionsWithAndWithoutFilter(TrialStatus near_status,
                                                                    TrialStatus far_status) {
    const SearchSpace space = LineSpace(1);
    TestStudy study;
    std::vector<bool> learn;
    for (int t = 0; t < 40; ++t) {
      const bool near = t % 2 == 0;
      const double x = near ? 0.05 + 0.005 * t : 0.8 + 0.004 * t;
      TrialRecord record{{x}, near ? near_status : far_status,
                         near ? 1.0 + 0.01 * t : 0.0 + 0.001 * t};
      record.last_step = 10;  // Pruned ones: all at the same rung, ranked by value.
      study.trials.push_back(record);
      study.keys.insert(space.Key({x}));
      learn.push_back(near);
    }
    Optimizer all(space, 3, /*minimize=*/true, {});
    const std::optional<Point> everything = *all.Suggest(study.history());
    Optimizer bracket(space, 3, /*minimize=*/true, {});
    const History history{study.trials, study.keys, &learn};
    const std::optional<Point> learnt = *bracket.Suggest(history);
    EXPECT_TRUE(everything.has_value() && learnt.has_value());
    return {everything ? std::get<double>((*everything)[0]) : -1,
            learnt ? std::get<double>((*learnt)[0]) : -1};
  }
};

using ModelBasedOptimizers = ::testing::Types<TpeSearch, BayesianOptimization>;
TYPED_TEST_SUITE(LearnFromTest, ModelBasedOptimizers);

// Pruned trials of other brackets stopped at other rungs: they are not learnt from.
TYPED_TEST(LearnFromTest, LearnsOnlyFromThePrunedTrialsItIsGiven) {
  const auto [everything, learnt] =
      this->SuggestionsWithAndWithoutFilter(TrialStatus::kPruned, TrialStatus::kPruned);
  EXPECT_GT(everything, 0.5);  // Heads for the best, near 0.9.
  EXPECT_LT(learnt, 0.5);      // Sees only the trials near 0.1.
}

// A completed trial's value is the full objective whatever its bracket: learnt from, so that
// a bracket's suggestions do not start from scratch (were: only the bracket's own trials).
TYPED_TEST(LearnFromTest, LearnsFromCompletedTrialsOfEveryBracket) {
  const auto [everything, learnt] =
      this->SuggestionsWithAndWithoutFilter(TrialStatus::kCompleted, TrialStatus::kCompleted);
  EXPECT_GT(everything, 0.5);
  EXPECT_GT(learnt, 0.5);  // The completed trials near 0.9 count, outside the bracket too.
}

}  // namespace
}  // namespace dhpt::optimizer
