#include "services/study/early_stopping.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace dhpt::study {
namespace {

// A curve reporting `values` at steps step, 2 step, 3 step, ...
TrialCurve Curve(std::vector<double> values, bool completed, int64_t step = 1) {
  TrialCurve curve;
  curve.completed = completed;
  for (size_t i = 0; i < values.size(); ++i) {
    curve.values.push_back({static_cast<int64_t>(i + 1) * step, values[i]});
  }
  return curve;
}

std::vector<const TrialCurve*> Pointers(const std::vector<TrialCurve>& curves) {
  std::vector<const TrialCurve*> out;
  for (const TrialCurve& curve : curves) out.push_back(&curve);
  return out;
}

TEST(EarlyStoppingTest, MedianStopsATrialWorseThanTheMedianOfCompletedOnesAtTheSameStep) {
  // Minimising: completed trials are at 1, 2 and 3 at step 2; median 2.
  const std::vector<TrialCurve> completed = {Curve({5, 1}, true), Curve({5, 2}, true),
                                             Curve({5, 3}, true)};
  const PercentileRule median{.percentile = 50, .n_startup_trials = 3};
  EXPECT_TRUE(ShouldStop(median, false, Curve({5, 2.5}, false), Pointers(completed)));
  EXPECT_FALSE(ShouldStop(median, false, Curve({5, 1.5}, false), Pointers(completed)));
  // Its best so far counts, not its latest value.
  EXPECT_FALSE(ShouldStop(median, false, Curve({1.5, 9}, false), Pointers(completed)));
  // Maximising, the same values the other way round.
  EXPECT_FALSE(ShouldStop(median, true, Curve({0, 2.5}, false), Pointers(completed)));
  EXPECT_TRUE(ShouldStop(median, true, Curve({0, 1.5}, false), Pointers(completed)));
}

TEST(EarlyStoppingTest, MedianWaitsForStartupTrialsWarmupAndItsInterval) {
  const std::vector<TrialCurve> completed = {Curve({1, 1, 1, 1}, true), Curve({1, 1, 1, 1}, true)};
  const TrialCurve bad = Curve({9, 9, 9, 9}, false);
  EXPECT_FALSE(ShouldStop(PercentileRule{.n_startup_trials = 3}, false, bad, Pointers(completed)));
  EXPECT_TRUE(ShouldStop(PercentileRule{.n_startup_trials = 2}, false, bad, Pointers(completed)));
  EXPECT_FALSE(ShouldStop(PercentileRule{.n_startup_trials = 2, .n_warmup_steps = 5}, false, bad,
                          Pointers(completed)));
  // Intervals of 2 steps from step 0: steps 1 | 2, 3 | 4, 5: step 4 opens one, step 3 does not.
  const PercentileRule every_other{.n_startup_trials = 2, .interval_steps = 2};
  EXPECT_TRUE(ShouldStop(every_other, false, bad, Pointers(completed)));
  EXPECT_FALSE(ShouldStop(every_other, false, Curve({9, 9, 9}, false), Pointers(completed)));
  // Running trials do not count.
  const std::vector<TrialCurve> running = {Curve({1, 1, 1, 1}, false), Curve({1, 1, 1, 1}, false)};
  EXPECT_FALSE(ShouldStop(PercentileRule{.n_startup_trials = 0}, false, bad, Pointers(running)));
  // Past the end of every completed curve, their last values count (steps need not line up).
  EXPECT_TRUE(ShouldStop(PercentileRule{.n_startup_trials = 0}, false, Curve({9, 9, 9, 9, 9}, false),
                         Pointers(completed)));
}

TEST(EarlyStoppingTest, PercentileInterpolatesAndNanStops) {
  const std::vector<TrialCurve> completed = {Curve({0}, true), Curve({10}, true)};
  const PercentileRule quarter{.percentile = 25, .n_startup_trials = 0};
  // The 25th percentile of {0, 10} is 2.5.
  EXPECT_TRUE(ShouldStop(quarter, false, Curve({2.6}, false), Pointers(completed)));
  EXPECT_FALSE(ShouldStop(quarter, false, Curve({2.4}, false), Pointers(completed)));
  EXPECT_TRUE(ShouldStop(quarter, false, Curve({std::nan("")}, false), Pointers(completed)));
}

TEST(EarlyStoppingTest, NanIsJudgedOnlyOnceStartupAndWarmupArePast) {
  // As Optuna's MedianPruner: a NaN trial is not stopped before the rule would judge anything.
  const std::vector<TrialCurve> completed = {Curve({0, 0, 0}, true)};
  const TrialCurve nan = Curve({std::nan("")}, false);
  EXPECT_FALSE(ShouldStop(PercentileRule{.n_startup_trials = 2}, false, nan, Pointers(completed)));
  EXPECT_FALSE(ShouldStop(PercentileRule{.n_startup_trials = 1, .n_warmup_steps = 2}, false, nan,
                          Pointers(completed)));
  EXPECT_TRUE(ShouldStop(PercentileRule{.n_startup_trials = 1}, false, nan, Pointers(completed)));
}

TEST(EarlyStoppingTest, MedianComparesWithWhatCompletedTrialsShowedAsOfTheStep) {
  // Workers send at most one report per 100 ms, so steps need not line up: a completed trial
  // that reported steps 10 and 30 showed its step-10 value at step 20.
  TrialCurve completed;
  completed.completed = true;
  completed.values = {{10, 0.5}, {30, 0.9}};
  TrialCurve running;
  running.values = {{20, 0.4}};
  const PercentileRule median{.n_startup_trials = 1};
  EXPECT_TRUE(ShouldStop(median, /*maximize=*/true, running, {&completed}));
  running.values = {{20, 0.6}};
  EXPECT_FALSE(ShouldStop(median, true, running, {&completed}));
  // Before a trial's first report there is nothing to compare with.
  running.values = {{5, 0.0}};
  EXPECT_FALSE(ShouldStop(median, true, running, {&completed}));
}

TEST(EarlyStoppingTest, MedianDoesNotJudgeAStepAtWhichItWouldStopTheBestCompletedTrial) {
  // Maximising. Two fast starters end at 0.7; the slow starter ends best (0.9) but was below
  // the median at steps 1 and 2: curves cross there (XGBoost on diabetes, a small learning rate).
  const std::vector<TrialCurve> completed = {Curve({0.5, 0.6, 0.7}, true),
                                             Curve({0.5, 0.6, 0.7}, true),
                                             Curve({0.1, 0.3, 0.9}, true)};
  const PercentileRule median{.n_startup_trials = 3};
  // Below the median (0.5) at step 1 and (0.6) at step 2, but so was the best: not judged.
  EXPECT_FALSE(ShouldStop(median, true, Curve({0.2}, false), Pointers(completed)));
  EXPECT_FALSE(ShouldStop(median, true, Curve({0.2, 0.3}, false), Pointers(completed)));
  // At step 3 the best is above the median (0.7): the rule judges again.
  EXPECT_TRUE(ShouldStop(median, true, Curve({0.2, 0.3, 0.4}, false), Pointers(completed)));
  // Where the best completed trial led from the start, step 1 is judged as before.
  const std::vector<TrialCurve> parted = {Curve({0.5, 0.6, 0.7}, true),
                                          Curve({0.5, 0.6, 0.7}, true),
                                          Curve({0.6, 0.8, 0.9}, true)};
  EXPECT_TRUE(ShouldStop(median, true, Curve({0.2}, false), Pointers(parted)));
  // Minimising, the same with the percentile rule: the best finisher (1) was worse than the
  // 25th percentile at step 1 (its value 9 of {2, 2, 9}).
  const std::vector<TrialCurve> falling = {Curve({2, 2}, true), Curve({2, 2}, true),
                                           Curve({9, 1}, true)};
  const PercentileRule quarter{.percentile = 25, .n_startup_trials = 3};
  EXPECT_FALSE(ShouldStop(quarter, false, Curve({5}, false), Pointers(falling)));
  EXPECT_TRUE(ShouldStop(quarter, false, Curve({5, 5}, false), Pointers(falling)));
}

TEST(EarlyStoppingTest, MedianLetsATrialGoOnWhileItsRecentClimbCouldStillReachTheBest) {
  // Maximising, curves of 10 steps. The fast starters level off at 0.5; the best completed
  // trial ends at 0.6. At step 3 the median is 0.5 (of 0.5, 0.5, 0.6).
  const std::vector<TrialCurve> completed = {
      Curve({0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, true),
      Curve({0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, true),
      Curve({0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, true)};
  const PercentileRule median{.n_startup_trials = 3};
  // A slow starter climbing 0.1 a step over its last two reports: 0.1 + 0.1 x 7 steps left
  // reaches 0.8, past the best's 0.6, so it goes on though it is below the median.
  EXPECT_FALSE(ShouldStop(median, true, Curve({-0.1, 0.0, 0.1}, false), Pointers(completed)));
  // Climbing 0.02 a step it would end at 0.24: it cannot catch up, so it is stopped.
  EXPECT_TRUE(ShouldStop(median, true, Curve({0.06, 0.08, 0.1}, false), Pointers(completed)));
  // The climb is over the last two reports, not since the first: a trial that rose steeply
  // and then levelled off (0.01 a step lately) is stopped.
  EXPECT_TRUE(ShouldStop(median, true, Curve({-0.9, 0.0, 0.38, 0.39, 0.4}, false),
                         Pointers(completed)));
  // At its second report one step counts: 0.2 a step from 0.0 reaches 0.0 + 0.2 x 8.
  EXPECT_FALSE(ShouldStop(median, true, Curve({-0.2, 0.0}, false), Pointers(completed)));
  // At the end of the completed curves nothing is left to climb: judged as before.
  EXPECT_TRUE(ShouldStop(median, true,
                         Curve({-0.8, -0.6, -0.4, -0.2, 0.0, 0.1, 0.2, 0.3, 0.4, 0.45}, false),
                         Pointers(completed)));
  // Minimising, the same the other way round: falling 1 a step from 9, 7 steps left, reaches
  // 2 against the best's final 4; falling 0.1 a step it does not.
  const std::vector<TrialCurve> falling = {
      Curve({5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, true), Curve({5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, true),
      Curve({4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, true)};
  EXPECT_FALSE(ShouldStop(median, false, Curve({11, 10, 9}, false), Pointers(falling)));
  EXPECT_TRUE(ShouldStop(median, false, Curve({9.2, 9.1, 9}, false), Pointers(falling)));
}

TEST(EarlyStoppingTest, OnlyMeasuredReportsAtForwardStepsAreJudged) {
  EXPECT_TRUE(IsJudgedReport(std::nullopt, 0, 0.5));
  EXPECT_TRUE(IsJudgedReport(10, 20, -std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(IsJudgedReport(std::nullopt, 10, std::nan("")));
  EXPECT_FALSE(IsJudgedReport(20, 20, 0.5));  // Repeated.
  EXPECT_FALSE(IsJudgedReport(20, 10, 0.5));  // Backwards.
  EXPECT_FALSE(IsJudgedReport(std::nullopt, -1, 0.5));
  EXPECT_TRUE(IsJudgedReport(std::nullopt, kMaxProgressStep, 0.5));
  EXPECT_FALSE(IsJudgedReport(std::nullopt, kMaxProgressStep + 1, 0.5));
  EXPECT_FALSE(IsJudgedReport(std::nullopt, std::numeric_limits<int64_t>::max(), 0.5));
}

TEST(EarlyStoppingTest, AshaKeepsTheBestFractionAtEachRungAsTrialsReachIt) {
  // Rungs at steps 1, 2, 4, 8 (min_resource 1, factor 2); maximising.
  const AshaRule asha{.min_resource = 1, .reduction_factor = 2};
  // The first trial at a rung is the best there: it goes on.
  EXPECT_FALSE(ShouldStop(asha, true, Curve({0.5}, false), {}));
  // Four trials reached rung 0 with 0.9, 0.8, 0.2 (and this one): the best two go on.
  const std::vector<TrialCurve> others = {Curve({0.9, 0.9}, false), Curve({0.8}, true),
                                          Curve({0.2}, false)};
  EXPECT_TRUE(ShouldStop(asha, true, Curve({0.5}, false), Pointers(others)));
  EXPECT_FALSE(ShouldStop(asha, true, Curve({0.85}, false), Pointers(others)));
  // Between rungs nothing is decided: step 3 is past rung 2 (step 2) already judged.
  EXPECT_FALSE(ShouldStop(asha, true, Curve({0.95, 0.95, 0.0}, false), Pointers(others)));
  // Minimising, the order flips.
  EXPECT_FALSE(ShouldStop(asha, false, Curve({0.5}, false), Pointers(others)));
}

TEST(EarlyStoppingTest, AshaRungsFollowMinResourceAndTheEarlyStoppingRate) {
  // min_resource 10, factor 3, rate 1: rungs at 30, 90, 270. Reports every 10 steps.
  const AshaRule asha{.min_resource = 10, .reduction_factor = 3, .min_early_stopping_rate = 1};
  const std::vector<TrialCurve> others = {Curve({0.9, 0.9, 0.9}, true, 10),
                                          Curve({0.8, 0.8, 0.8}, true, 10),
                                          Curve({0.7, 0.7, 0.7}, true, 10)};
  EXPECT_FALSE(ShouldStop(asha, true, Curve({0.1, 0.1}, false, 10), Pointers(others)));  // Step 20.
  EXPECT_TRUE(ShouldStop(asha, true, Curve({0.1, 0.1, 0.1}, false, 10), Pointers(others)));
  // Sparse reports passing a rung are judged on the first value at or past it.
  EXPECT_TRUE(ShouldStop(asha, true, Curve({0.1}, false, 50), Pointers(others)));
}

TEST(HyperbandTest, BracketsMatchThePapersTable) {
  // Li et al. (2018), Table 1: R = 81, eta = 3, five brackets s = 4 .. 0 (our b = 0 .. 4).
  const std::vector<HyperbandBracket> brackets =
      HyperbandBrackets(HyperbandRule{.min_resource = 1, .max_resource = 81, .reduction_factor = 3});
  ASSERT_EQ(brackets.size(), 5u);
  const std::vector<std::vector<int64_t>> n = {
      {81, 27, 9, 3, 1}, {34, 11, 3, 1}, {15, 5, 1}, {8, 2}, {5}};
  const std::vector<std::vector<int64_t>> r = {
      {1, 3, 9, 27, 81}, {3, 9, 27, 81}, {9, 27, 81}, {27, 81}, {81}};
  for (size_t b = 0; b < brackets.size(); ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(brackets[b].min_early_stopping_rate, static_cast<int>(b));
    EXPECT_EQ(brackets[b].budget, n[b][0]);
    EXPECT_EQ(brackets[b].trials, n[b]);
    EXPECT_EQ(brackets[b].resources, r[b]);
  }
}

TEST(HyperbandTest, BracketsOfAMaxResourceBetweenPowers) {
  // Optuna's example setting: min 20, max 1000, eta 3: n = floor(log3(50)) + 1 = 4 brackets,
  // rungs 20, 60, 180, 540 (1620 is past the end); budgets ceil(4 * 3^s / (s + 1)).
  const std::vector<HyperbandBracket> brackets = HyperbandBrackets(
      HyperbandRule{.min_resource = 20, .max_resource = 1000, .reduction_factor = 3});
  ASSERT_EQ(brackets.size(), 4u);
  EXPECT_EQ(brackets[0].budget, 27);
  EXPECT_EQ(brackets[1].budget, 12);
  EXPECT_EQ(brackets[2].budget, 6);
  EXPECT_EQ(brackets[3].budget, 4);
  EXPECT_EQ(brackets[0].resources, (std::vector<int64_t>{20, 60, 180, 540}));
  EXPECT_EQ(brackets[3].resources, (std::vector<int64_t>{540}));
  // One bracket when min and max are within a factor eta.
  EXPECT_EQ(HyperbandBrackets(HyperbandRule{.min_resource = 10, .max_resource = 29}).size(), 1u);
}

TEST(HyperbandTest, TrialsFallInBracketsInProportionToTheirBudgets) {
  const HyperbandRule rule{.min_resource = 1, .max_resource = 81, .reduction_factor = 3, .seed = 7};
  std::vector<int> count(5, 0);
  constexpr int kTrials = 14'300;  // 100 times the budgets' sum, 143.
  for (int64_t number = 0; number < kTrials; ++number) {
    const int bracket = HyperbandBracketOf(rule, number);
    ASSERT_GE(bracket, 0);
    ASSERT_LT(bracket, 5);
    ++count[bracket];
    ASSERT_EQ(HyperbandBracketOf(rule, number), bracket);  // A function of the number.
  }
  const std::vector<int> expected = {8100, 3400, 1500, 800, 500};
  for (size_t b = 0; b < 5; ++b) {
    EXPECT_NEAR(count[b], expected[b], 4 * std::sqrt(expected[b])) << "bracket " << b;
  }
  // Another seed, another assignment.
  HyperbandRule other = rule;
  other.seed = 8;
  int differ = 0;
  for (int64_t number = 0; number < 100; ++number) {
    differ += HyperbandBracketOf(rule, number) != HyperbandBracketOf(other, number);
  }
  EXPECT_GT(differ, 20);
}

// A trial numbered so that it falls in `bracket`.
TrialCurve InBracket(const HyperbandRule& rule, int bracket, TrialCurve curve, int64_t& next) {
  while (HyperbandBracketOf(rule, next) != bracket) ++next;
  curve.number = next++;
  return curve;
}

TEST(HyperbandTest, ATrialIsJudgedOnlyAgainstItsOwnBracketAndNotAtMaxResource) {
  // min 1, max 9, eta 3: bracket 0 rungs 1, 3 (9 is the end); bracket 1 rung 3; bracket 2 none.
  const HyperbandRule rule{.min_resource = 1, .max_resource = 9, .reduction_factor = 3};
  int64_t next = 0;
  // Bracket 1 holds a great trial at step 3; bracket 0 only poor ones; bracket 2 one that
  // beats everything at step 9.
  const std::vector<TrialCurve> others = {
      InBracket(rule, 1, Curve({0.9, 0.9, 0.9}, true), next),
      InBracket(rule, 0, Curve({0.1, 0.1, 0.1}, true), next),
      InBracket(rule, 0, Curve({0.2, 0.2, 0.2}, true), next),
      InBracket(rule, 2, Curve({1, 1, 1, 1, 1, 1, 1, 1, 1}, true), next)};
  // In bracket 0, 0.5 at rung 1 is the best of its bracket: it goes on; at rung 3 too.
  const TrialCurve zero = InBracket(rule, 0, Curve({0.5}, false), next);
  EXPECT_FALSE(ShouldStop(rule, true, zero, Pointers(others)));
  TrialCurve zero_at_3 = zero;
  zero_at_3.values = Curve({0.5, 0.5, 0.5}, false).values;
  EXPECT_FALSE(ShouldStop(rule, true, zero_at_3, Pointers(others)));
  // In bracket 1 the same values lose to the 0.9 at rung 3; step 1 is no rung of bracket 1.
  TrialCurve one = InBracket(rule, 1, Curve({0.5}, false), next);
  EXPECT_FALSE(ShouldStop(rule, true, one, Pointers(others)));
  one.values = zero_at_3.values;
  EXPECT_TRUE(ShouldStop(rule, true, one, Pointers(others)));
  // Bracket 2's first rung would be 9, max_resource: never judged, the trial is done there
  // (it would lose to the other bracket-2 trial there).
  const TrialCurve two = InBracket(rule, 2, Curve({0, 0, 0, 0, 0, 0, 0, 0, 0}, false), next);
  EXPECT_FALSE(ShouldStop(rule, true, two, Pointers(others)));
  // The optimiser learns for trial `two` from the trials of bracket 2 (and, History adds, from
  // every completed trial).
  const std::optional<std::vector<bool>> learn = LearningFilter(rule, two.number);
  ASSERT_TRUE(learn.has_value());
  ASSERT_EQ(learn->size(), static_cast<size_t>(two.number));
  for (int64_t t = 0; t < two.number; ++t) {
    EXPECT_EQ((*learn)[t], HyperbandBracketOf(rule, t) == 2) << t;
  }
  EXPECT_EQ(LearningFilter(AshaRule{}, two.number), std::nullopt);
}

TEST(EarlyStoppingTest, WithinReachOfBestComparesWithTheBestCurveAtTheStoppingStep) {
  const TrialCurve best = Curve({0.5, 0.6, 0.9}, true, 10);
  EXPECT_TRUE(WithinReachOfBest(true, Curve({0.5, 0.6}, false, 10), best));
  EXPECT_TRUE(WithinReachOfBest(true, Curve({0.7}, false, 15), best));  // Best showed 0.5.
  EXPECT_FALSE(WithinReachOfBest(true, Curve({0.5, 0.59}, false, 10), best));
  EXPECT_FALSE(WithinReachOfBest(false, Curve({0.5, 0.61}, false, 10), best));
  EXPECT_FALSE(WithinReachOfBest(true, Curve({1.0}, false, 5), best));  // Best showed nothing.
}

// The scheduler keeps only JudgedPoints of a trial that ended without completing: every
// decision of every rule over random studies (uneven steps, NaN reports, pruned and completed
// trials mixed) is the same with those points as with the whole curves, and so is within reach.
TEST(EarlyStoppingTest, JudgedPointsDecideAsTheWholeCurveDoes) {
  std::mt19937 random(34);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  std::vector<EarlyStoppingRule> rules;
  for (int factor = 2; factor <= 4; ++factor) {
    rules.push_back(AshaRule{.min_resource = factor - 1, .reduction_factor = factor,
                             .min_early_stopping_rate = factor % 2});
    rules.push_back(HyperbandRule{.min_resource = factor - 1, .max_resource = 9 * factor,
                                  .reduction_factor = factor, .seed = static_cast<uint64_t>(factor)});
    rules.push_back(PercentileRule{.percentile = 25.0 * factor, .n_startup_trials = factor - 1,
                                   .n_warmup_steps = factor - 2, .interval_steps = factor - 1});
  }
  size_t kept = 0, whole = 0;
  int stops = 0, decisions = 0;
  for (int study = 0; study < 60; ++study) {
    std::vector<TrialCurve> curves(static_cast<size_t>(uniform(2, 12)));
    for (size_t t = 0; t < curves.size(); ++t) {
      curves[t].number = static_cast<int64_t>(t);
      curves[t].completed = uniform(0, 2) == 0;
      int64_t step = uniform(0, 2);
      for (int n = uniform(1, 40); n > 0; --n, step += uniform(1, 3)) {
        curves[t].values.push_back(
            {step, uniform(0, 30) == 0 ? std::nan("") : uniform(0, 1000) / 1000.0});
      }
    }
    std::vector<TrialCurve> judged;
    for (const TrialCurve& curve : curves) judged.push_back(curve);
    for (const EarlyStoppingRule& rule : rules) {
      for (size_t t = 0; t < curves.size(); ++t) {
        if (!curves[t].completed) judged[t] = JudgedPoints(rule, curves[t]);
        kept += judged[t].values.size();
        whole += curves[t].values.size();
      }
      const bool maximize = study % 2 == 0;
      for (size_t t = 0; t < curves.size(); ++t) {
        // Trial t running, at each of its reports in turn, against every other trial.
        std::vector<const TrialCurve*> full_others, judged_others;
        for (size_t o = 0; o < curves.size(); ++o) {
          if (o == t) continue;
          full_others.push_back(&curves[o]);
          judged_others.push_back(&judged[o]);
        }
        TrialCurve running{.values = {}, .completed = false, .number = curves[t].number};
        for (const IntermediateValue& value : curves[t].values) {
          running.values.push_back(value);
          const bool stop = ShouldStop(rule, maximize, running, full_others);
          ASSERT_EQ(ShouldStop(rule, maximize, running, judged_others), stop)
              << "study " << study << " trial " << t << " step " << value.step;
          stops += stop;
          ++decisions;
        }
        for (size_t best = 0; best < curves.size(); ++best) {
          if (!curves[best].completed || curves[t].completed) continue;
          EXPECT_EQ(WithinReachOfBest(maximize, judged[t], curves[best]),
                    WithinReachOfBest(maximize, curves[t], curves[best]));
        }
      }
    }
  }
  // The data judged both ways, and fewer points kept.
  EXPECT_GT(stops, decisions / 20);
  EXPECT_LT(stops, decisions);
  EXPECT_LT(kept * 2, whole);
}

TEST(EarlyStoppingTest, NoRuleNeverStops) {
  EXPECT_FALSE(ShouldStop(std::monostate(), false, Curve({std::nan("")}, false), {}));
}

}  // namespace
}  // namespace dhpt::study
