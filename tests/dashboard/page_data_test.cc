// The dashboard's page logic: the downsampled history stays bounded and exact where it must,
// and a table page built from a stream of trials is the page a full sort would give.
#include "services/dashboard/page_data.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace dhpt::dashboard {
namespace {

v1::Trial Completed(int64_t number, double value) {
  v1::Trial trial;
  trial.set_study("s");
  trial.set_number(number);
  trial.set_state(v1::Trial::COMPLETED);
  trial.set_objective_value(value);
  (*trial.mutable_metrics())["loss"] = value;
  (*trial.mutable_params())["x"].set_double_value(value * 2);
  return trial;
}

// A value that jumps around, so that min, max and best all move.
double Wiggle(int64_t i) { return static_cast<double>((i * 7919) % 1000) - 0.5 * static_cast<double>(i % 3); }

TEST(HistorySeriesTest, HundredThousandTrialsFitTheBucketsWithTheBestKept) {
  HistorySeries series(/*maximize=*/false, /*max_buckets=*/500);
  double best = 1e9, min = 1e9, max = -1e9;
  for (int64_t i = 0; i < 100000; ++i) {
    const double value = Wiggle(i);
    best = std::min(best, value);
    min = std::min(min, value);
    max = std::max(max, value);
    series.Add(Completed(i, value));
  }
  EXPECT_LE(series.buckets(), 500);
  EXPECT_GT(series.buckets(), 250);  // Halving leaves at least half the buckets in use.
  const std::string json = series.Json();
  // The last bucket's best is the study's best; every value is inside some bucket's range.
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat(",", best, ",")));
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat(min, ","))) << json.substr(0, 200);
  EXPECT_TRUE(absl::StrContains(json, absl::StrCat(max, ",")));
}

TEST(HistorySeriesTest, BestSoFarFollowsTheGoalAndSkipsTrialsWithoutValue) {
  HistorySeries series(/*maximize=*/true, /*max_buckets=*/4);
  v1::Trial failed;
  failed.set_number(1);
  failed.set_state(v1::Trial::FAILED);
  series.Add(Completed(0, 1.0));
  series.Add(failed);
  series.Add(Completed(2, 3.0));
  series.Add(Completed(3, 2.0));
  EXPECT_EQ(series.Json(),
            "{\"maximize\":true,\"width\":1,\"points\":[[0,0,1,1,1,1],[2,2,3,3,3,1],[3,3,2,2,3,1]]}");
  series.Add(Completed(4, 0.5));
  series.Add(Completed(5, 4.0));  // Five buckets of one would be needed: pairs are merged.
  EXPECT_EQ(series.Json(),
            "{\"maximize\":true,\"width\":2,\"points\":[[0,0,1,1,1,1],[2,3,2,3,3,2],[4,5,0.5,4,4,2]]}");
}

std::vector<int64_t> Numbers(const std::string& json) {
  std::vector<int64_t> numbers;
  for (size_t at = json.find("\"number\": "); at != std::string::npos;
       at = json.find("\"number\": ", at + 1)) {
    numbers.push_back(std::stoll(json.substr(at + 10)));
  }
  return numbers;
}

TEST(TrialTableTest, ASortedPageIsThePageOfTheFullSortHoldingOnlyRowsUpToIt) {
  TableQuery query = *ParseTableQuery({{"sort", "value"}, {"desc", "1"}, {"page", "2"}, {"size", "7"}});
  TrialTable table(query);
  std::vector<v1::Trial> all;
  for (int64_t i = 0; i < 1000; ++i) {
    all.push_back(Completed(i, Wiggle(i)));
    table.Add(all.back());
  }
  v1::Trial running;  // No value: sorts after every trial with one, either way.
  running.set_number(1000);
  running.set_state(v1::Trial::RUNNING);
  table.Add(running);
  std::stable_sort(all.begin(), all.end(), [](const v1::Trial& a, const v1::Trial& b) {
    return a.objective_value() > b.objective_value();
  });
  std::vector<int64_t> expected;
  for (int i = 14; i < 21; ++i) expected.push_back(all[i].number());
  const std::string json = table.Json();
  EXPECT_EQ(Numbers(json), expected);
  EXPECT_TRUE(absl::StartsWith(json, "{\"total\":1001,\"complete\":true,\"page\":2,\"page_size\":7,"));
}

