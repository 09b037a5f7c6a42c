// Multi-objective studies end to end: a real scheduler and workers, fronts checked against the
// trials themselves, constraints, placement by worker labels, and a front that survives a
// restart of the scheduler.

#include <signal.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "services/cli/study_client.h"
#include "services/optimizer/pareto.h"
#include "tests/integration/test_cluster.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

// The ids of the feasible completed trials no other one dominates, computed from the trials
// alone (every objective minimised, as the zdt problems are).
std::set<uint64_t> FrontOf(const std::vector<v1::Trial>& trials) {
  std::vector<const v1::Trial*> feasible;
  for (const v1::Trial& t : trials) {
    if (t.state() == v1::Trial::COMPLETED && !t.infeasible()) feasible.push_back(&t);
  }
  std::set<uint64_t> front;
  for (const v1::Trial* a : feasible) {
    const bool dominated = std::any_of(feasible.begin(), feasible.end(), [&](const v1::Trial* b) {
      return optimizer::Dominates(
          std::vector<double>(b->objective_values().begin(), b->objective_values().end()),
          std::vector<double>(a->objective_values().begin(), a->objective_values().end()));
    });
    if (!dominated) front.insert(a->id());
  }
  return front;
}

std::set<uint64_t> Ids(const v1::GetParetoFrontResponse& front) {
  std::set<uint64_t> ids;
  for (const v1::Trial& t : front.trials()) ids.insert(t.id());
  return ids;
}

std::string Zdt1Study(const std::string& name, const std::string& algorithm, int trials,
                      const std::string& extra = "") {
  return absl::StrCat("name: ", name, R"(
model: {kind: FUNCTION, function: zdt1}
algorithm: {name: )", algorithm, R"(, seed: 3}
parameters:
  - {name: x1, double_range: {min: 0, max: 1}}
  - {name: x2, double_range: {min: 0, max: 1}}
  - {name: x3, double_range: {min: 0, max: 1}}
max_trials: )", trials, "\n", extra);
}

TEST(MultiObjectiveTest, EachAlgorithmFindsAFrontTheTrialsConfirm) {
  TestCluster cluster(/*workers=*/2);
  for (const std::string algorithm : {"TPE", "NSGA2", "BAYESIAN", "RANDOM"}) {
    SCOPED_TRACE(algorithm);
    const std::string name = absl::StrCat("zdt1-", algorithm);
    absl::StatusOr<v1::Study> created =
        cluster.client().CreateStudy(Spec(Zdt1Study(name, algorithm, 30)));
    ASSERT_TRUE(created.ok()) << created.status();
    // Without objectives, a multi-objective function gets one per value, each minimised.
    ASSERT_EQ(created->spec().objectives_size(), 2);
    EXPECT_EQ(created->spec().objectives(1).metric(), "f2");
    const v1::Study study = cluster.WaitForEnd(name);
    EXPECT_EQ(study.trials_completed(), 30);
    absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials(name);
    ASSERT_TRUE(trials.ok());
    for (const v1::Trial& t : *trials) {
      ASSERT_EQ(t.objective_values_size(), 2);
      EXPECT_EQ(t.objective_values(0), t.metrics().at("f1"));
      EXPECT_EQ(t.objective_values(1), t.metrics().at("f2"));
    }
    absl::StatusOr<v1::GetParetoFrontResponse> front = cluster.client().GetParetoFront(name);
    ASSERT_TRUE(front.ok()) << front.status();
    EXPECT_EQ(Ids(*front), FrontOf(*trials));
    EXPECT_EQ(front->trials_size(), study.pareto_front_size());
    EXPECT_GT(front->hypervolume(), 0);
    EXPECT_DOUBLE_EQ(front->hypervolume(), study.hypervolume());
    ASSERT_EQ(front->reference_point_size(), 2);
    EXPECT_TRUE(std::is_sorted(front->trials().begin(), front->trials().end(),
                               [](const v1::Trial& a, const v1::Trial& b) {
                                 return a.number() < b.number();
                               }));
    // In pages of two, the same front.
    std::set<uint64_t> paged;
    std::string token;
    int pages = 0;
    do {
      absl::StatusOr<v1::GetParetoFrontResponse> page = cluster.core().GetParetoFront(name, 2, token);
      ASSERT_TRUE(page.ok()) << page.status();
      ASSERT_LE(page->trials_size(), 2);
      for (const v1::Trial& t : page->trials()) EXPECT_TRUE(paged.insert(t.id()).second);
      EXPECT_DOUBLE_EQ(page->hypervolume(), front->hypervolume());
      token = page->next_page_token();
      ++pages;
    } while (!token.empty() && pages < 100);
    EXPECT_EQ(paged, Ids(*front));
    EXPECT_EQ(cluster.core().GetParetoFront(name, 2, "bogus").status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// What the issue asks for on the boards, on this machine: XGBoost's accuracy against the
// latency and size the worker measured for each trained model, under a size budget.
TEST(MultiObjectiveTest, XgboostAccuracyAgainstMeasuredLatencyAndSize) {
  TestCluster cluster(/*workers=*/2);
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: xgb-edge
model: {kind: XGBOOST, fixed: {tree_method: hist}}
dataset: {friedman1: {samples: 1500, features: 10, noise: 1.0, seed: 0}}
objectives:
  - {metric: r2, goal: MAXIMIZE}
  - {metric: inference_latency_us, goal: MINIMIZE}
  - {metric: model_bytes, goal: MINIMIZE}
constraints: [{metric: model_bytes, max: 60000}]
algorithm: {name: NSGA2, seed: 5, nsga2: {population_size: 4}}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 6}}
  - {name: num_boost_round, int_range: {min: 5, max: 120, log: true}}
max_trials: 10
)")).ok());
  const v1::Study study = cluster.WaitForEnd("xgb-edge", absl::Seconds(240));
  EXPECT_EQ(study.trials_completed(), 10);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("xgb-edge");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& t : *trials) {
    ASSERT_EQ(t.state(), v1::Trial::COMPLETED) << t.error();
    const auto& m = t.metrics();
    for (const char* metric : {"model_bytes", "inference_latency_us",
                               "inference_latency_batch256_us", "inference_peak_rss_bytes"}) {
      ASSERT_TRUE(m.contains(metric)) << metric;
    }
    EXPECT_GT(m.at("model_bytes"), 0);
    EXPECT_GT(m.at("inference_latency_us"), 0);
    EXPECT_THAT(t.objective_values(), ::testing::ElementsAre(m.at("r2"), m.at("inference_latency_us"),
                                                             m.at("model_bytes")));
    EXPECT_EQ(t.infeasible(), m.at("model_bytes") > 60000);
    EXPECT_FALSE(m.contains("energy_joules")) << "no power sensor here: absent, never zero";
  }
  absl::StatusOr<v1::GetParetoFrontResponse> front = cluster.client().GetParetoFront("xgb-edge");
  ASSERT_TRUE(front.ok());
  ASSERT_GT(front->trials_size(), 0);
  for (const v1::Trial& t : front->trials()) EXPECT_FALSE(t.infeasible());
}

