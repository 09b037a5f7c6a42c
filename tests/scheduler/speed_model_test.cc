#include "services/scheduler/speed_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace dhpt::scheduler {
namespace {

TEST(SpeedModelTest, NodeClassIsTheBoardLabelElseTheNodeLabelElseTheWorkerId) {
  v1::WorkerCapabilities worker;
  EXPECT_EQ(NodeClass(worker, "w1"), "w1");
  (*worker.mutable_labels())["node"] = "rack-3";
  EXPECT_EQ(NodeClass(worker, "w1"), "rack-3");
  (*worker.mutable_labels())["dhpt.io/board"] = "nano";
  EXPECT_EQ(NodeClass(worker, "w1"), "nano");
  (*worker.mutable_labels())["board"] = "pi4";
  EXPECT_EQ(NodeClass(worker, "w1"), "pi4");
}

TEST(SpeedModelTest, WorkUnitsAreRoundsTimesTrainingRows) {
  v1::Model model;
  model.set_kind(v1::Model::XGBOOST);
  v1::Dataset dataset;
  dataset.mutable_friedman1()->set_samples(1000);  // 800 training rows at the default split.
  google::protobuf::Map<std::string, v1::ParameterValue> params;
  EXPECT_DOUBLE_EQ(TrialWorkUnits(model, params, dataset), 100 * 800);  // The default rounds.
  params["n_estimators"].set_int_value(50);
  EXPECT_DOUBLE_EQ(TrialWorkUnits(model, params, dataset), 50 * 800);
  (*model.mutable_fixed())["num_boost_round"].set_number_value(20);  // Named first: it wins.
  EXPECT_DOUBLE_EQ(TrialWorkUnits(model, params, dataset), 20 * 800);
  dataset.set_validation_fraction(0.5);
  EXPECT_DOUBLE_EQ(TrialWorkUnits(model, params, dataset), 20 * 500);
  model.set_kind(v1::Model::COMMAND);
  EXPECT_DOUBLE_EQ(TrialWorkUnits(model, params, dataset), 1);
}

TEST(SpeedModelTest, LearnsEachClassAndKindRelativeToTheClusterMedian) {
  SpeedModel speeds;
  EXPECT_FALSE(speeds.RelativeSpeed("orin", v1::Model::XGBOOST));
  EXPECT_FALSE(speeds.OverallSpeed("orin"));
  // An Orin runs 1000 units in 2 s, a Pi 4 in 10 s, a Pi 5 in 4 s.
  for (int i = 0; i < 3; ++i) {
    speeds.Record("orin", v1::Model::XGBOOST, 1000, absl::Seconds(2));
    speeds.Record("pi4", v1::Model::XGBOOST, 500, absl::Seconds(5));
    speeds.Record("pi5", v1::Model::XGBOOST, 2000, absl::Seconds(8));
  }
  EXPECT_NEAR(*speeds.SecondsPerUnit("orin", v1::Model::XGBOOST), 0.002, 1e-12);
  EXPECT_NEAR(absl::ToDoubleSeconds(*speeds.Predict("pi4", v1::Model::XGBOOST, 300)), 3, 1e-9);
  // The median class is the Pi 5: the Orin is twice as fast, the Pi 4 2.5 times slower.
  EXPECT_NEAR(*speeds.RelativeSpeed("pi5", v1::Model::XGBOOST), 1, 1e-9);
  EXPECT_NEAR(*speeds.RelativeSpeed("orin", v1::Model::XGBOOST), 2, 1e-9);
  EXPECT_NEAR(*speeds.RelativeSpeed("pi4", v1::Model::XGBOOST), 0.4, 1e-9);
  // Kinds are learnt apart: the Orin's XGBoost speed says nothing of its AutoEncoders.
  EXPECT_FALSE(speeds.Predict("orin", v1::Model::AUTOENCODER, 1));
  EXPECT_NEAR(*speeds.OverallSpeed("orin"), 2, 1e-9);
  EXPECT_EQ(speeds.Estimates().size(), 3u);
  ASSERT_EQ(speeds.EstimatesOf("pi4").size(), 1u);
  EXPECT_NEAR(speeds.EstimatesOf("pi4")[0].relative_speed, 0.4, 1e-9);
}

TEST(SpeedModelTest, OneOutlierDoesNotMoveTheEstimateAndOldTrialsAgeOut) {
  SpeedModel speeds;
  for (int i = 0; i < 5; ++i) speeds.Record("pi4", v1::Model::RANDOM_FOREST, 10, absl::Seconds(10));
  // A trial that waited out a frozen node: a median ignores it, a mean would not.
  speeds.Record("pi4", v1::Model::RANDOM_FOREST, 10, absl::Seconds(600));
  EXPECT_NEAR(*speeds.SecondsPerUnit("pi4", v1::Model::RANDOM_FOREST), 1, 1e-9);
  // The board got faster (a heat sink): within a window of trials the estimate follows.
  for (int i = 0; i < kSpeedWindow; ++i) {
    speeds.Record("pi4", v1::Model::RANDOM_FOREST, 10, absl::Seconds(5));
  }
  EXPECT_NEAR(*speeds.SecondsPerUnit("pi4", v1::Model::RANDOM_FOREST), 0.5, 1e-9);
  // Nothing to learn from an empty trial or a clock that went back.
  speeds.Record("pi4", v1::Model::RANDOM_FOREST, 0, absl::Seconds(5));
  speeds.Record("pi4", v1::Model::RANDOM_FOREST, 10, absl::Seconds(-1));
  EXPECT_NEAR(*speeds.SecondsPerUnit("pi4", v1::Model::RANDOM_FOREST), 0.5, 1e-9);
}

TEST(SpeedModelTest, ClassesBeyondTheLimitAreNotLearnt) {
  SpeedModel speeds;
  for (size_t i = 0; i < kMaxSpeedClasses; ++i) {
    speeds.Record(absl::StrCat("w", i), v1::Model::FUNCTION, 1, absl::Seconds(1));
  }
  speeds.Record("one-too-many", v1::Model::FUNCTION, 1, absl::Seconds(1));
  EXPECT_FALSE(speeds.SecondsPerUnit("one-too-many", v1::Model::FUNCTION));
  speeds.Record("w0", v1::Model::XGBOOST, 1, absl::Seconds(1));  // A known class learns on.
  EXPECT_TRUE(speeds.SecondsPerUnit("w0", v1::Model::XGBOOST));
}

TEST(SpeedModelTest, BeforeABoardLearnsItRunsAtItsCpuPriorAgainstTheBoardsThatDid) {
  SpeedModel speeds;
  // Seconds for 1000 units of XGBoost (0 when nothing predicts them).
  auto xgboost_1000 = [&](const std::string& node_class) {
    return absl::ToDoubleSeconds(
        speeds.Predict(node_class, v1::Model::XGBOOST, 1000).value_or(absl::ZeroDuration()));
  };
  // Nothing completed yet: the boards rank by the CPU a trial gets (an Orin 0.1 core, a Pi 4
  // 0.02: their cgroup quotas), against the median board's; nothing predicts a time yet.
  speeds.SetPrior("orin", 0.1);
  speeds.SetPrior("pi4", 0.02);
  speeds.SetPrior("pi4b", 0.02);
  EXPECT_NEAR(speeds.OverallSpeed("orin").value_or(-1), 5, 1e-9);
  EXPECT_NEAR(speeds.OverallSpeed("pi4").value_or(-1), 1, 1e-9);
  EXPECT_NEAR(speeds.PriorSpeed("orin").value_or(-1), 5, 1e-9);
  EXPECT_FALSE(speeds.Predict("pi4", v1::Model::XGBOOST, 100));
  EXPECT_FALSE(speeds.OverallSpeed("no-prior"));
  // The Orin completes a trial (1000 units in 2 s): the Pi 4s are predicted at its seconds per
  // core over theirs, five times slower, for that kind only.
  speeds.Record("orin", v1::Model::XGBOOST, 1000, absl::Seconds(2));
  EXPECT_NEAR(xgboost_1000("pi4"), 10, 1e-9);
  EXPECT_FALSE(speeds.Predict("pi4", v1::Model::RANDOM_FOREST, 1000));
  EXPECT_NEAR(speeds.RelativeSpeed("pi4", v1::Model::XGBOOST).value_or(-1), 0.2, 1e-9);
  EXPECT_NEAR(speeds.OverallSpeed("pi4").value_or(-1), 0.2, 1e-9);
  EXPECT_NEAR(speeds.OverallSpeed("orin").value_or(-1), 1, 1e-9);
  EXPECT_FALSE(speeds.PriorSpeed("orin"));  // Learnt: no longer a prior.
  EXPECT_NEAR(speeds.PriorSpeed("pi4").value_or(-1), 0.2, 1e-9);
  EXPECT_EQ(speeds.Estimates().size(), 1u);  // A prior is not an estimate.
  // The Pi 4 completes one: what it learnt replaces its prior (its quota understated it).
  speeds.Record("pi4", v1::Model::XGBOOST, 1000, absl::Seconds(4));
  EXPECT_NEAR(xgboost_1000("pi4"), 4, 1e-9);
  EXPECT_FALSE(speeds.PriorSpeed("pi4"));
  // The other Pi 4 class: the learnt boards' core-seconds per unit, their median (0.2 and 0.08
  // core-seconds a 1000 units: the geometric middle of two), over its 0.02 cores.
  EXPECT_NEAR(xgboost_1000("pi4b"),
              std::sqrt(0.2 * 0.08) / 0.02, 1e-9);
  // A worker of the class says hello with another quota: the prior follows it.
  speeds.SetPrior("pi4b", 0.04);
  EXPECT_NEAR(xgboost_1000("pi4b"),
              std::sqrt(0.2 * 0.08) / 0.04, 1e-9);
}

// The cluster's medians are kept up to date as trials complete and priors change, not computed
// from every class when read; they must answer as a computation from scratch does, for many
// classes, through windows that roll and priors that move.
TEST(SpeedModelTest, TheClustersMediansFollowEveryRecordAndPriorAsIfComputedAfresh) {
  auto median = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  };
  std::mt19937_64 random(11);
  SpeedModel speeds;
  std::map<std::string, std::deque<double>> logs;  // Class -> its window, oldest first.
  std::map<std::string, double> priors;
  for (int step = 0; step < 3000; ++step) {
    const std::string node_class = absl::StrCat("board-", random() % 40);
    if (random() % 5 == 0) {
      const double cores = 0.25 * static_cast<double>(1 + random() % 8);
      speeds.SetPrior(node_class, cores);
      priors[node_class] = cores;
    } else {
      const double units = static_cast<double>(100 + random() % 900);
      const absl::Duration took = absl::Milliseconds(static_cast<int64_t>(1 + random() % 5000));
      speeds.Record(node_class, v1::Model::XGBOOST, units, took);
      std::deque<double>& window = logs[node_class];
      window.push_back(std::log(absl::ToDoubleSeconds(took) / units));
      if (window.size() > static_cast<size_t>(kSpeedWindow)) window.pop_front();
    }
    std::vector<double> class_medians;
    std::vector<double> per_core;
    for (const auto& [name, window] : logs) {
      class_medians.push_back(median({window.begin(), window.end()}));
      if (auto prior = priors.find(name); prior != priors.end()) {
        per_core.push_back(class_medians.back() + std::log(prior->second));
      }
    }
    if (class_medians.empty()) continue;
    ASSERT_DOUBLE_EQ(*speeds.MedianSecondsPerUnit(v1::Model::XGBOOST),
                     std::exp(median(class_medians))) << "step " << step;
    // A class with a prior that never completed a trial is predicted from the per-core median.
    speeds.SetPrior("unlearnt", 0.5);
    priors["unlearnt"] = 0.5;
    if (per_core.empty()) continue;
    ASSERT_DOUBLE_EQ(*speeds.SecondsPerUnit("unlearnt", v1::Model::XGBOOST),
                     std::exp(median(per_core) - std::log(0.5))) << "step " << step;
  }
}