TEST(TrialTableTest, MissingValuesComeLastAndTheTextFilterMatchesErrorsAndParameters) {
  TrialTable table(*ParseTableQuery({{"sort", "metric:loss"}, {"q", "BOOM"}}));
  v1::Trial failed;
  failed.set_number(0);
  failed.set_state(v1::Trial::FAILED);
  failed.set_error("<b>boom</b>");
  table.Add(failed);
  table.Add(Completed(1, 3));
  v1::Trial boomed = Completed(2, 5);
  (*boomed.mutable_params())["kind"].set_string_value("boom-box");
  table.Add(boomed);
  EXPECT_EQ(Numbers(table.Json()), (std::vector<int64_t>{2, 0}));
}

// Done once the page is full and one trial more has matched: a study whose trials fill the
// last page exactly is complete (the page's "Next" is off), not a page short of an empty one.
TEST(TrialTableTest, NumberOrderIsDoneOnceThePageIsFullAndOneMoreMatched) {
  TrialTable table(*ParseTableQuery({{"page", "1"}, {"size", "2"}}));
  for (int64_t i = 0; i < 4; ++i) table.Add(Completed(i, i));
  EXPECT_FALSE(table.Done());
  EXPECT_TRUE(absl::StrContains(table.Json(), "\"complete\":true"));
  table.Add(Completed(4, 4));
  EXPECT_TRUE(table.Done());
  EXPECT_TRUE(absl::StrContains(table.Json(), "\"complete\":false"));
  EXPECT_EQ(Numbers(table.Json()), (std::vector<int64_t>{2, 3}));
}

TEST(TrialTableTest, QueriesOutsideTheLimitsSayWhatToDo) {
  EXPECT_TRUE(absl::StrContains(ParseTableQuery({{"sort", "color"}}).status().message(), "param:NAME"));
  EXPECT_TRUE(absl::StrContains(ParseTableQuery({{"state", "DONE"}}).status().message(), "COMPLETED"));
  EXPECT_TRUE(absl::StrContains(ParseTableQuery({{"size", "201"}}).status().message(), "1 to 200"));
  EXPECT_TRUE(absl::StrContains(ParseTableQuery({{"page", "200"}, {"size", "50"}}).status().message(),
                                "filter the table or sort the other way"));
  EXPECT_TRUE(ParseTableQuery({{"page", "199"}, {"size", "50"}}).ok());
}

TEST(PageDataTest, EventsAreOneLineAndUserTextIsEscapedJson) {
  v1::StudyEvent event;
  event.set_position(42);
  v1::Trial& trial = *event.mutable_trial();
  trial.set_number(3);
  trial.set_error("line one\nline two \"quoted\" </script>");
  const std::string json = EventJson(event);
  EXPECT_FALSE(absl::StrContains(json, "\n"));  // An event's data field is one line.
  EXPECT_TRUE(absl::StartsWith(json, "{\"position\":42,\"trial\":{"));
  EXPECT_TRUE(absl::StrContains(json, R"("error": "line one\nline two \"quoted\" </script>")"));
  v1::Study study;
  study.mutable_spec()->set_name("a\"b");
  EXPECT_TRUE(absl::StrContains(StudiesJson({study}), R"({"name":"a\"b",)"));
}

}  // namespace
}  // namespace dhpt::dashboard