TEST(MultiObjectiveTest, InfeasibleTrialsAreKeptMarkedAndNeverOnTheFront) {
  TestCluster cluster(/*workers=*/2);
  ASSERT_TRUE(cluster.client()
                  .CreateStudy(Spec(Zdt1Study("zdt1-bounded", "NSGA2", 40,
                                              "constraints: [{metric: f1, max: 0.5}]\n"
                                              "objectives: [{metric: f1, goal: MINIMIZE, reference: 1},"
                                              " {metric: f2, goal: MINIMIZE, reference: 10}]\n")))
                  .ok());
  const v1::Study study = cluster.WaitForEnd("zdt1-bounded");
  EXPECT_EQ(study.trials_completed(), 40);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("zdt1-bounded");
  ASSERT_TRUE(trials.ok());
  int infeasible = 0;
  for (const v1::Trial& t : *trials) {
    const double f1 = t.metrics().at("f1");
    EXPECT_EQ(t.infeasible(), f1 > 0.5) << t.number();
    EXPECT_DOUBLE_EQ(t.constraint_violation(), std::max(0.0, f1 - 0.5));
    infeasible += t.infeasible() ? 1 : 0;
  }
  EXPECT_GT(infeasible, 0) << "the bound cuts the space in half: random start-up trials miss it";
  absl::StatusOr<v1::GetParetoFrontResponse> front = cluster.client().GetParetoFront("zdt1-bounded");
  ASSERT_TRUE(front.ok());
  EXPECT_EQ(Ids(*front), FrontOf(*trials));
  for (const v1::Trial& t : front->trials()) EXPECT_FALSE(t.infeasible());
  EXPECT_THAT(front->reference_point(), ::testing::ElementsAre(1, 10));
  // The best trial of a constrained study is a feasible one.
  absl::StatusOr<v1::Trial> best = cluster.client().GetBestTrial("zdt1-bounded");
  ASSERT_TRUE(best.ok());
  EXPECT_FALSE(best->infeasible());
}

TEST(MultiObjectiveTest, AConstraintOnASingleObjectiveStudyPicksAFeasibleBest) {
  TestCluster cluster(/*workers=*/1);
  // Branin's minima (0.398) lie at x1 = -pi, pi and 9.42: the bound leaves only the first.
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: branin-bounded
model: {kind: FUNCTION, function: branin}
algorithm: {name: TPE, seed: 4}
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
constraints: [{metric: value, min: 1}]
max_trials: 30
)")).ok());
  const v1::Study study = cluster.WaitForEnd("branin-bounded");
  ASSERT_TRUE(study.has_best_trial());
  EXPECT_FALSE(study.best_trial().infeasible());
  EXPECT_GE(study.best_trial().objective_value(), 1);
  absl::StatusOr<v1::GetParetoFrontResponse> front = cluster.client().GetParetoFront("branin-bounded");
  ASSERT_TRUE(front.ok());
  ASSERT_EQ(front->trials_size(), 1);
  EXPECT_EQ(front->trials(0).id(), study.best_trial().id());
}

