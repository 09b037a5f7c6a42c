#include "services/cli/pareto_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "google/protobuf/text_format.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;

v1::Study EdgeStudy(int objectives) {
  v1::Study study;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    spec {
      name: "xgb-edge"
      objectives { metric: "r2" goal: MAXIMIZE }
      objectives { metric: "inference_latency_us" goal: MINIMIZE }
      constraints { metric: "model_bytes" max: 4000000 }
      parameters { name: "max_depth" int_range { min: 2 max: 10 } }
    })pb", &study));
  if (objectives == 3) {
    v1::Objective* third = study.mutable_spec()->add_objectives();
    third->set_metric("model_bytes");
    third->set_goal(v1::Objective::MINIMIZE);
  }
  return study;
}

v1::Trial Trial(int number, double r2, double latency, double bytes, bool infeasible = false) {
  v1::Trial trial;
  trial.set_id(100 + number);
  trial.set_number(number);
  trial.set_state(v1::Trial::COMPLETED);
  trial.add_objective_values(r2);
  trial.add_objective_values(latency);
  (*trial.mutable_metrics())["r2"] = r2;
  (*trial.mutable_metrics())["inference_latency_us"] = latency;
  (*trial.mutable_metrics())["model_bytes"] = bytes;
  (*trial.mutable_params())["max_depth"].set_int_value(number + 2);
  trial.set_infeasible(infeasible);
  return trial;
}

TEST(ParetoReportTest, TheTableShowsObjectivesConstraintsAndParameters) {
  v1::GetParetoFrontResponse front;
  *front.add_trials() = Trial(3, 0.91, 12.5, 250000);
  *front.add_trials() = Trial(7, 0.95, 40, 900000);
  front.set_hypervolume(1.25);
  front.add_reference_point(0.5);
  front.add_reference_point(100);
  const std::string table = ParetoTable(EdgeStudy(2), front);
  EXPECT_THAT(table, HasSubstr("Pareto front of xgb-edge: 2 trials, hypervolume 1.25 from (0.5, 100)"));
  EXPECT_THAT(table, HasSubstr("r2 (max)"));
  EXPECT_THAT(table, HasSubstr("inference_latency_us (min)"));
  EXPECT_THAT(table, HasSubstr("model_bytes"));
  EXPECT_THAT(table, HasSubstr("max_depth"));
  EXPECT_THAT(table, HasSubstr("0.95"));
  EXPECT_THAT(table, HasSubstr("900000"));
}

TEST(ParetoReportTest, ThreeObjectivesArePlottedPairByPair) {
  const std::string script = ParetoPlotScript(EdgeStudy(3).spec(), "svg");
  EXPECT_THAT(script, HasSubstr("set multiplot layout 2,2"));
  EXPECT_THAT(script, HasSubstr("using 1:2"));
  EXPECT_THAT(script, HasSubstr("using 1:3"));
  EXPECT_THAT(script, HasSubstr("using 2:3"));
  // Enhanced text would read the underscores as subscripts.
  EXPECT_THAT(script, HasSubstr("inference\\\\_latency\\\\_us"));
  EXPECT_THAT(ParetoPlotScript(EdgeStudy(2).spec(), "svg"), ::testing::Not(HasSubstr("multiplot")));
}

TEST(ParetoReportTest, DrawsThePlotWithGnuplot) {
  if (!std::filesystem::exists("/usr/bin/gnuplot")) {
    GTEST_SKIP() << "gnuplot-nox is not installed (scripts/install-deps.sh installs it)";
  }
  testing::TempDirectory directory;
  std::vector<v1::Trial> trials = {Trial(0, 0.91, 12.5, 250000), Trial(1, 0.95, 40, 900000),
                                   Trial(2, 0.80, 30, 100000), Trial(3, 0.97, 9, 9e6, true)};
  v1::GetParetoFrontResponse front;
  *front.add_trials() = trials[0];
  *front.add_trials() = trials[1];
  absl::StatusOr<std::vector<std::string>> files =
      DrawParetoPlot(EdgeStudy(2), trials, front, directory.path());
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ::testing::ElementsAre("pareto.svg", "pareto.png"));
  for (const std::string& file : *files) {
    EXPECT_GT(std::filesystem::file_size(std::filesystem::path(directory.path()) / file), 1000u);
  }
  std::ifstream infeasible(std::filesystem::path(directory.path()) / "data" / "infeasible.dat");
  std::string all((std::istreambuf_iterator<char>(infeasible)), std::istreambuf_iterator<char>());
  EXPECT_THAT(all, HasSubstr("0.97 9 3\n"));
}

