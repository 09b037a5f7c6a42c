// End to end: the real scheduler and real workers on loopback run whole studies.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "services/cli/study_file.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(StudyFlowTest, RandomXgboostStudyCompletesEveryTrialWithGoodR2) {
  TestCluster cluster(2);
  v1::StudySpec spec = Spec(R"(
name: xgb-random
model: {kind: XGBOOST, fixed: {objective: "reg:squarederror"}}
dataset: {friedman1: {samples: 1500, features: 10, noise: 1.0, seed: 0}}
algorithm: {name: RANDOM, seed: 42}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 6}}
  - {name: eta, double_range: {min: 0.03, max: 0.3, log: true}}
  - {name: num_boost_round, int_range: {min: 50, max: 150}}
max_trials: 20
parallel_trials: 2
)");
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  v1::Study study = cluster.WaitForEnd("xgb-random");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 20);
  EXPECT_GT(study.best_trial().objective_value(), 0.8);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("xgb-random");
  ASSERT_EQ(trials->size(), 20u);
  std::set<std::string> workers;
  for (const v1::Trial& t : *trials) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.error();
    for (const char* m : {"r2", "mse", "wall_seconds", "cpu_seconds", "cpu_utilization"}) {
      EXPECT_TRUE(t.metrics().contains(m)) << m;
    }
    EXPECT_EQ(t.node_name(), "test-node");
    workers.insert(t.worker_id());
  }
  EXPECT_EQ(workers.size(), 2u);  // Both workers took part.
  absl::StatusOr<v1::Trial> best = cluster.client().GetBestTrial("xgb-random");
  EXPECT_EQ(best->objective_value(), study.best_trial().objective_value());
}

TEST(StudyFlowTest, GridStudyVisitsEveryPointExactlyOnce) {
  TestCluster cluster(2, /*slots=*/2);
  v1::StudySpec spec = Spec(R"(
name: rf-grid
model: {kind: RANDOM_FOREST}
dataset: {friedman1: {samples: 400, features: 6, noise: 0.5, seed: 1}}
algorithm: {name: GRID, seed: 3, grid_points: 3}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 6}}
  - {name: n_estimators, discrete: {values: [5, 10]}}
  - {name: colsample_bynode, double_range: {min: 0.5, max: 0.9}}
)");
  absl::StatusOr<v1::Study> created = cluster.client().CreateStudy(spec);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->spec().max_trials(), 3 * 2 * 3);
  v1::Study study = cluster.WaitForEnd("rf-grid");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("rf-grid");
  std::set<std::tuple<int64_t, double, double>> points;
  for (const v1::Trial& t : *trials) {
    EXPECT_EQ(t.state(), v1::Trial::COMPLETED) << t.error();
    points.emplace(t.params().at("max_depth").int_value(),
                   t.params().at("n_estimators").double_value(),
                   t.params().at("colsample_bynode").double_value());
  }
  EXPECT_EQ(trials->size(), 18u);
  EXPECT_EQ(points.size(), 18u);
}

