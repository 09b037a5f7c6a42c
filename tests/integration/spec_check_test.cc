// A study file checked before anything is created (dhpt validate, dhpt submit --dry-run), and
// a CSV path relative to a real worker process's data root.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "services/common/param_values.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing::spec_check_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(SpecCheckTest, ValidateAndDryRunListEveryErrorWithoutAScheduler) {
  const std::string bad = WriteFile("spec-check-bad.yaml", R"(
name: ae-bad
model: {kind: AUTOENCODER}
dataset: {sensors: {samples: 500, channels: 8}}
objective: {metric: mse}
parameters:
  - {name: bottleneck, int_range: {min: 2, max: 8}}
  - {name: dropout, double_range: {min: 0.1, max: 1.2}}
trial_timeout: 10m
max_trials: 0
)");
  for (const std::string& command : {"validate " + bad, "submit " + bad + " --dry-run"}) {
    // No scheduler listens at this address: nothing may be asked of one.
    auto [code, output] = RunBinary("dhpt", command + " --scheduler=127.0.0.1:1");
    EXPECT_EQ(code, 1) << command << "\n" << output;
    EXPECT_THAT(output, HasSubstr(bad + ": 3 errors")) << command;
    EXPECT_THAT(output, HasSubstr("max_trials: must be between 1 and 1000000")) << command;
    EXPECT_THAT(output, HasSubstr("parameters[0].int_range: bottleneck 8 must be smaller than "
                                  "the data's 8 channels"))
        << command;
    EXPECT_THAT(output, HasSubstr("parameters[1].double_range: dropout must be in [0, 1), got 1.2"))
        << command;
    EXPECT_THAT(output, Not(HasSubstr("UNAVAILABLE"))) << command;
  }
  const std::string good = WriteFile("spec-check-good.yaml", R"(
name: branin-ok
model: {kind: FUNCTION, function: branin}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 3, max: 3}}
trial_timeout: 1h30m
max_trials: 5
)");
  auto [code, output] = RunBinary("dhpt", "submit " + good + " --dry-run --scheduler=127.0.0.1:1");
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("valid: study branin-ok, FUNCTION, RANDOM, 5 trials; nothing was "
                                "created"));
}

TEST(SpecCheckTest, SubmitOfABadFileNamesTheFirstErrorAndHowToSeeThemAll) {
  TestCluster cluster(0);
  const std::string bad = WriteFile("spec-check-submit.yaml", R"(
name: xgb-bad
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 500, features: 10}}
parameters:
  - {name: colsample_bynode, double_range: {min: 0.5, max: 1.5}}
max_trials: 0
)");
  auto [code, output] =
      RunBinary("dhpt", "submit " + bad + " --scheduler=" + cluster.address());
  EXPECT_EQ(code, 1) << output;
  EXPECT_THAT(output, HasSubstr("max_trials: must be between 1 and 1000000 (and 1 more: dhpt "
                                "validate " + bad + " lists them) [INVALID_ARGUMENT]"));
  EXPECT_FALSE(cluster.client().GetStudy("xgb-bad").ok());
}

TEST(SpecCheckTest, EveryAlgorithmRunsARangeOfOneValueAsThatValue) {
  TestCluster cluster(1);
  for (const char* algorithm : {"RANDOM", "GRID", "TPE", "BAYESIAN", "HILL_CLIMBING"}) {
    const std::string name = absl::AsciiStrToLower(absl::StrCat("fixed-", algorithm));
    const std::string grid = std::string(algorithm) == "GRID" ? "" : "max_trials: 14\n";
    ASSERT_TRUE(cluster.client()
                    .CreateStudy(Spec(absl::StrCat("name: ", name, R"(
model: {kind: FUNCTION, function: branin}
algorithm: {name: )", algorithm, R"(, seed: 3}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, int_range: {min: 3, max: 3}}
)", grid)))
                    .ok())
        << algorithm;
    const v1::Study study = cluster.WaitForEnd(name);
    EXPECT_EQ(study.state(), v1::Study::COMPLETED) << algorithm << ": " << study.state_reason();
    absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials(name);
    ASSERT_TRUE(trials.ok());
    EXPECT_EQ(trials->size(), std::string(algorithm) == "GRID" ? 5u : 14u) << algorithm;
    for (const v1::Trial& trial : *trials) {
      EXPECT_EQ(trial.state(), v1::Trial::COMPLETED) << algorithm;
      EXPECT_EQ(AsNumber(trial.params().at("x2")), 3.0) << algorithm;
    }
  }
}

TEST(SpecCheckTest, ACsvPathRelativeToTheWorkersDataRootIsRead) {
  TestCluster cluster(0);
  // A real dhpt-cpu-worker with --data_root=tests/data, started from this test's directory,
  // which holds no small.csv.
  ASSERT_FALSE(std::filesystem::exists("small.csv"));
  cluster.SpawnWorkerProcess("relative-csv");
  ASSERT_TRUE(cluster.client()
                  .CreateStudy(Spec(R"(
name: relative-csv
model: {kind: RANDOM_FOREST, fixed: {n_estimators: 5}}
dataset: {csv: {path: small.csv, target: price}}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
max_trials: 3
max_failed_trials: 0
)"))
                  .ok());
  const v1::Study study = cluster.WaitForEnd("relative-csv");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 3);
}

}  // namespace
}  // namespace dhpt::testing::spec_check_test