TEST(MultiObjectiveTest, AWorkerSelectorKeepsTrialsOnTheLabelledBoards) {
  TestCluster cluster(/*workers=*/0);
  cluster.SpawnWorkerProcess("pi-1", 1, "dhpt-cpu-worker", {"--labels=board=pi4,site=lab"});
  cluster.SpawnWorkerProcess("orin-1", 1, "dhpt-cpu-worker", {"--labels=board=orin"});
  ASSERT_TRUE(WaitFor([&] { return cluster.core().connected_workers() == 2; }));
  std::vector<v1::Worker> workers = cluster.core().ListWorkers();
  for (const v1::Worker& w : workers) {
    if (w.worker_id() == "pi-1") {
      EXPECT_EQ(w.capabilities().labels().at("board"), "pi4");
    }
  }
  ASSERT_TRUE(cluster.client()
                  .CreateStudy(Spec(Zdt1Study("on-pis", "RANDOM", 12, "worker_selector: {board: pi4}\n")))
                  .ok());
  ASSERT_TRUE(cluster.client()
                  .CreateStudy(Spec(Zdt1Study("on-jetsons", "RANDOM", 4,
                                              "worker_selector: {board: jetson-nano}\n")))
                  .ok());
  EXPECT_EQ(cluster.WaitForEnd("on-pis").trials_completed(), 12);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("on-pis");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& t : *trials) EXPECT_EQ(t.worker_id(), "pi-1");
  absl::StatusOr<v1::Study> waiting = cluster.client().GetStudy("on-jetsons");
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->trials_completed(), 0);
  EXPECT_THAT(waiting->state_reason(),
              HasSubstr("waiting for a worker labelled board=jetson-nano that runs FUNCTION "
                        "(connected: 2 CPU workers; 0 of them labelled board=jetson-nano)"));
}

TEST(MultiObjectiveTest, BadObjectivesAndSelectorsAreClearErrors) {
  TestCluster cluster(/*workers=*/0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"objectives: [{metric: f1, goal: MINIMIZE}, {metric: f1, goal: MINIMIZE}]",
       "objectives[1].metric: \"f1\" is already an objective"},
      {"objectives: [{metric: f1, goal: MINIMIZE}, {metric: latency, goal: MINIMIZE}]",
       "objectives[1].metric: \"latency\" is not reported by FUNCTION trials"},
      {"objectives: [{metric: f1, goal: MINIMIZE}, {metric: f2}]",
       "objectives[1].goal: is required"},
      {"constraints: [{metric: f1}]", "constraints[0]: needs max, min or both"},
      {"constraints: [{metric: f1, min: 2, max: 1}]", "min is above max"},
      {"worker_selector: {\"bad key!\": x}", "worker_selector: bad key!=x"},
      {"algorithm: {name: HILL_CLIMBING}", "HILL_CLIMBING follows one objective"},
  };
  for (const auto& [extra, message] : cases) {
    v1::StudySpec spec = Spec(Zdt1Study("bad", "RANDOM", 5));
    v1::StudySpec patch = Spec(absl::StrCat("name: bad\n", extra));
    spec.MergeFrom(patch);
    if (patch.has_algorithm()) *spec.mutable_algorithm() = patch.algorithm();
    absl::StatusOr<v1::Study> created = cluster.client().CreateStudy(spec);
    EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument) << extra;
    EXPECT_THAT(std::string(created.status().message()), HasSubstr(message)) << extra;
  }
}

TEST(MultiObjectiveTest, TheFrontAndItsHypervolumeSurviveARestart) {
  TempDirectory directory;
  const std::string db = absl::StrCat("--db=", directory.path(), "/scheduler.db");
  auto scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
  const std::string address = scheduler->address();
  v1::GetParetoFrontResponse before;
  {
    cli::StudyClient client(address);
    ASSERT_TRUE(client.CreateStudy(Spec(Zdt1Study("zdt1-durable", "TPE", 25,
                                                  "constraints: [{metric: f2, max: 6}]\n")))
                    .ok());
    std::unique_ptr<cli::ChildProcess> worker = StartWorkerProcess(address, "w-1");
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Study> s = client.GetStudy("zdt1-durable");
      return s.ok() && s->state() == v1::Study::COMPLETED;
    }));
    worker.reset();  // Killed and reaped.
    absl::StatusOr<v1::GetParetoFrontResponse> front = client.GetParetoFront("zdt1-durable");
    ASSERT_TRUE(front.ok());
    before = *front;
  }
  scheduler->Kill();
  scheduler = std::make_unique<SchedulerProcess>(
      std::vector<std::string>{db, absl::StrCat("--listen=", address)});
  cli::StudyClient client(address);
  absl::StatusOr<v1::GetParetoFrontResponse> after = client.GetParetoFront("zdt1-durable");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Ids(*after), Ids(before));
  EXPECT_DOUBLE_EQ(after->hypervolume(), before.hypervolume());
  EXPECT_GT(before.trials_size(), 0);
}

}  // namespace
}  // namespace dhpt::testing
