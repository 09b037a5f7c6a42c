// `dhpt compare` end to end: the real CLI starts a real scheduler, workers and a sequential
// worker process, runs real trials, and writes report.json, report.md and gnuplot's plots.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "dhpt/v1/compare.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/cli/study_file.h"
#include "services/common/param_values.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::filesystem::path& path) {
  return cli::ReadTextFile(path.string(), cli::kMaxExportFileBytes).value_or("");
}

// report.json must be a CompareReport exactly: unknown or mistyped fields fail the parse.
v1::CompareReport ParseReport(const std::filesystem::path& dir) {
  v1::CompareReport report;
  google::protobuf::util::JsonParseOptions strict;
  strict.ignore_unknown_fields = false;
  auto status =
      google::protobuf::util::JsonStringToMessage(ReadFile(dir / "report.json"), &report, strict);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return report;
}

std::multiset<std::string> Points(const v1::RunReport& run) {
  std::multiset<std::string> points;
  for (const v1::Trial& trial : run.trials()) {
    std::string key;
    for (const auto& [name, value] : std::map<std::string, v1::ParameterValue>(
             trial.params().begin(), trial.params().end())) {
      absl::StrAppend(&key, name, "=", FormatParameterValue(value), " ");
    }
    points.insert(key);
  }
  return points;
}

void ExpectConsistent(const v1::CompareReport& report, int trials) {
  for (const v1::RunReport* run : {&report.sequential(), &report.framework()}) {
    SCOPED_TRACE(v1::RunReport::Mode_Name(run->mode()));
    EXPECT_EQ(run->state(), v1::Study::COMPLETED) << run->state_reason();
    EXPECT_EQ(run->trials_size(), trials);
    EXPECT_EQ(run->summary().trials_completed(), trials);
    EXPECT_GT(run->wall_seconds(), 0);
    EXPECT_TRUE(run->summary().processes_measured());
    // The summary follows from the trials it reports.
    const bool maximize = report.spec().objective().goal() == v1::Objective::MAXIMIZE;
    double best = run->trials(0).objective_value();
    double trial_seconds = 0;
    for (const v1::Trial& trial : run->trials()) {
      best = maximize ? std::max(best, trial.objective_value())
                      : std::min(best, trial.objective_value());
      trial_seconds += trial.metrics().at("wall_seconds");
    }
    EXPECT_DOUBLE_EQ(run->summary().best_objective(), best);
    EXPECT_NEAR(run->summary().trial_seconds_sum(), trial_seconds, 1e-9);
    EXPECT_NEAR(run->summary().overhead_seconds(),
                run->wall_seconds() * run->workers() * run->slots_per_worker() - trial_seconds,
                1e-9);
    double cpu = 0, peak_sum = 0;
    for (const v1::ProcessUsage& process : run->processes()) {
      EXPECT_GE(process.cpu_seconds(), 0) << process.name();
      EXPECT_GT(process.peak_rss_bytes(), 1 << 20) << process.name();
      cpu += process.cpu_seconds();
      peak_sum += process.peak_rss_bytes();
    }
    EXPECT_NEAR(run->summary().cpu_seconds(), cpu, 1e-9);
    EXPECT_NEAR(run->summary().peak_rss_bytes_sum(), peak_sum, 1e-6);
  }
  EXPECT_EQ(report.sequential().processes_size(), 1);
  EXPECT_EQ(report.framework().processes_size(), 1 + report.framework().workers());
  EXPECT_EQ(report.framework().processes(0).name(), "scheduler");
  EXPECT_NEAR(report.speedup(),
              report.sequential().wall_seconds() / report.framework().wall_seconds(), 1e-9);
  // Threads per trial are the same in both runs (a fairness rule).
  EXPECT_EQ(report.sequential().threads_per_trial(), report.framework().threads_per_trial());
  EXPECT_GE(report.machine().cores(), 1);
  // What ran, with its libraries.
  EXPECT_THAT(report.versions().at("dhpt-scheduler"), HasSubstr("(grpc 1."));
  EXPECT_THAT(report.versions().at("dhpt-cpu-worker"), HasSubstr("xgboost "));
}