// From a hostile review: a worker announcing 1e308 or 5e-324 cores made every board's prior
// infinite or zero (and NaN once both were in); such values are taken as unknown, every speed
// reported is finite, and a prior stops counting once its class's boards have left.
TEST(SpeedModelTest, PriorsOutsideTheirRangeAreUnknownAndALeftClassStopsCounting) {
  SpeedModel speeds;
  speeds.SetPrior("pi4", 1);
  speeds.SetPrior("orin", 4);
  for (const double cores : {1e308, 5e-324, 0.0, -1.0, std::nan(""), 1e5}) {
    speeds.SetPrior(absl::StrCat("odd-", cores), cores);
    EXPECT_FALSE(speeds.PriorSpeed(absl::StrCat("odd-", cores))) << cores;
  }
  speeds.SetPrior("small", kMinTrialCpuCores);
  speeds.SetPrior("large", kMaxTrialCpuCores);
  // Before any class learnt: cores over the median class's (the median of 0.001, 1, 4, 65536).
  EXPECT_NEAR(speeds.PriorSpeed("pi4").value_or(-1), 1 / 2.5, 1e-12);
  // The odd boards' and the large one's leave: the median is of 0.001, 1 and 4.
  speeds.ForgetPrior("large");
  EXPECT_NEAR(speeds.PriorSpeed("pi4").value_or(-1), 1, 1e-12);
  EXPECT_FALSE(speeds.PriorSpeed("large"));
  // Learnt speeds relative to the priors stay finite at the extremes of the range.
  speeds.Record("orin", v1::Model::XGBOOST, 1, absl::Nanoseconds(1));
  for (const std::string& board : {"pi4", "small", "orin"}) {
    const std::optional<double> speed = speeds.OverallSpeed(board);
    ASSERT_TRUE(speed.has_value()) << board;
    EXPECT_TRUE(std::isfinite(*speed) && *speed > 0) << board << " " << *speed;
  }
}