namespace dhpt::dashboard {
namespace {

TEST(PageDataTest, PlotJsonKeepsUserTextAsEscapedStringsAndNonFiniteAsNull) {
  analysis::PlotData plot;
  plot.kind = analysis::PlotKind::kSlice;
  plot.title = "s: loss \"against\" each parameter";
  analysis::PlotPanel& panel = plot.panels.emplace_back();
  panel.title = "kind";
  panel.x.categories = {"<script>alert(3)</script>", "a\\b"};
  analysis::PlotSeries& series = panel.series.emplace_back();
  series.name = "completed trial";
  series.x = {0, 1};
  series.y = {1.5, std::nan("")};
  series.trials = {4, 7};
  const std::string json = PlotJson(plot);
  EXPECT_TRUE(absl::StrContains(json, R"("kind":"slice","title":"s: loss \"against\" each parameter")"));
  EXPECT_TRUE(absl::StrContains(json, R"("categories":["<script>alert(3)</script>","a\\b"])"));
  EXPECT_TRUE(absl::StrContains(json, R"("y":[1.5,null],"z":[],"trials":[4,7])"));
}

}  // namespace
}  // namespace dhpt::dashboard

namespace dhpt::dashboard {
namespace {

// The plots' sample of a study twice kMaxPlotTrials and more: a power-of-two stride (capped
// where the scheduler caps it), and a copy from between two pages of the scheduler's sample
// that, given the rest, ends where one read whole does (what the dashboard keeps between reads
// of a study), counting every trial the pages went through. The sample's rule itself is the
// scheduler's (tests/scheduler/ended_studies_test.cc).
TEST(PlotSampleTest, AResumedSampleEqualsOneReadWholeAndCountsEveryTrialCovered) {
  EXPECT_EQ(PlotSample::StrideFor(kMaxPlotTrials), 1);
  EXPECT_EQ(PlotSample::StrideFor(kMaxPlotTrials + 1), 2);
  EXPECT_EQ(PlotSample::StrideFor(100000), 8);
  EXPECT_EQ(PlotSample::StrideFor(int64_t{1} << 40), kMaxSampleStride);
  v1::StudySpec spec;
  spec.set_name("s");
  spec.mutable_objective()->set_metric("loss");
  auto& x = *spec.add_parameters();
  x.set_name("x");
  x.mutable_double_range()->set_min(-1e6);
  x.mutable_double_range()->set_max(1e6);
  constexpr int64_t kTrials = 50000, kPage = 5000;
  PlotSample whole(spec, kTrials), resumed(spec, kTrials);
  ASSERT_EQ(whole.stride(), 4);
  // The scheduler's pages: every fourth trial and those that improved.
  std::vector<google::protobuf::RepeatedPtrField<v1::Trial>> pages(kTrials / kPage);
  double best = 1e300;
  int64_t kept = 0;
  for (int64_t i = 0; i < kTrials; ++i) {
    const double value = Wiggle(i) - i * 0.01;
    const bool improves = value < best;
    if (improves) best = value;
    if (!improves && i % 4 != 0) continue;
    ++kept;
    v1::Trial& trial = *pages[i / kPage].Add() = Completed(i, value);
    // Times count from the first trial's creation, on every page.
    trial.mutable_create_time()->set_seconds(1000 + i);
    trial.mutable_start_time()->set_seconds(1000 + i);
    trial.mutable_end_time()->set_seconds(1002 + i);
  }
  const google::protobuf::RepeatedPtrField<v1::TrialCurve> no_curves;
  std::optional<PlotSample::Mark> mark;
  for (size_t p = 0; p < pages.size(); ++p) {
    if (p == 7) mark = resumed.mark();
    resumed.AddPage(pages[p], no_curves, kPage);
    whole.AddPage(pages[p], no_curves, kPage);
  }
  resumed = resumed.Before(*mark);
  EXPECT_EQ(resumed.seen(), 7 * kPage);
  for (size_t p = 7; p < pages.size(); ++p) resumed.AddPage(pages[p], no_curves, kPage);
  ASSERT_EQ(resumed.kept(), whole.kept());
  EXPECT_EQ(resumed.seen(), kTrials);
  EXPECT_EQ(whole.seen(), kTrials);
  EXPECT_EQ(whole.kept(), kept);
  for (size_t i = 0; i < whole.data().trials.size(); ++i) {
    const analysis::TrialData& a = whole.data().trials[i];
    const analysis::TrialData& b = resumed.data().trials[i];
    ASSERT_EQ(a.number, b.number) << i;
    EXPECT_EQ(a.values, b.values) << i;
    EXPECT_EQ(a.start_seconds, b.start_seconds) << i;
    EXPECT_EQ(a.end_seconds, static_cast<double>(a.number + 2)) << i;
  }
}

}  // namespace
}  // namespace dhpt::dashboard