void ExpectPlots(const std::filesystem::path& dir) {
  for (const char* name : {"best_so_far", "trial_durations", "resources"}) {
    const std::string svg = ReadFile(dir / absl::StrCat(name, ".svg"));
    EXPECT_THAT(svg, HasSubstr("<svg")) << name;
    EXPECT_THAT(svg, HasSubstr("</svg>")) << name;
    const std::string png = ReadFile(dir / absl::StrCat(name, ".png"));
    ASSERT_GT(png.size(), 1000u) << name;
    EXPECT_EQ(png.substr(1, 3), "PNG") << name;
  }
}

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("dhpt-compare-test-", getpid(), "-",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

TEST_F(CompareTest, FunctionStudyGivesTheSamePointsAndAConsistentReport) {
  const std::string study = Write("branin.yaml", R"(
name: branin-compare
model: {kind: FUNCTION, function: branin}
objective: {metric: value, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 11}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 0, max: 15}}
max_trials: 16
)");
  const std::filesystem::path out = dir_ / "out";
  const auto [code, output] =
      RunBinary("dhpt", absl::StrCat("compare --study=", study, " --workers=2 --out=", out.string()));
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("speedup"));
  EXPECT_THAT(output, HasSubstr("best value"));
  const v1::CompareReport report = ParseReport(out);
  ExpectConsistent(report, 16);
  EXPECT_EQ(report.framework().workers(), 2);
  EXPECT_TRUE(report.same_points());
  EXPECT_EQ(Points(report.sequential()), Points(report.framework()));
  // Same points, same function: the same best value.
  EXPECT_DOUBLE_EQ(report.sequential().summary().best_objective(),
                   report.framework().summary().best_objective());
  ExpectPlots(out);
  const std::string md = ReadFile(out / "report.md");
  EXPECT_THAT(md, HasSubstr("| wall time (s)"));
  EXPECT_THAT(md, HasSubstr("![best_so_far.svg](best_so_far.svg)"));
  EXPECT_THAT(md, HasSubstr("Both runs tried the same set of parameter points"));
  // Both local workers are on this machine: one node row, with their slots and every trial.
  ASSERT_EQ(report.framework().nodes_size(), 1);
  EXPECT_EQ(report.framework().nodes(0).slots(), 2);
  EXPECT_EQ(report.framework().nodes(0).trials(), 16);
  EXPECT_GT(report.framework().nodes(0).busy_seconds(), 0);
  EXPECT_THAT(md, HasSubstr("## Framework nodes"));
  // The spec both runs ran is kept, with its defaults.
  EXPECT_THAT(ReadFile(out / "spec.json"), HasSubstr("\"max_attempts\""));
}

TEST_F(CompareTest, XgboostGridGivesTheSamePointsAndResultsInBothRuns) {
  const std::string study = Write("xgb.yaml", R"(
name: xgb-compare
model: {kind: XGBOOST, fixed: {objective: "reg:squarederror", tree_method: hist, seed: 1}}
dataset: {friedman1: {samples: 1500, features: 6, noise: 1.0, seed: 3}}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: GRID, grid_points: 3}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
  - {name: num_boost_round, int_range: {min: 20, max: 40, step: 20}}
max_trials: 50
)");
  const std::filesystem::path out = dir_ / "out";
  const auto [code, output] = RunBinary(
      "dhpt", absl::StrCat("compare --study=", study, " --workers=2 --out=", out.string()));
  ASSERT_EQ(code, 0) << output;
  const v1::CompareReport report = ParseReport(out);
  ExpectConsistent(report, 6);  // The whole 3 x 2 grid, then the space is exhausted.
  EXPECT_EQ(Points(report.sequential()), Points(report.framework()));
  // One thread per trial in both runs: XGBoost is deterministic, trial for trial.
  std::map<std::string, double> sequential_r2;
  for (const v1::Trial& trial : report.sequential().trials()) {
    sequential_r2[absl::StrCat(trial.params().at("max_depth").int_value(), "/",
                               trial.params().at("num_boost_round").int_value())] =
        trial.objective_value();
  }
  for (const v1::Trial& trial : report.framework().trials()) {
    EXPECT_DOUBLE_EQ(trial.objective_value(),
                     sequential_r2[absl::StrCat(trial.params().at("max_depth").int_value(), "/",
                                                trial.params().at("num_boost_round").int_value())]);
    EXPECT_THAT(trial.worker_id(), HasSubstr("local-cpu-"));
  }
  EXPECT_GT(report.framework().summary().best_objective(), 0.5);
  ExpectPlots(out);
}

TEST_F(CompareTest, BothRunsCountPrunedTrialsWithinReachOfTheBest) {
  // The study of SequentialStudyTest.CountsPrunedTrialsWithinReachOfTheBestAsGetStudyDoes: its
  // sequential run stops two trials level with the eventual best (XGBoost on one thread is
  // deterministic). The framework's count comes from GetStudy; its trials may interleave.
  const std::string study = Write("reach.yaml", R"(
name: reach
model: {kind: XGBOOST, fixed: {num_boost_round: 80}}
dataset: {friedman1: {samples: 300, features: 10, noise: 1, seed: 0}}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: RANDOM, seed: 7}
parameters:
  - {name: eta, double_range: {min: 0.01, max: 0.5, log: true}}
  - {name: max_depth, int_range: {min: 1, max: 6}}
early_stopping: {asha: {min_resource: 10, reduction_factor: 2}}
max_trials: 16
)");
  const std::filesystem::path out = dir_ / "out";
  const auto [code, output] = RunBinary(
      "dhpt", absl::StrCat("compare --study=", study, " --workers=1 --out=", out.string()));
  ASSERT_EQ(code, 0) << output;
  const v1::CompareReport report = ParseReport(out);
  EXPECT_EQ(report.sequential().trials_pruned_within_reach(), 2);
  EXPECT_LE(report.framework().trials_pruned_within_reach(),
            report.framework().summary().trials_pruned());
  EXPECT_THAT(ReadFile(out / "report.md"), HasSubstr("pruned within reach of the best"));
}

