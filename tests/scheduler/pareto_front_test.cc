#include "services/scheduler/pareto_front.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/text_format.h"
#include "services/optimizer/pareto.h"

namespace dhpt::scheduler {
namespace {

using ::testing::ElementsAre;

v1::StudySpec TwoObjectives(const std::string& extra = "") {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(objectives { metric: "r2" goal: MAXIMIZE }
           objectives { metric: "inference_latency_us" goal: MINIMIZE })pb" + extra, &spec));
  return spec;
}

v1::Trial Completed(uint64_t id, double r2, double latency, bool infeasible = false) {
  v1::Trial trial;
  trial.set_id(id);
  trial.set_state(v1::Trial::COMPLETED);
  trial.add_objective_values(r2);
  trial.add_objective_values(latency);
  trial.set_infeasible(infeasible);
  return trial;
}

TEST(ParetoFrontTest, KeepsTheNonDominatedFeasibleTrialsAsTheyComplete) {
  ParetoFront front(TwoObjectives());
  front.Add(Completed(1, 0.80, 10));
  front.Add(Completed(2, 0.90, 20));
  front.Add(Completed(3, 0.70, 15));  // Dominated by 1.
  front.Add(Completed(4, 0.99, 5, /*infeasible=*/true));
  EXPECT_THAT(front.trial_ids(), ElementsAre(1, 2));
  front.Add(Completed(5, 0.95, 9));  // Dominates 1 and 2.
  EXPECT_THAT(front.trial_ids(), ElementsAre(5));
  front.Add(Completed(6, 0.95, 9));  // Equal: neither dominates, both stay.
  EXPECT_THAT(front.trial_ids(), ElementsAre(5, 6));
}

TEST(ParetoFrontTest, TheHypervolumeIsMeasuredFromTheWorstFeasibleValuesUnlessGiven) {
  ParetoFront front(TwoObjectives());
  EXPECT_EQ(front.hypervolume(), 0);
  front.Add(Completed(1, 0.5, 20));
  front.Add(Completed(2, 0.9, 10));
  // Trial 2 dominates trial 1. Worst seen: r2 0.5, latency 20: (0.9 - 0.5) * (20 - 10).
  EXPECT_THAT(front.trial_ids(), ElementsAre(2));
  EXPECT_THAT(front.reference_point(), ElementsAre(0.5, 20));
  EXPECT_NEAR(front.hypervolume(), 4.0, 1e-12);

  v1::StudySpec spec = TwoObjectives();
  spec.mutable_objectives(0)->set_reference(0);
  spec.mutable_objectives(1)->set_reference(100);
  ParetoFront given(spec);
  given.Add(Completed(1, 0.5, 20));
  given.Add(Completed(2, 0.9, 10));
  EXPECT_THAT(given.reference_point(), ElementsAre(0, 100));
  // Trial 2 dominates trial 1: r2 from 0 up to 0.9, latency from 10 up to 100.
  EXPECT_THAT(given.trial_ids(), ElementsAre(2));
  EXPECT_NEAR(given.hypervolume(), 0.9 * 90, 1e-9);
}

TEST(ParetoFrontTest, MatchesARecomputationFromScratch) {
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(objectives { metric: "f1" goal: MINIMIZE reference: 2 }
           objectives { metric: "f2" goal: MINIMIZE reference: 2 }
           objectives { metric: "f3" goal: MINIMIZE reference: 2 })pb", &spec));
  ParetoFront front(spec);
  std::mt19937 random(1);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<std::vector<double>> all;
  for (uint64_t id = 0; id < 300; ++id) {
    v1::Trial trial;
    trial.set_id(id);
    trial.set_state(v1::Trial::COMPLETED);
    std::vector<double> values = {unit(random), unit(random), unit(random)};
    for (double v : values) trial.add_objective_values(v);
    all.push_back(values);
    front.Add(trial);
  }
  std::vector<uint64_t> expected;
  for (int i : optimizer::ParetoFrontIndices(all, {true, true, true})) expected.push_back(i);
  std::vector<uint64_t> got = front.trial_ids();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
  const std::vector<double> reference = {2, 2, 2};
  EXPECT_NEAR(front.hypervolume(), optimizer::Hypervolume(all, reference), 1e-9);
}

TEST(ParetoFrontTest, WithoutAFeasibleTrialThereIsNoReferencePoint) {
  ParetoFront front(TwoObjectives());
  front.Add(Completed(1, 0.9, 10, /*infeasible=*/true));
  EXPECT_TRUE(front.reference_point().empty());
  EXPECT_EQ(front.hypervolume(), 0);
}

TEST(ParetoFrontTest, TheHypervolumeDoesNotDependOnTheOrderTrialsCompleted) {
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(objectives { metric: "f1" goal: MINIMIZE }
           objectives { metric: "f2" goal: MINIMIZE }
           objectives { metric: "f3" goal: MINIMIZE })pb", &spec));
  std::mt19937 random(9);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<v1::Trial> trials;
  for (uint64_t id = 0; id < 200; ++id) {
    v1::Trial& trial = trials.emplace_back();
    trial.set_id(id);
    trial.set_state(v1::Trial::COMPLETED);
    for (int i = 0; i < 3; ++i) trial.add_objective_values(unit(random) * 0.1 + (i == 0 ? 0 : 1.0 / (1 + id % 7)));
  }
  ParetoFront forward(spec), backward(spec);
  for (const v1::Trial& t : trials) forward.Add(t);
  for (auto it = trials.rbegin(); it != trials.rend(); ++it) backward.Add(*it);
  EXPECT_EQ(forward.hypervolume(), backward.hypervolume());  // Bit for bit.
}

TEST(ParetoFrontTest, ASingleObjectiveStudyHasNoFront) {
  v1::StudySpec spec;
  spec.mutable_objective()->set_metric("r2");
  ParetoFront front(spec);
  v1::Trial trial;
  trial.set_state(v1::Trial::COMPLETED);
  trial.set_objective_value(0.5);
  front.Add(trial);
  EXPECT_TRUE(front.trial_ids().empty());
  EXPECT_TRUE(front.reference_point().empty());
}

}  // namespace
}  // namespace dhpt::scheduler

