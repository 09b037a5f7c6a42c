#include "services/cli/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/cli/demo_studies.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;

TEST(ReportTest, TableHasAColumnPerParameterAndMeasurement) {
  v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial trial;
  trial.set_number(3);
  trial.set_state(v1::Trial::COMPLETED);
  (*trial.mutable_params())["x1"].set_double_value(1.5);
  (*trial.mutable_params())["x2"].set_double_value(2.25);
  trial.set_objective_value(0.5);
  (*trial.mutable_metrics())["wall_seconds"] = 0.25;
  (*trial.mutable_metrics())["peak_rss_bytes"] = 64 << 20;
  trial.set_worker_id("w1");
  std::string table = TrialsTable(spec, {trial});
  EXPECT_THAT(table, HasSubstr("x1"));
  EXPECT_THAT(table, HasSubstr("peak MiB"));
  EXPECT_THAT(table, HasSubstr("completed"));
  EXPECT_THAT(table, HasSubstr("2.25"));
  EXPECT_THAT(table, HasSubstr(" 64 "));
}

// Text that users and workers wrote reaches the terminal escaped: no escape code runs, no
// carriage return rewrites a line.
TEST(ReportTest, ControlCharactersInWhatOthersWroteAreShownEscaped) {
  v1::Study study;
  *study.mutable_spec() = *DemoStudy("branin");
  study.mutable_spec()->mutable_parameters(0)->clear_double_range();
  study.mutable_spec()->mutable_parameters(0)->mutable_categorical()->add_values("a");
  study.set_state(v1::Study::COMPLETED);
  study.set_state_reason("done\r\x1b[2Kfaked");
  v1::Trial trial;
  trial.set_number(1);
  trial.set_state(v1::Trial::COMPLETED);
  (*trial.mutable_params())["x1"].set_string_value("\x1b]0;title\x07v\xc2\x9b\xe2\x80\xae");
  (*trial.mutable_params())["x2"].set_double_value(2);
  trial.set_objective_value(0.5);
  trial.set_worker_id("w\n1");
  *study.mutable_best_trial() = trial;
  const std::string shown = TrialsTable(study.spec(), {trial}) + StudySummary(study) +
                            ProgressLine(study);
  for (size_t i = 0; i < shown.size(); ++i) {
    const auto c = static_cast<unsigned char>(shown[i]);
    EXPECT_TRUE(c >= 0x20 || c == '\n') << "byte " << int(c) << " at " << i << ":\n" << shown;
    EXPECT_FALSE(c == 0xc2 && i + 1 < shown.size() && (shown[i + 1] & 0xe0) == 0x80);
  }
  EXPECT_THAT(shown, HasSubstr("\\x1b]0;title\\x07v\\u009b\\u202e"));
  EXPECT_THAT(shown, HasSubstr("done\\x0d\\x1b[2Kfaked"));
  EXPECT_THAT(shown, HasSubstr("w\\x0a1"));
}

TEST(ReportTest, APrunedTrialShowsTheStepAndValueItReached) {
  v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial trial;
  trial.set_number(4);
  trial.set_state(v1::Trial::PRUNED);
  (*trial.mutable_metrics())["value"] = 17.25;
  (*trial.mutable_metrics())["pruned_step"] = 120;
  std::string table = TrialsTable(spec, {trial});
  EXPECT_THAT(table, HasSubstr("pruned@120"));
  EXPECT_THAT(table, HasSubstr("17.25"));
}

TEST(ReportTest, TheStudiesTableCountsPrunedTrialsAsDone) {
  v1::Study study;
  *study.mutable_spec() = *DemoStudy("branin");
  study.set_state(v1::Study::COMPLETED);
  study.set_trials_completed(11);
  study.set_trials_pruned(69);
  study.mutable_spec()->set_max_trials(80);
  const std::string table = StudiesTable({study});
  EXPECT_THAT(table, HasSubstr("pruned"));
  EXPECT_THAT(table, HasSubstr("80/80"));
  EXPECT_THAT(table, HasSubstr(" 69 "));
}

TEST(ReportTest, ProgressAndSummaryShowTheBest) {
  v1::Study study;
  *study.mutable_spec() = *DemoStudy("branin");
  study.set_state(v1::Study::RUNNING);
  study.set_trials_completed(5);
  study.set_trials_failed(1);
  study.set_trials_running(2);
  study.mutable_best_trial()->set_objective_value(0.4);
  (*study.mutable_best_trial()->mutable_params())["x1"].set_double_value(3.1);
  EXPECT_THAT(ProgressLine(study), HasSubstr("6/200 done (1 failed)  2 running  best value 0.4"));
  EXPECT_THAT(StudySummary(study), HasSubstr("x1=3.1"));
}

}  // namespace
}  // namespace dhpt::cli