// The script gnuplot draws from frames every completed trial, the one far from the front too.
TEST(ParetoReportTest, ThePlotFramesTrialsFarFromTheFront) {
  if (!std::filesystem::exists("/usr/bin/gnuplot")) {
    GTEST_SKIP() << "gnuplot-nox is not installed (scripts/install-deps.sh installs it)";
  }
  testing::TempDirectory directory;
  std::vector<v1::Trial> trials = {Trial(0, 0.91, 12.5, 250000), Trial(1, 0.95, 40, 900000),
                                   Trial(2, -4.0, 300, 100000)};
  v1::GetParetoFrontResponse front;
  *front.add_trials() = trials[0];
  *front.add_trials() = trials[1];
  ASSERT_TRUE(DrawParetoPlot(EdgeStudy(2), trials, front, directory.path()).ok());
  std::ifstream file(std::filesystem::path(directory.path()) / "pareto-svg.gp");
  const std::string script((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  double x_low = 0, x_high = 0, y_low = 0, y_high = 0;
  const size_t at = script.find("set xrange [");
  ASSERT_NE(at, std::string::npos) << script;
  ASSERT_EQ(std::sscanf(script.c_str() + at, "set xrange [%lf:%lf]\nset yrange [%lf:%lf]", &x_low,
                        &x_high, &y_low, &y_high), 4) << script;
  for (const v1::Trial& trial : trials) {
    EXPECT_LT(x_low, trial.objective_values(0)) << script;
    EXPECT_GT(x_high, trial.objective_values(0)) << script;
    EXPECT_LT(y_low, trial.objective_values(1)) << script;
    EXPECT_GT(y_high, trial.objective_values(1)) << script;
  }
  EXPECT_THAT(script, HasSubstr("'data/front.dat' using 1:2 with linespoints"));
}

// The axes used to frame the front only, so trials far from it (an r2 of -4, a slow model)
// fell outside the picture: 5 of ZDT1's 60 were visible.
TEST(ParetoReportTest, TheAxesShowEveryCompletedTrial) {
  const std::vector<v1::Trial> trials = {Trial(0, 0.91, 12.5, 250000), Trial(1, 0.95, 40, 900000),
                                         Trial(2, -4.0, 30, 100000), Trial(3, 0.5, 900, 100000),
                                         Trial(4, 0.97, 9, 9e6, true)};
  std::vector<const v1::Trial*> completed;
  for (const v1::Trial& trial : trials) completed.push_back(&trial);
  const std::vector<std::pair<double, double>> ranges = ParetoAxisRanges(2, completed);
  ASSERT_EQ(ranges.size(), 2u);
  for (const v1::Trial& trial : trials) {
    for (int i = 0; i < 2; ++i) {
      EXPECT_LT(ranges[i].first, trial.objective_values(i)) << "trial " << trial.number();
      EXPECT_GT(ranges[i].second, trial.objective_values(i)) << "trial " << trial.number();
    }
  }
  EXPECT_GE(ranges[1].first, 0.0);  // Latencies are never negative.
  // A trial without every objective value leaves the axes to gnuplot.
  v1::Trial partial = Trial(5, 0.9, 10, 1);
  partial.clear_objective_values();
  completed.push_back(&partial);
  EXPECT_TRUE(ParetoAxisRanges(2, completed).empty());
}

// The front is drawn over the other trials and, with two objectives, joined by a line.
TEST(ParetoReportTest, TheFrontIsHighlighted) {
  const std::string two = ParetoPlotScript(EdgeStudy(2).spec(), "svg");
  EXPECT_THAT(two, HasSubstr("'data/front.dat' using 1:2 with linespoints"));
  const std::string three = ParetoPlotScript(EdgeStudy(3).spec(), "svg");
  EXPECT_THAT(three, HasSubstr("'data/front.dat' using 2:3 with points"));
}

TEST(ParetoReportTest, NothingToDrawAndUnusableFoldersAreClearErrors) {
  testing::TempDirectory directory;
  const std::string dir = directory.path() + "/plots";
  std::vector<v1::Trial> failed(1);
  failed[0].set_state(v1::Trial::FAILED);
  absl::Status status = DrawParetoPlot(EdgeStudy(2), failed, {}, dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no completed trial yet"));
  const std::vector<v1::Trial> trials = {Trial(0, 0.9, 10, 1000)};
  status = DrawParetoPlot(EdgeStudy(2), trials, {}, directory.path() + "/it's").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(directory.path() + "/it's")) << "refused before writing";
  std::ofstream(directory.path() + "/file") << "x";
  status = DrawParetoPlot(EdgeStudy(2), trials, {}, directory.path() + "/file/sub").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("Not a directory"));
}

TEST(ParetoReportTest, ASingleObjectiveStudyHasNoPlot) {
  v1::Study study;
  study.mutable_spec()->set_name("one");
  study.mutable_spec()->mutable_objective()->set_metric("r2");
  EXPECT_EQ(DrawParetoPlot(study, {}, {}, "/nonexistent").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dhpt::cli