// Classes come and go (a worker without a board label is a class of its own): at
// kMaxSpeedClasses a new one is not learnt until those nobody belongs to are forgotten.
TEST(SpeedModelTest, ForgettingClassesMakesRoomForNewOnes) {
  SpeedModel speeds;
  for (size_t i = 0; i < kMaxSpeedClasses; ++i) {
    speeds.Record(absl::StrCat("pod-", i), v1::Model::XGBOOST, 100, absl::Seconds(1 + i % 7));
  }
  EXPECT_FALSE(speeds.HasRoomFor("new"));
  speeds.Record("new", v1::Model::XGBOOST, 100, absl::Seconds(1));
  EXPECT_FALSE(speeds.Learnt("new", v1::Model::XGBOOST));
  speeds.ForgetClassesExcept([](const std::string& node_class) { return node_class == "pod-3"; });
  EXPECT_TRUE(speeds.HasRoomFor("new"));
  EXPECT_EQ(speeds.Estimates().size(), 1u);
  speeds.Record("new", v1::Model::XGBOOST, 100, absl::Seconds(2));
  EXPECT_TRUE(speeds.Learnt("new", v1::Model::XGBOOST));
  // pod-3 took 4 s, new 2 s: the cluster's median is their middle.
  EXPECT_NEAR(*speeds.RelativeSpeed("new", v1::Model::XGBOOST), std::sqrt(2.0), 1e-9);
}

}  // namespace
}  // namespace dhpt::scheduler