TEST(StudyFlowTest, WatchStreamsEveryTrialUntilTheStudyEnds) {
  TestCluster cluster(1);
  v1::StudySpec spec = Spec(R"(
name: watched
model: {kind: FUNCTION, function: rosenbrock}
parameters:
  - {name: x1, double_range: {min: -2, max: 2}}
  - {name: x2, double_range: {min: -2, max: 2}}
  - {name: x3, double_range: {min: -2, max: 2}}
max_trials: 30
)");
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  std::set<uint64_t> completed;
  v1::Study last;
  absl::Status status = cluster.client().Watch("watched", [&](const v1::StudyEvent& e) {
    if (e.has_trial() && e.trial().state() == v1::Trial::COMPLETED) completed.insert(e.trial().id());
    if (e.has_study()) last = e.study();
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(last.state(), v1::Study::COMPLETED);
  // The watch may start after some trials finished; those it saw are real and distinct.
  EXPECT_LE(completed.size(), 30u);
  EXPECT_EQ(last.trials_completed(), 30);
}

TEST(StudyFlowTest, StudiesOfSeveralUsersRunAtOnceOnSharedWorkers) {
  TestCluster cluster(2);
  for (const char* name : {"alice", "bob", "carol"}) {
    v1::StudySpec spec = Spec(absl::StrCat(R"(
model: {kind: FUNCTION, function: ackley}
parameters:
  - {name: x1, double_range: {min: -5, max: 5}}
  - {name: x2, double_range: {min: -5, max: 5}}
max_trials: 200
name: )", name));
    ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  }
  for (const char* name : {"alice", "bob", "carol"}) {
    EXPECT_EQ(cluster.WaitForEnd(name).trials_completed(), 200) << name;
  }
}

TEST(StudyFlowTest, BadCsvCellFailsTrialsWithTheReasonAndTheWorkerLivesOn) {
  TestCluster cluster(1);
  v1::StudySpec broken = Spec(absl::StrCat(R"(
name: broken-csv
model: {kind: XGBOOST}
dataset: {csv: {path: ")", DHPT_TEST_DATA_DIR, R"(/bad_cell.csv", target: price}}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
max_trials: 5
max_failed_trials: 1
)"));
  ASSERT_TRUE(cluster.client().CreateStudy(broken).ok());
  v1::Study study = cluster.WaitForEnd("broken-csv");
  EXPECT_EQ(study.state(), v1::Study::FAILED);
  EXPECT_THAT(study.state_reason(), HasSubstr("more than max_failed_trials (1)"));
  absl::StatusOr<std::vector<v1::Trial>> failed =
      cluster.client().ListTrials("broken-csv");
  ASSERT_FALSE(failed->empty());
  // Numbers, never the file's text: the error reaches every API client.
  EXPECT_THAT(failed->front().error(), HasSubstr("line 3, column 2: not a number"));
  EXPECT_THAT(failed->front().error(), ::testing::Not(HasSubstr("oops")));

  // The same worker goes on to run a healthy study.
  v1::StudySpec healthy = Spec(absl::StrCat(R"(
name: good-csv
model: {kind: RANDOM_FOREST, fixed: {n_estimators: 5}}
dataset: {csv: {path: ")", DHPT_TEST_DATA_DIR, R"(/small.csv", target: price}}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
max_trials: 3
)"));
  ASSERT_TRUE(cluster.client().CreateStudy(healthy).ok());
  EXPECT_EQ(cluster.WaitForEnd("good-csv").trials_completed(), 3);
}

std::pair<int, std::string> RunCli(const std::string& args) { return RunBinary("dhpt", args); }

// Processes whose command line mentions `needle`.
int ProcessesMentioning(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(needle) != std::string::npos && cmdline.find("dhpt-") != std::string::npos) {
      ++count;
    }
  }
  return count;
}

std::string AddressFrom(const std::string& output) {
  const size_t at = output.find("scheduler on ");
  if (at == std::string::npos) return "";
  return output.substr(at + 13, output.find(',', at) - at - 13);
}

TEST(CliTest, LocalRunsAStudyFileAndLeavesNoProcessBehind) {
  const std::string path = ::testing::TempDir() + "/local-study.yaml";
  std::ofstream(path) << R"(
name: local-xgb
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 800, features: 8, seed: 2}}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 5}}
  - {name: num_boost_round, discrete: {values: [20, 40]}}
max_trials: 6
)";
  auto [code, output] = RunCli("local --workers=2 --study=" + path);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("study local-xgb: COMPLETED"));
  EXPECT_THAT(output, HasSubstr("best trial #"));
  EXPECT_THAT(output, HasSubstr("max_depth"));
  // The dashboard ran beside it (dhpt-dashboard --scheduler=ADDRESS), and is gone too.
  EXPECT_THAT(output, ContainsRegex("dashboard at http://127\\.0\\.0\\.1:[0-9]+/"));
  const std::string address = AddressFrom(output);
  ASSERT_FALSE(address.empty()) << output;
  EXPECT_EQ(ProcessesMentioning(address), 0);
}

TEST(CliTest, LocalStartsAGpuWorkerForAnAutoencoderStudy) {
  const std::string path = ::testing::TempDir() + "/local-ae.yaml";
  std::ofstream(path) << R"(
name: local-ae
model: {kind: AUTOENCODER, fixed: {epochs: 3}}
dataset: {sensors: {samples: 800, seed: 4}}
parameters:
  - {name: bottleneck, int_range: {min: 3, max: 6}}
max_trials: 3
allow_cpu_fallback: true
)";
  auto [code, output] = RunCli("local --study=" + path);
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("0 CPU workers, 1 GPU workers"));
  EXPECT_THAT(output, HasSubstr("study local-ae: COMPLETED"));
  EXPECT_THAT(output, HasSubstr("on local-gpu-1 (cpu)"));
  // Without a GPU worker an AutoEncoder study could never run: refused up front.
  auto [refused_code, refused] = RunCli("local --gpu-workers=0 --study=" + path);
  EXPECT_EQ(refused_code, 1);
  EXPECT_THAT(refused, HasSubstr("give --gpu-workers=1 or more"));
}

// dhpt local runs one's own program: --command (one argument with a space in it, as the worker
// takes it) and --labels reach every worker it starts. Before, a COMMAND study or one with a
// worker_selector waited for ever, its hint naming a flag dhpt local refused.
TEST(CliTest, LocalRunsOwnCommandOnLabelledWorkers) {
  const std::string path = ::testing::TempDir() + "/local-command.yaml";
  std::ofstream(path) << R"(
name: local-quadratic
model: {kind: COMMAND, command: quad}
objective: {metric: loss, goal: MINIMIZE}
parameters:
  - {name: x, double_range: {min: -5, max: 5}}
  - {name: y, double_range: {min: -5, max: 5}}
worker_selector: {board: pi4}
max_trials: 4
)";
  const std::string script = DHPT_SOURCE_DIR "/examples/commands/quadratic.sh";
  auto [code, output] = RunCli(absl::StrCat("local --workers=1 --study=", path,
                                            " --command='quad=/bin/sh ", script,
                                            "' --labels=board=pi4,room=lab"));
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("study local-quadratic: COMPLETED"));
  EXPECT_THAT(output, HasSubstr("4 completed"));
}