namespace dhpt::scheduler {
namespace {

// Six objectives and a front of thousands: the exact algorithm would take hours under the
// scheduler's lock; the estimate stays within a few percent of a known volume, quickly.
TEST(ParetoFrontTest, ALargeFrontOfManyObjectivesGetsABoundedEstimate) {
  v1::StudySpec spec;
  for (int i = 0; i < 6; ++i) {
    v1::Objective* objective = spec.add_objectives();
    objective->set_metric(absl::StrCat("f", i + 1));
    objective->set_goal(v1::Objective::MINIMIZE);
    objective->set_reference(1);
  }
  ParetoFront front(spec);
  // Points on the simplex sum(f) = 1 are mutually non-dominated; the region they dominate
  // within [0, 1]^6 is {z : some p <= z}. With 3,000 of them it approaches
  // {z in [0,1]^6 : sum(z) >= 1}, of volume 1 - 1/6! = 0.99861.
  std::mt19937 random(3);
  std::exponential_distribution<double> exponential(1);
  for (uint64_t id = 0; id < 3000; ++id) {
    std::vector<double> e(6);
    double sum = 0;
    for (double& x : e) sum += (x = exponential(random));
    v1::Trial trial;
    trial.set_id(id);
    trial.set_state(v1::Trial::COMPLETED);
    for (double x : e) trial.add_objective_values(x / sum);
    front.Add(trial);
  }
  EXPECT_EQ(front.trial_ids().size(), 3000u);
  const absl::Time start = absl::Now();
  const double volume = front.hypervolume();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "bounded, even in a debug build";
  EXPECT_TRUE(front.hypervolume_estimated());
  EXPECT_NEAR(volume, 0.99861, 0.05);
}

TEST(ParetoFrontTest, SmallFrontsOfManyObjectivesStayExact) {
  v1::StudySpec spec;
  for (int i = 0; i < 4; ++i) {
    v1::Objective* objective = spec.add_objectives();
    objective->set_metric(absl::StrCat("f", i + 1));
    objective->set_goal(v1::Objective::MINIMIZE);
    objective->set_reference(2);
  }
  ParetoFront front(spec);
  v1::Trial trial;
  trial.set_state(v1::Trial::COMPLETED);
  for (int i = 0; i < 4; ++i) trial.add_objective_values(1);
  front.Add(trial);
  EXPECT_DOUBLE_EQ(front.hypervolume(), 1.0);
  EXPECT_FALSE(front.hypervolume_estimated());
}

}  // namespace
}  // namespace dhpt::scheduler
