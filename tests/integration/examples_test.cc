// Every file in examples/ works as its comments say: each study file is valid and runs on real
// workers (budgets cut to a few trials), the COMMAND examples run as registered commands, and
// the ask-and-tell shell loop drives its study to the end.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "services/cli/study_file.h"
#include "services/study/spec_validation.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(DHPT_SOURCE_DIR) / "examples";

std::vector<fs::path> StudyFiles() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kExamples / "studies")) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The worker flags that register the example commands, as an operator would.
std::vector<std::string> CommandFlags() {
  return {absl::StrCat("--command=quadratic=", (kExamples / "commands/quadratic.sh").string()),
          absl::StrCat("--command=gbr=/usr/bin/python3 ",
                       (kExamples / "commands/sklearn_gbr.py").string())};
}

TEST(ExamplesTest, EveryStudyFileIsValid) {
  std::set<v1::Model::Kind> kinds;
  std::set<v1::Algorithm::Name> algorithms;
  for (const fs::path& file : StudyFiles()) {
    absl::StatusOr<v1::StudySpec> spec = cli::ReadStudyFile(file.string());
    ASSERT_TRUE(spec.ok()) << file << ": " << spec.status();
    absl::StatusOr<v1::StudySpec> normal = study::NormalizeStudySpec(*spec, {});
    ASSERT_TRUE(normal.ok()) << file << ": " << normal.status();
    kinds.insert(normal->model().kind());
    algorithms.insert(normal->algorithm().name());
  }
  // Each model kind and each family of algorithm has an example.
  EXPECT_EQ(kinds.size(), 6u);
  EXPECT_EQ(algorithms.size(), 6u);
}

TEST(ExamplesTest, EveryWorkerStudyRunsOnRealWorkers) {
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("cpu-examples", 2, "dhpt-cpu-worker", CommandFlags());
  // A build without libtorch (DHPT_WITH_TORCH=OFF) has no GPU worker to run the AutoEncoder.
  const bool gpu_worker = fs::exists(fs::path(DHPT_BIN_DIR) / "dhpt-gpu-worker");
  if (gpu_worker) cluster.SpawnWorkerProcess("gpu-examples", 1, "dhpt-gpu-worker");
  for (const fs::path& file : StudyFiles()) {
    SCOPED_TRACE(file.string());
    v1::StudySpec spec = *cli::ReadStudyFile(file.string());
    if (spec.model().kind() == v1::Model::EXTERNAL) continue;  // The ask-tell test runs it.
    if (spec.model().kind() == v1::Model::AUTOENCODER && !gpu_worker) continue;
    spec.set_max_trials(spec.max_trials() == 0 ? 3 : std::min(spec.max_trials(), 3));
    ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
    const v1::Study study = cluster.WaitForEnd(spec.name(), absl::Minutes(3));
    EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
    EXPECT_GE(study.trials_completed(), 1);
    const std::vector<v1::Trial> trials = *cluster.client().ListTrials(spec.name());
    for (const v1::Trial& trial : trials) {
      EXPECT_NE(trial.state(), v1::Trial::FAILED) << trial.error();
    }
  }
}

TEST(ExamplesTest, TheAskTellLoopDrivesItsStudyToTheEnd) {
  TestCluster cluster(0);
  const auto [status, output] = RunCommandLine(
      absl::StrCat("DHPT_SCHEDULER=", cluster.address(), " DHPT=", DHPT_BIN_DIR, "/dhpt sh ",
                   (kExamples / "ask-tell.sh").string()));
  ASSERT_EQ(status, 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr("COMPLETED (all 15 trials finished)"));
  const v1::Study study = *cluster.client().GetStudy("example-ask-tell");
  EXPECT_EQ(study.trials_completed(), 15);
  // Bayesian optimisation finds the bowl's bottom (1/3 at x = 1, y = -2) within 15 trials.
  EXPECT_LT(study.best_trial().objective_value(), 1.0);
}

// The line docs/user-code.md once showed unquoted: the shell split it, the worker registered
// "gbr=/usr/bin/python3" and dropped the script. Every binary now refuses a stray word (exit 2)
// and shows the value quoted; the dhpt commands of flags only too. (timeout: a binary that took
// the words would run on, waiting for its scheduler.)
TEST(ExamplesTest, EveryBinaryRefusesStrayArgumentsShowingHowToQuote) {
  const std::string bin = DHPT_BIN_DIR;
  const std::string script = (kExamples / "commands/sklearn_gbr.py").string();
  std::vector<std::string> workers = {"dhpt-cpu-worker"};
  if (fs::exists(fs::path(bin) / "dhpt-gpu-worker")) workers.push_back("dhpt-gpu-worker");
  for (const std::string& binary : workers) {
    SCOPED_TRACE(binary);
    const auto [status, output] = RunCommandLine(
        absl::StrCat("timeout 20 ", bin, "/", binary,
                     " --scheduler=127.0.0.1:1 --command=gbr=/usr/bin/python3 ", script,
                     " --command_env=DATA_DIR"));
    EXPECT_EQ(status, 2) << output;
    EXPECT_THAT(output, ::testing::HasSubstr(absl::StrCat(
                            "unexpected argument \"", script, "\"")));
    EXPECT_THAT(output, ::testing::HasSubstr(absl::StrCat(
                            "--command='gbr=/usr/bin/python3 ", script, "'")));
  }
  {
    const auto [status, output] = RunCommandLine(absl::StrCat(
        "timeout 20 ", bin, "/dhpt-scheduler --listen=127.0.0.1:0 --db=:memory: extra"));
    EXPECT_EQ(status, 2) << output;
    EXPECT_THAT(output, ::testing::HasSubstr("--db=':memory: extra'"));
  }
  for (const std::string command : {"studies extra", "workers extra", "local --data-root=a b"}) {
    SCOPED_TRACE(command);
    const auto [status, output] =
        RunCommandLine(absl::StrCat("timeout 20 ", bin, "/dhpt ", command));
    EXPECT_EQ(status, 2) << output;
    EXPECT_THAT(output, ::testing::HasSubstr("unexpected argument"));
  }
  const auto [status, output] =
      RunCommandLine(absl::StrCat("timeout 20 ", bin, "/dhpt local --data-root=a b"));
  EXPECT_THAT(output, ::testing::HasSubstr("--data-root='a b'"));
}

}  // namespace
}  // namespace dhpt::testing