// A study that none of its workers can run is refused with what to give dhpt local, at once.
TEST(CliTest, LocalRefusesAStudyItsWorkersCannotRun) {
  const std::string path = ::testing::TempDir() + "/local-unrunnable.yaml";
  std::ofstream(path) << R"(
name: local-unrunnable
model: {kind: COMMAND, command: quad}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: -5, max: 5}}]
worker_selector: {board: pi4}
max_trials: 2
)";
  auto [code, output] = RunCli("local --workers=1 --study=" + path);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(output, HasSubstr("give dhpt local --command=quad=PATH"));
  EXPECT_THAT(output, HasSubstr("give dhpt local --labels=board=pi4"));
  EXPECT_THAT(output, Not(HasSubstr("COMPLETED")));
  const std::string address = AddressFrom(output);
  ASSERT_FALSE(address.empty()) << output;
  EXPECT_EQ(ProcessesMentioning(address), 0);
}

// An AutoEncoder study that needs CUDA, on a machine without a CUDA device, ends with the reason
// instead of waiting for a CUDA worker that dhpt local will never start.
TEST(CliTest, LocalSaysWhenAnAutoencoderNeedsCudaThatIsNotHere) {
  if (std::filesystem::exists("/dev/nvidia0") || std::filesystem::exists("/dev/nvhost-gpu")) {
    GTEST_SKIP() << "this machine has a CUDA device";
  }
  const std::string path = ::testing::TempDir() + "/local-ae-cuda.yaml";
  std::ofstream(path) << R"(
name: local-ae-cuda
model: {kind: AUTOENCODER, fixed: {epochs: 3}}
dataset: {sensors: {samples: 800, seed: 4}}
parameters:
  - {name: bottleneck, int_range: {min: 3, max: 6}}
max_trials: 3
)";
  auto [code, output] = RunCli("local --study=" + path);
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("waiting for a CUDA worker"));
  EXPECT_THAT(output, HasSubstr("this machine has no CUDA device: set allow_cpu_fallback: true"));
}

TEST(CliTest, CtrlCStopsEveryProcessOfLocal) {
  const std::string log = ::testing::TempDir() + "/ctrl-c.log";
  const std::string out = ::testing::TempDir() + "/ctrl-c.out";
  // Owned, so that a failed wait below leaves no `dhpt local` behind; its stdout to a file, not
  // a pipe that its own children would hold open.
  const std::unique_ptr<cli::ChildProcess> local = StartProcess(
      {"/bin/sh", "-c",
       absl::StrCat("exec " DHPT_BIN_DIR "/dhpt local --demo=xgboost --log=", log, " >", out)});
  std::string address;
  ASSERT_TRUE(WaitFor([&] {
    std::ifstream in(out);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    address = AddressFrom(text);
    // Both workers and the dashboard are up.
    return !address.empty() && ProcessesMentioning(address) == 3;
  }));
  local->Signal(SIGINT);
  ASSERT_TRUE(WaitForExit(*local)) << "dhpt local did not exit after SIGINT";
  EXPECT_TRUE(WIFEXITED(local->wait_status()));
  EXPECT_EQ(WEXITSTATUS(local->wait_status()), 130);
  EXPECT_EQ(ProcessesMentioning(address), 0);
  std::ifstream in(log);
  std::string logged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(logged, HasSubstr("received Terminated; shutting down"));
}

// `dhpt local --help` lists every flag dhpt local takes (--log was missing).
TEST(CliTest, LocalHelpListsEveryLocalFlag) {
  auto [code, output] = RunCli("local --help");
  EXPECT_EQ(code, 0);
  for (const char* flag : {"--study=", "--demo=", "--workers=", "--gpu-workers=", "--slots=",
                           "--threads-per-trial=", "--data-root=", "--early-stopping=",
                           "--command=", "--labels=", "--plot=", "--log="}) {
    EXPECT_THAT(output, HasSubstr(flag)) << output;
  }
}

TEST(CliTest, EveryCommandHasHelpAndBadInputIsExplained) {
  for (const char* command : {"local", "submit", "watch", "trials", "best", "studies", "stop"}) {
    auto [code, output] = RunCli(absl::StrCat(command, " --help"));
    EXPECT_EQ(code, 0) << command;
    EXPECT_THAT(output, HasSubstr(absl::StrCat("dhpt ", command))) << command;
  }
  auto [code, output] = RunCli("submit /nonexistent.yaml");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("cannot read /nonexistent.yaml"));
  auto [unknown_code, unknown] = RunCli("frobnicate");
  EXPECT_EQ(unknown_code, 2);
  EXPECT_THAT(unknown, HasSubstr("unknown command"));
}

}  // namespace
}  // namespace dhpt::testing
