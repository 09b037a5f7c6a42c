#include "services/cli/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "services/cli/demo_studies.h"
#include "services/cli/trial_view.h"

namespace dhpt::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// A conditional space's inactive parameter has no value in the trial: the table shows "-",
// not an empty cell that reads like a missing column, nor a default.
TEST(ReportTest, AnInactiveParameterShowsAsADash) {
  v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial trial;
  trial.set_number(0);
  trial.set_state(v1::Trial::COMPLETED);
  (*trial.mutable_params())["x1"].set_double_value(1.5);  // x2 inactive.
  trial.set_objective_value(0.5);
  const std::vector<std::string> lines = absl::StrSplit(TrialsTable(spec, {trial}), '\n');
  ASSERT_GE(lines.size(), 3u);  // Header, rule, the trial.
  const std::vector<std::string> cells = absl::StrSplit(lines[2], ' ', absl::SkipEmpty());
  ASSERT_GE(cells.size(), 5u) << TrialsTable(spec, {trial});
  EXPECT_EQ(cells[2], "1.5");
  EXPECT_EQ(cells[3], "-");
  EXPECT_EQ(cells[4], "0.5");
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

// Found by a hostile review: a stopped study with 2 cancelled trials, extended to 605, ended at
// "603/605 done", and its best added trial was "on elsewhere (added) ()".
TEST(ReportTest, CancelledTrialsAreSaidAndAnAddedBestHasNoEmptyDevice) {
  v1::Study study;
  *study.mutable_spec() = *DemoStudy("branin");
  study.mutable_spec()->set_max_trials(605);
  study.set_state(v1::Study::COMPLETED);
  study.set_trials_completed(603);
  study.set_trials_cancelled(2);
  v1::Trial& best = *study.mutable_best_trial();
  best.set_objective_value(0.4);
  best.set_origin(v1::Trial::ADDED);
  EXPECT_THAT(ProgressLine(study), HasSubstr("603/605 done (2 cancelled)  0 running"));
  EXPECT_THAT(StudySummary(study), HasSubstr("on elsewhere (added)\n"));
  best.set_origin(v1::Trial::SUGGESTED);
  best.set_worker_id("w1");
  best.set_device("cpu");
  EXPECT_THAT(StudySummary(study), HasSubstr("on w1 (cpu)\n"));
}

TEST(ReportTest, SummarySaysHowManyPrunedTrialsWereWithinReachOfTheBest) {
  v1::Study study;
  *study.mutable_spec() = *DemoStudy("xgboost");
  study.set_trials_completed(5);
  study.set_trials_pruned(12);
  EXPECT_THAT(StudySummary(study), HasSubstr("12 pruned (stopped early)\n"));
  study.set_trials_pruned_within_reach(3);
  EXPECT_THAT(StudySummary(study),
              HasSubstr("12 pruned (stopped early), 3 of them within reach of the best when "
                        "stopped\n"));
}


// Why trials failed, wherever they are shown (issue 27).

v1::Trial FailedTrial(int number, const std::string& error) {
  v1::Trial trial;
  trial.set_number(number);
  trial.set_state(v1::Trial::FAILED);
  (*trial.mutable_params())["x1"].set_double_value(1.5);
  (*trial.mutable_params())["x2"].set_double_value(2.25);
  trial.set_worker_id("w1");
  trial.set_error(error);
  return trial;
}

TEST(ReportTest, FailedTrialsShowTheirReasonCutToFit) {
  const v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial ok;
  ok.set_number(0);
  ok.set_state(v1::Trial::COMPLETED);
  ok.set_objective_value(1);
  // Without a failure, no reason column.
  EXPECT_THAT(TrialsTable(spec, {ok}), Not(HasSubstr("reason")));
  const std::string long_error =
      "command gbr exited with status 1; stderr ends:\nTraceback (most recent call last):\n" +
      std::string(200, 'x') + "\nValueError: colsample_bynode must be in (0, 1]\n";
  const std::string table =
      TrialsTable(spec, {ok, FailedTrial(1, "command gbr was killed by signal SIGKILL"),
                         FailedTrial(2, long_error)});
  EXPECT_THAT(table, HasSubstr("reason"));
  EXPECT_THAT(table, HasSubstr("command gbr was killed by signal SIGKILL"));
  // The long one keeps its start and its end on one line of the column's width.
  const std::string cut = ShortReason(long_error, kReasonColumnWidth);
  EXPECT_EQ(cut.size(), kReasonColumnWidth) << cut;
  EXPECT_THAT(cut, ::testing::StartsWith("command gbr exited with "));
  EXPECT_THAT(cut, ::testing::EndsWith("must be in (0, 1]"));
  EXPECT_THAT(cut, HasSubstr(" ... "));
  EXPECT_THAT(table, HasSubstr(cut));
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    EXPECT_LE(line.size(), 160u) << line;
  }
  // A cut never splits a character.
  EXPECT_EQ(ShortReason("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 10),
            "\xc3\xa9 ... \xc3\xa9");
}

TEST(ReportTest, AFailedTrialsLineNamesItsReasonAndTheCommandThatShowsAll) {
  const std::string line = FailedTrialLine("gbr", FailedTrial(3, "command gbr exited with status 2; "
                                                                "stderr ends:\nno such file\x1b[2K"));
  EXPECT_EQ(line,
            "trial 3 FAILED on w1: command gbr exited with status 2; stderr ends: no such "
            "file\\x1b[2K (dhpt trial gbr 3 shows all)");
}

TEST(ReportTest, TheTrialViewShowsEverythingAboutOneTrial) {
  const v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial trial = FailedTrial(4, "command gbr exited with status 1; stderr ends:\nline one\n"
                                   "ValueError: bad\x1b]0;x");
  trial.add_attempts()->set_worker_id("w0");
  trial.add_attempts()->set_worker_id("w1");
  trial.set_attempt(2);
  trial.set_lost_attempts(1);
  trial.set_node_name("pi4-a");
  trial.set_device("cpu");
  (*trial.mutable_metrics())["wall_seconds"] = 2.5;
  v1::TrialCurve first, second;
  first.set_number(4);
  first.set_attempt(1);
  first.add_steps(1);
  first.add_values(99);
  second.set_number(4);
  second.set_attempt(2);
  for (int step = 1; step <= 7; ++step) {
    second.add_steps(step);
    second.add_values(step / 10.0);
  }
  v1::TrialCurve other;  // Another trial's.
  other.set_number(5);
  other.set_attempt(3);
  other.add_steps(1);
  other.add_values(-1);
  const std::string view = TrialView(spec, trial, {first, second, other});
  EXPECT_THAT(view, HasSubstr("trial 4 of demo-branin: FAILED"));
  EXPECT_THAT(view, HasSubstr("parameters: x1=1.5, x2=2.25"));
  EXPECT_THAT(view, HasSubstr("wall_seconds = 2.5"));
  EXPECT_THAT(view, HasSubstr("attempts: 2 (1 lost)\n    1: worker w0\n    2: worker w1, node pi4-a, "
                              "device cpu\n"));
  EXPECT_THAT(view, HasSubstr("progress (attempt 2, the last 5 of 7 values, step: value): 3: 0.3, "
                              "4: 0.4, 5: 0.5, 6: 0.6, 7: 0.7\n"));
  EXPECT_THAT(view, HasSubstr("  error:\n    command gbr exited with status 1; stderr ends:\n"
                              "    line one\n    ValueError: bad\\x1b]0;x\n"));
  EXPECT_THAT(view, Not(HasSubstr("99")));
}

// A late result of a lost attempt counted: the node and the curve shown are that attempt's,
// not the re-run's that it cancelled.
TEST(ReportTest, TheTrialViewShowsTheAttemptWhoseResultCounted) {
  const v1::StudySpec spec = *DemoStudy("branin");
  v1::Trial trial = FailedTrial(4, "");
  trial.set_state(v1::Trial::COMPLETED);
  trial.add_attempts()->set_worker_id("w0");  // Lost, then its result came: counted.
  v1::Trial::Attempt& lost = *trial.add_attempts();
  lost.set_worker_id("w1");
  lost.set_lost(true);
  trial.add_attempts()->set_worker_id("w2");  // Cancelled when w0's result counted.
  trial.set_attempt(1);
  trial.set_lost_attempts(1);
  trial.set_worker_id("w0");
  trial.set_node_name("pi4-a");
  v1::TrialCurve counted, cancelled;
  counted.set_number(4);
  counted.set_attempt(1);
  counted.add_steps(1);
  counted.add_values(0.25);
  cancelled.set_number(4);
  cancelled.set_attempt(2);
  cancelled.add_steps(1);
  cancelled.add_values(0.75);
  const std::string view = TrialView(spec, trial, {counted, cancelled});
  EXPECT_THAT(view, HasSubstr("attempts: 3 (1 lost)\n    1: worker w0, node pi4-a\n"
                              "    2: worker w1, lost\n    3: worker w2\n"));
  EXPECT_THAT(view, HasSubstr("progress (attempt 1"));
  EXPECT_THAT(view, Not(HasSubstr("0.75")));
}

}  // namespace
}  // namespace dhpt::cli