TEST_F(CompareTest, MatrixRunsEveryCellAndResumes) {
  const std::string matrix = Write("matrix.yaml", R"(
studies:
  - spec:
      name: levy
      model: {kind: FUNCTION, function: levy}
      algorithm: {name: GRID, grid_points: 4}
      parameters:
        - {name: x1, double_range: {min: -10, max: 10}}
        - {name: x2, double_range: {min: -10, max: 10}}
  - demo: branin
algorithms: [RANDOM, GRID]
max_trials: 8
seed: 4
)");
  const std::filesystem::path out = dir_ / "matrix-out";
  const std::string args = absl::StrCat("compare --matrix=", matrix, " --workers=2 --out=", out.string());
  {
    const auto [code, output] = RunBinary("dhpt", args);
    ASSERT_EQ(code, 0) << output;
    EXPECT_THAT(output, HasSubstr("levy-random"));
  }
  v1::MatrixReport summary;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(out / "report.json"), &summary).ok());
  ASSERT_EQ(summary.cells_size(), 4);
  std::set<std::string> names;
  for (const v1::MatrixCell& cell : summary.cells()) {
    names.insert(cell.name());
    EXPECT_EQ(cell.sequential().trials_completed(), 8) << cell.name();
    EXPECT_EQ(cell.framework().trials_completed(), 8) << cell.name();
    const v1::CompareReport report = ParseReport(out / "cells" / cell.name());
    EXPECT_EQ(report.spec().algorithm().seed(), 4u);
    EXPECT_EQ(report.spec().max_trials(), 8);
    EXPECT_EQ(report.spec().name(), cell.name());
  }
  EXPECT_EQ(names, (std::set<std::string>{"levy-random", "levy-grid", "demo-branin-random",
                                          "demo-branin-grid"}));
  // The study's own grid settings stay with GRID and leave the other algorithms.
  EXPECT_EQ(ParseReport(out / "cells" / "levy-grid").spec().algorithm().grid_points(), 4);
  EXPECT_EQ(ParseReport(out / "cells" / "levy-random").spec().algorithm().grid_points(), 0);
  EXPECT_THAT(ReadFile(out / "report.md"), HasSubstr("| levy-grid"));

  // Interrupted after three cells: a second run redoes only the missing one.
  std::filesystem::remove(out / "cells" / "levy-grid" / "report.json");
  const std::string kept = ReadFile(out / "cells" / "levy-random" / "report.json");
  const auto [code, output] = RunBinary("dhpt", args);
  ASSERT_EQ(code, 0) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n') > 0, true);
  size_t kept_lines = 0;
  for (size_t at = output.find("kept from an earlier run"); at != std::string::npos;
       at = output.find("kept from an earlier run", at + 1)) {
    ++kept_lines;
  }
  EXPECT_EQ(kept_lines, 3u) << output;
  EXPECT_EQ(ReadFile(out / "cells" / "levy-random" / "report.json"), kept);
  EXPECT_TRUE(std::filesystem::exists(out / "cells" / "levy-grid" / "report.json"));
}

TEST_F(CompareTest, BadInputIsRefusedWithAClearMessage) {
  {
    const std::string study = Write("bad.yaml", R"(
name: bad
model: {kind: FUNCTION, function: branin}
parameters:
  - {name: x1, double_range: {min: 5, max: 1}}
  - {name: x2, double_range: {min: 0, max: 15}}
)");
    const auto [code, output] =
        RunBinary("dhpt", absl::StrCat("compare --study=", study, " --out=", (dir_ / "o").string()));
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("parameters[0]"));
    EXPECT_THAT(output, HasSubstr("INVALID_ARGUMENT"));
  }
  {
    const std::string matrix = Write("empty.yaml", "algorithms: [TPE]\n");
    const auto [code, output] = RunBinary("dhpt", "compare --matrix=" + matrix);
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("studies is empty"));
  }
  {
    const std::string matrix = Write("typo.yaml", "studies: [{demo: branin}]\nalgoritms: [TPE]\n");
    const auto [code, output] = RunBinary("dhpt", "compare --matrix=" + matrix);
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("algoritms"));
  }
  {
    // A remote scheduler that is not there.
    const auto [code, output] = RunBinary(
        "dhpt", absl::StrCat("compare --demo=branin --scheduler=127.0.0.1:1 --out=",
                             (dir_ / "remote").string()));
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("UNAVAILABLE"));
  }
}

}  // namespace
}  // namespace dhpt::testing
