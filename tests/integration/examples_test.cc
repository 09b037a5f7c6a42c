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

}  // namespace
}  // namespace dhpt::testing
