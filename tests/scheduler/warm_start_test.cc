// Warm starts on the real core and store: enqueued points run first and count, added results
// are learnt from and do not, both are checked whole before anything changes, and both survive
// a restart. The optimisers see them as their own history.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "google/protobuf/text_format.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

v1::StudySpec Branin(const std::string& name, int max_trials, v1::Algorithm::Name algorithm) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(model { kind: FUNCTION function: "branin" }
           parameters { name: "x1" double_range { min: -5 max: 10 } }
           parameters { name: "x2" double_range { min: 0 max: 15 } })pb", &spec));
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  spec.mutable_algorithm()->set_name(algorithm);
  spec.mutable_algorithm()->set_seed(7);
  return spec;
}

google::protobuf::Map<std::string, google::protobuf::Value> Point(double x1, double x2) {
  google::protobuf::Map<std::string, google::protobuf::Value> params;
  params["x1"].set_number_value(x1);
  params["x2"].set_number_value(x2);
  return params;
}

v1::AddedTrial Added(double x1, double x2, double value) {
  v1::AddedTrial trial;
  *trial.mutable_params() = Point(x1, x2);
  (*trial.mutable_metrics())["value"] = value;
  return trial;
}

class WarmStartTest : public ::testing::Test {
 protected:
  WarmStartTest() { Start(); }
  void Start() {
    core_ = std::make_unique<SchedulerCore>(db_.get(), SchedulerOptions());
    ASSERT_TRUE(core_->Recover().ok());
  }
  absl::StatusOr<v1::AddTrialsResponse> Add(const std::string& study,
                                            std::vector<v1::AddedTrial> trials) {
    v1::AddTrialsRequest request;
    request.set_study(study);
    for (v1::AddedTrial& trial : trials) *request.add_trials() = std::move(trial);
    return core_->AddTrials(request);
  }
  absl::StatusOr<v1::Trial> Enqueue(
      const std::string& study, google::protobuf::Map<std::string, google::protobuf::Value> params) {
    v1::EnqueueTrialRequest request;
    request.set_study(study);
    *request.mutable_params() = std::move(params);
    return core_->EnqueueTrial(request);
  }
  // What a worker with `slots` slots is given, once it holds that many (model-based
  // suggestions arrive from the suggestion threads).
  std::vector<v1::Assign> Assigned(int slots) {
    RecordingChannel& channel = channels_.emplace_back();
    EXPECT_TRUE(
        core_->ConnectWorker(Hello(absl::StrCat("w", channels_.size()), slots), {}, &channel).ok());
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (static_cast<int>(channel.Assigns().size()) < slots && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    std::vector<v1::Assign> assigns = channel.Assigns();
    EXPECT_EQ(assigns.size(), static_cast<size_t>(slots));
    return assigns;
  }
  v1::Assign FirstAssign() {
    std::vector<v1::Assign> assigns = Assigned(1);
    return assigns.empty() ? v1::Assign() : assigns[0];
  }

  std::deque<RecordingChannel> channels_;
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(WarmStartTest, AnEnqueuedPointRunsFirstAndCountsTowardsMaxTrials) {
  ASSERT_TRUE(core_->CreateStudy(Branin("s", 2, v1::Algorithm::RANDOM)).ok());
  absl::StatusOr<v1::Trial> enqueued = Enqueue("s", Point(3.0, 2.5));
  ASSERT_TRUE(enqueued.ok()) << enqueued.status();
  EXPECT_EQ(enqueued->origin(), v1::Trial::ENQUEUED);
  const v1::Assign first = FirstAssign();
  EXPECT_EQ(first.params().at("x1").double_value(), 3.0);
  EXPECT_EQ(first.params().at("x2").double_value(), 2.5);
  EXPECT_EQ(Enqueue("s", Point(3.0, 2.5)).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(Enqueue("s", Point(1.0, 1.0)).ok());
  // Two trials made: the budget is spent.
  EXPECT_EQ(Enqueue("s", Point(2.0, 2.0)).status().code(), absl::StatusCode::kFailedPrecondition);
}

// 0.1 + 0.2 is 0.30000000000000004: on a 0.1 step it is the lattice point 0.3, the one a
// suggestion holds, and enqueuing it twice in its two spellings makes one trial.
TEST_F(WarmStartTest, AStepValueInAnotherSpellingIsTheSamePoint) {
  v1::StudySpec spec = Branin("s", 10, v1::Algorithm::RANDOM);
  spec.mutable_parameters(0)->mutable_double_range()->set_step(0.1);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  absl::StatusOr<v1::Trial> first = Enqueue("s", Point(0.3, 2.5));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::Trial> again = Enqueue("s", Point(0.1 + 0.2, 2.5));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  // Each spelling of a lattice point is that point: stored once, near its decimal value.
  absl::StatusOr<v1::Trial> other = Enqueue("s", Point(0.7000000000000001, 2.5));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NEAR(other->params().at("x1").double_value(), 0.7, 1e-12);
  EXPECT_EQ(Enqueue("s", Point(0.7, 2.5)).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Enqueue("s", Point(-5 + 57 * 0.1, 2.5)).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(WarmStartTest, PointsAreCheckedAgainstTheSpace) {
  ASSERT_TRUE(core_->CreateStudy(Branin("s", 5, v1::Algorithm::RANDOM)).ok());
  struct Case {
    google::protobuf::Map<std::string, google::protobuf::Value> params;
    const char* message;
  };
  google::protobuf::Map<std::string, google::protobuf::Value> missing = Point(1, 1);
  missing.erase("x2");
  google::protobuf::Map<std::string, google::protobuf::Value> extra = Point(1, 1);
  extra["x3"].set_number_value(1);
  google::protobuf::Map<std::string, google::protobuf::Value> text = Point(1, 1);
  text["x1"].set_string_value("one");
  for (const Case& c : std::vector<Case>{{missing, "params.x2: is missing"},
                                         {extra, "\"x3\" is not a parameter"},
                                         {text, "params.x1: must be a number"},
                                         {Point(11, 1), "params.x1: 11 is outside [-5, 10]"}}) {
    absl::StatusOr<v1::Trial> refused = Enqueue("s", c.params);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(), HasSubstr(c.message));
  }
  EXPECT_EQ(core_->GetStudy("s")->trials_pending(), 5);  // Nothing was created.
  EXPECT_EQ(Enqueue("missing", Point(1, 1)).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(core_->StopStudy("s").ok());
  EXPECT_EQ(Enqueue("s", Point(1, 1)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Add("s", {Added(1, 1, 3)}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(WarmStartTest, AddedResultsAreLearntFromSkippedWhenKnownAndOutsideTheBudget) {
  ASSERT_TRUE(core_->CreateStudy(Branin("s", 3, v1::Algorithm::RANDOM)).ok());
  absl::StatusOr<v1::AddTrialsResponse> added =
      Add("s", {Added(0, 5, 20), Added(3.14159, 2.275, 0.3979), Added(0, 5, 20)});
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->added(), 2);
  EXPECT_EQ(added->skipped(), 1);
  // A bad entry refuses the whole call.
  v1::AddedTrial no_value = Added(1, 1, 0);
  no_value.mutable_metrics()->clear();
  absl::StatusOr<v1::AddTrialsResponse> refused = Add("s", {Added(2, 2, 9), no_value});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("trials[1].metrics"));
  v1::AddedTrial failed = Added(4, 4, 0);
  failed.set_state(v1::Trial::FAILED);
  failed.mutable_metrics()->clear();
  ASSERT_EQ(Add("s", {failed})->added(), 1);

  v1::Study study = *core_->GetStudy("s");
  EXPECT_EQ(study.trials_added(), 3);
  EXPECT_EQ(study.trials_completed(), 0);
  EXPECT_EQ(study.trials_failed(), 0);
  EXPECT_EQ(study.trials_pending(), 3);  // max_trials is still all to run.
  EXPECT_EQ(study.best_trial().origin(), v1::Trial::ADDED);
  EXPECT_NEAR(study.best_trial().objective_value(), 0.3979, 1e-12);
  // As a restarted scheduler sees it.
  core_.reset();
  db_.Reopen();
  Start();
  study = *core_->GetStudy("s");
  EXPECT_EQ(study.trials_added(), 3);
  EXPECT_EQ(study.trials_pending(), 3);
  EXPECT_NEAR(study.best_trial().objective_value(), 0.3979, 1e-12);
}

// Hill climbing starts from the best point it knows: an added one. Its first step is a normal
// draw of 0.2 of each 15-wide range (sigma 3) around that point, so over 20 seeds the mean L1
// distance to it is about 4.8; a uniform point is 12.4 away on average, and the other added
// points 7 and 25. A climber that ignored the added trials (starting at random or from
// another point) is far outside the bound in the mean, and outside it in most seeds.
TEST_F(WarmStartTest, HillClimbingClimbsFromTheBestAddedPoint) {
  constexpr int kSeeds = 20;
  double total_l1 = 0;
  int nearest_the_best = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    const std::string name = absl::StrCat("s", seed);
    v1::StudySpec spec = Branin(name, 1, v1::Algorithm::HILL_CLIMBING);  // One trial each.
    spec.mutable_algorithm()->set_seed(seed);
    ASSERT_TRUE(core_->CreateStudy(spec).ok());
    ASSERT_TRUE(
        Add(name, {Added(-4, 14, 100), Added(9.42478, 2.475, 0.3979), Added(5, 5, 30)}).ok());
    const v1::Assign first = FirstAssign();
    ASSERT_EQ(first.study(), name);
    const double x1 = first.params().at("x1").double_value();
    const double x2 = first.params().at("x2").double_value();
    const double to_best = std::abs(x1 - 9.42478) + std::abs(x2 - 2.475);
    total_l1 += to_best;
    if (to_best < std::abs(x1 - 5) + std::abs(x2 - 5) &&
        to_best < std::abs(x1 + 4) + std::abs(x2 - 14)) {
      ++nearest_the_best;
    }
  }
  std::printf("first point's mean L1 distance to the best added point %.2f; nearest it in %d "
              "of %d seeds\n", total_l1 / kSeeds, nearest_the_best, kSeeds);
  EXPECT_LT(total_l1 / kSeeds, 7.0);
  EXPECT_GE(nearest_the_best, kSeeds / 2);
}

// Grid search does not evaluate a point again that was added.
TEST_F(WarmStartTest, GridSkipsAddedPoints) {
  v1::StudySpec spec = Branin("s", 0, v1::Algorithm::GRID);
  spec.mutable_algorithm()->set_grid_points(2);  // Corners: 4 points.
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  ASSERT_TRUE(Add("s", {Added(-5, 0, 17.5), Added(10, 15, 145.9)}).ok());
  RecordingChannel& channel = channels_.emplace_back();
  ASSERT_TRUE(core_->ConnectWorker(Hello("w", 4), {}, &channel).ok());
  std::vector<v1::Assign> assigns = channel.Assigns();
  ASSERT_EQ(assigns.size(), 2u);
  std::set<std::pair<double, double>> run;
  for (const v1::Assign& assign : assigns) {
    run.insert({assign.params().at("x1").double_value(), assign.params().at("x2").double_value()});
  }
  EXPECT_EQ(run, (std::set<std::pair<double, double>>{{-5, 15}, {10, 0}}));
}

// TPE models the added results at once: with 20 of them (its start-up is 10) its first
// suggestions lean towards the good ones, where the same study without them samples at random.
TEST_F(WarmStartTest, TpeUsesAddedResultsAsItsStartup) {
  std::vector<v1::AddedTrial> known;
  for (int i = 0; i < 20; ++i) {
    // Good results near x1 = 9.4, poor ones spread over the left half.
    const bool good = i % 4 == 0;
    const double x1 = good ? 9.2 + 0.1 * (i % 5) : -5 + 0.35 * i;
    const double x2 = good ? 2.2 + 0.1 * (i % 7) : 5 + 0.4 * i;
    known.push_back(Added(x1, x2, good ? 0.5 + 0.01 * i : 50 + i));
  }
  auto mean_x1 = [&](bool warm) {
    core_->CreateStudy(Branin("s", 10, v1::Algorithm::TPE)).IgnoreError();
    if (warm) {
      EXPECT_EQ(Add("s", known)->added(), 20);
    }
    double sum = 0;
    for (const v1::Assign& assign : Assigned(5)) sum += assign.params().at("x1").double_value();
    EXPECT_TRUE(core_->DeleteStudy("s", /*force=*/true).ok());
    return sum / 5;
  };
  const double cold = mean_x1(false);
  const double warm = mean_x1(true);
  EXPECT_GT(warm, cold + 2) << "cold " << cold << ", warm " << warm;
  EXPECT_GT(warm, 5.0);  // Uniform over [-5, 10] averages 2.5.
}

}  // namespace
}  // namespace dhpt::scheduler
