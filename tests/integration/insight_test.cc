// Study insight end to end (issue 29): a real scheduler process with a SQLite file, an
// ask-and-tell study whose loss has a known structure (one parameter dominates, a categorical
// matters, two do almost nothing; some trials pruned, one failed), a multi-objective study, and
// the CLI's importance, plot and report commands run as a user would. The report is opened in
// headless Chromium.

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "services/analysis/importance.h"
#include "services/analysis/plot_data.h"
#include "services/cli/study_client.h"
#include "services/cli/study_file.h"
#include "services/scheduler/scheduler_metrics.h"
#include "tests/integration/test_cluster.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kInsightStudy[] = R"(
name: insight
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 7}
early_stopping: {median: {n_startup_trials: 5}}
parameters:
  - {name: lr, double_range: {min: 0.0001, max: 1, log: true}}
  - {name: act, categorical: {values: [relu, tanh, sigmoid]}}
  - {name: layers, int_range: {min: 1, max: 8}}
  - {name: dropout, double_range: {min: 0, max: 0.5, step: 0.1}}
max_trials: 100
parallel_trials: 4
)";

constexpr char kTwoObjectives[] = R"(
name: insight-mo
model: {kind: EXTERNAL}
objectives: [{metric: loss, goal: MINIMIZE}, {metric: size, goal: MINIMIZE}]
algorithm: {name: RANDOM, seed: 3}
parameters:
  - {name: width, double_range: {min: 1, max: 100, log: true}}
  - {name: depth, int_range: {min: 1, max: 6}}
max_trials: 24
)";

// What a failed trial says, with markup a report must not run.
constexpr char kFailure[] = "diverged: <script>alert('x')</script> & NaN";

double Number(const v1::ParameterValue& value) {
  return value.has_double_value() ? value.double_value() : static_cast<double>(value.int_value());
}

// lr's log-scale position dominates; act adds 3 unless relu; layers and dropout next to nothing.
double Loss(const v1::Trial& trial) {
  const double lr = trial.params().at("lr").double_value();
  const bool relu = trial.params().at("act").string_value() == "relu";
  return 10 * (std::log10(lr) + 4) / 4 + (relu ? 0 : 3) +
         0.01 * Number(trial.params().at("layers")) + 0.01 * Number(trial.params().at("dropout"));
}

v1::Trial::State Evaluate(cli::StudyClient& client, const std::string& study,
                          const std::string& client_id, const v1::Trial& trial, bool fail) {
  const double loss = Loss(trial);
  for (int step = 1; step <= 4; ++step) {
    v1::ReportProgressRequest progress;
    progress.set_study(study);
    progress.set_trial(trial.number());
    progress.set_client_id(client_id);
    progress.set_step(step);
    progress.set_value(loss * (1 + 1.0 / step));
    absl::StatusOr<v1::ReportProgressResponse> answer = client.ReportProgress(progress);
    EXPECT_TRUE(answer.ok()) << answer.status();
    if (answer.ok() && answer->should_stop()) return v1::Trial::PRUNED;
  }
  v1::CompleteTrialRequest complete;
  complete.set_study(study);
  complete.set_trial(trial.number());
  complete.set_client_id(client_id);
  if (fail) {
    complete.set_infeasible_reason(kFailure);
  } else {
    (*complete.mutable_metrics())["loss"] = loss;
  }
  absl::StatusOr<v1::Trial> done = client.CompleteTrial(complete);
  EXPECT_TRUE(done.ok()) << done.status();
  return fail ? v1::Trial::FAILED : v1::Trial::COMPLETED;
}

// Runs the study to its end with two clients taking turns (two rows in the timeline).
void RunInsightStudy(cli::StudyClient& client) {
  ASSERT_TRUE(client.CreateStudy(Spec(kInsightStudy)).ok());
  int pruned = 0;
  for (int round = 0;; ++round) {
    const std::string client_id = round % 2 == 0 ? "laptop" : "desktop";
    v1::SuggestTrialsRequest ask;
    ask.set_study("insight");
    ask.set_count(1);
    ask.set_client_id(client_id);
    absl::StatusOr<v1::SuggestTrialsResponse> answer = client.SuggestTrials(ask);
    ASSERT_TRUE(answer.ok()) << answer.status();
    if (answer->trials().empty()) break;
    const v1::Trial& trial = answer->trials(0);
    pruned += Evaluate(client, "insight", client_id, trial, trial.number() == 3) == v1::Trial::PRUNED;
  }
  EXPECT_GT(pruned, 0) << "the median rule should have pruned some trials";
}

void RunTwoObjectives(cli::StudyClient& client) {
  ASSERT_TRUE(client.CreateStudy(Spec(kTwoObjectives)).ok());
  while (true) {
    v1::SuggestTrialsRequest ask;
    ask.set_study("insight-mo");
    ask.set_count(4);
    ask.set_client_id("laptop");
    absl::StatusOr<v1::SuggestTrialsResponse> answer = client.SuggestTrials(ask);
    ASSERT_TRUE(answer.ok()) << answer.status();
    if (answer->trials().empty()) break;
    for (const v1::Trial& trial : answer->trials()) {
      const double width = trial.params().at("width").double_value();
      const double depth = Number(trial.params().at("depth"));
      v1::CompleteTrialRequest complete;
      complete.set_study("insight-mo");
      complete.set_trial(trial.number());
      complete.set_client_id("laptop");
      (*complete.mutable_metrics())["loss"] = 10 / width + 0.1 * depth;
      (*complete.mutable_metrics())["size"] = width * depth;
      ASSERT_TRUE(client.CompleteTrial(complete).ok());
    }
  }
}

class InsightTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    directory_ = new TempDirectory();
    // Large enough for the import of a study of 100,000 trials.
    scheduler_ = new SchedulerProcess({absl::StrCat("--db=", directory_->path(), "/insight.db"),
                                       "--max_message_bytes=67108864"});
    cli::StudyClient client(scheduler_->address());
    RunInsightStudy(client);
    RunTwoObjectives(client);
  }
  static void TearDownTestSuite() {
    delete scheduler_;
    delete directory_;
  }
  // The CLI's connection attempt gives up after 100 ms (channel_options.cc): on a loaded
  // machine, right after the scheduler stored a large import, a first attempt can miss. Only
  // that is tried again, until a deadline; every other answer is the command's.
  std::pair<int, std::string> Dhpt(const std::string& args) {
    std::pair<int, std::string> result;
    WaitFor([&] {
      result = RunBinary("dhpt", absl::StrCat(args, " --scheduler=", scheduler_->address()));
      return !absl::StrContains(result.second, "failed to connect to all addresses");
    });
    return result;
  }
  static std::string Read(const std::string& path) {
    absl::StatusOr<std::string> text = cli::ReadTextFile(path, cli::kMaxExportFileBytes);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  static TempDirectory* directory_;
  static SchedulerProcess* scheduler_;
};

TempDirectory* InsightTest::directory_ = nullptr;
SchedulerProcess* InsightTest::scheduler_ = nullptr;

TEST_F(InsightTest, BothEvaluatorsRankTheDominantParameterFirst) {
  cli::StudyClient client(scheduler_->address());
  for (auto evaluator : {v1::GetParamImportancesRequest::PED_ANOVA,
                         v1::GetParamImportancesRequest::FANOVA}) {
    v1::GetParamImportancesRequest request;
    request.set_study("insight");
    request.set_evaluator(evaluator);
    absl::StatusOr<v1::GetParamImportancesResponse> response = client.GetParamImportances(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(response->importances_size(), 4);
    EXPECT_EQ(response->importances(0).name(), "lr") << response->DebugString();
    EXPECT_EQ(response->objective_metric(), "loss");
    EXPECT_EQ(response->evaluator(), evaluator);
    // Pruned trials count only when asked.
    request.set_include_pruned(true);
    absl::StatusOr<v1::GetParamImportancesResponse> with_pruned = client.GetParamImportances(request);
    ASSERT_TRUE(with_pruned.ok()) << with_pruned.status();
    EXPECT_GT(with_pruned->trials_used(), response->trials_used());
    // The median rule prunes most non-relu trials, so act's effect shows once they count.
    EXPECT_EQ(with_pruned->importances(0).name(), "lr") << with_pruned->DebugString();
    EXPECT_EQ(with_pruned->importances(1).name(), "act") << with_pruned->DebugString();
  }
  auto [code, output] = Dhpt("importance insight --evaluator=fanova");
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("(fANOVA,"));
  const std::vector<std::string> lines = absl::StrSplit(output, '\n');
  ASSERT_GE(lines.size(), 4u) << output;
  EXPECT_TRUE(absl::StartsWith(lines[3], "lr ")) << output;
  EXPECT_THAT(lines[3], HasSubstr("####"));
  std::tie(code, output) = Dhpt("importance insight-mo --objective=1 --json");
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("\"objective_metric\": \"size\""));
}

TEST_F(InsightTest, EveryPlotKindIsDrawnFromARealStudy) {
  const std::string out = absl::StrCat(directory_->path(), "/plots");
  auto [code, output] = Dhpt(absl::StrCat("plot insight --kind=all --out=", out));
  ASSERT_EQ(code, 0) << output;
  for (const char* kind : {"history", "history-time", "importance", "parallel", "slice",
                           "contour", "intermediate", "edf", "timeline"}) {
    for (const char* ext : {".svg", ".png"}) {
      const std::string file = absl::StrCat(out, "/", kind, ext);
      ASSERT_TRUE(std::filesystem::exists(file)) << file << "\n" << output;
      EXPECT_GT(std::filesystem::file_size(file), 2000u) << file;
    }
  }
  // Log axes for log parameters, categorical axes with their labels, pruned trials marked,
  // one timeline row per client.
  EXPECT_THAT(Read(out + "/slice-svg.gp"), HasSubstr("set logscale x"));
  EXPECT_THAT(Read(out + "/slice.svg"), HasSubstr(">sigmoid<"));
  EXPECT_THAT(Read(out + "/data/intermediate.dat"), HasSubstr("# pruned here"));
  const std::string timeline = Read(out + "/timeline.svg");
  EXPECT_THAT(timeline, HasSubstr(">laptop<"));
  EXPECT_THAT(timeline, HasSubstr(">desktop<"));
  EXPECT_THAT(Read(out + "/data/timeline.dat"), HasSubstr("# failed"));
  // The Pareto front (the existing plot) and the hypervolume of a study with two objectives.
  const std::string mo = absl::StrCat(directory_->path(), "/plots-mo");
  std::tie(code, output) = Dhpt(absl::StrCat("plot insight-mo --out=", mo));
  ASSERT_EQ(code, 0) << output;
  for (const char* file : {"pareto.svg", "pareto.png", "hypervolume.svg", "hypervolume.png",
                           "history.svg", "contour.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(absl::StrCat(mo, "/", file))) << file << "\n" << output;
  }
  EXPECT_THAT(Read(mo + "/contour-svg.gp"), HasSubstr("set logscale x"));
  // One kind, two named parameters.
  std::tie(code, output) =
      Dhpt(absl::StrCat("plot insight --kind=contour --params=layers,act --out=", out, "/pair"));
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(Read(out + "/pair/contour.svg"), HasSubstr(">tanh<"));
}

TEST_F(InsightTest, TheReportIsOneSelfContainedPageThatRendersInABrowser) {
  const std::string out = absl::StrCat(directory_->path(), "/report");
  auto [code, output] = Dhpt(absl::StrCat("report insight --out=", out));
  ASSERT_EQ(code, 0) << output;
  const std::string html = Read(out + "/report.html");
  for (const char* kind : {"history", "history-time", "importance", "parallel", "slice",
                           "contour", "intermediate", "edf", "timeline"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("id='plot-", kind, "'")));
  }
  // The failure's reason is there, escaped; nothing is loaded from elsewhere.
  EXPECT_THAT(html, HasSubstr("diverged: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; NaN"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr(" src=")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));

  const std::string check = absl::StrCat(
      "bash ", DHPT_SOURCE_DIR, "/tests/browser/run.sh check_page.mjs --url=file://", out,
      "/report.html --count='section.plot svg' --count='table.trials tr.failed' --count='table.importance tr'");
  std::tie(code, output) = RunCommandLine(check);
  ASSERT_EQ(code, 0) << output;
  // No console error, exception, alert or failed request.
  EXPECT_THAT(output, HasSubstr("\"problems\": []"));
  EXPECT_THAT(output, HasSubstr("\"section.plot svg\": 9"));
  EXPECT_THAT(output, HasSubstr("\"table.trials tr.failed\": 1"));
  EXPECT_THAT(output, HasSubstr("\"table.importance tr\": 5"));
}

TEST_F(InsightTest, BadInputGetsAClearAnswer) {
  cli::StudyClient client(scheduler_->address());
  v1::GetParamImportancesRequest request;
  request.set_study("insight");
  request.add_params("momentum");
  absl::Status status = client.GetParamImportances(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("no parameter \"momentum\""));
  request.set_study("no-such-study");
  EXPECT_EQ(client.GetParamImportances(request).status().code(), absl::StatusCode::kNotFound);

  // An empty study, then the same with one trial.
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: insight-empty
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: 0, max: 1}}, {name: y, double_range: {min: 0, max: 1}}]
max_trials: 10
)")).ok());
  auto [code, output] = Dhpt("importance insight-empty");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("has 0 completed trial(s) with a value of loss; importance needs at least 2"));
  std::tie(code, output) = Dhpt(absl::StrCat("plot insight-empty --kind=history --out=",
                                             directory_->path(), "/empty"));
  EXPECT_EQ(code, 0) << output;  // A plot that says why it is empty.
  EXPECT_THAT(Read(directory_->path() + "/empty/history-svg.gp"), HasSubstr("no completed trial yet"));
  // The report of an empty study says why each part is empty.
  std::tie(code, output) = Dhpt(absl::StrCat("report insight-empty --out=", directory_->path(),
                                             "/empty-report"));
  ASSERT_EQ(code, 0) << output;
  const std::string empty_report = Read(directory_->path() + "/empty-report/report.html");
  EXPECT_THAT(empty_report, HasSubstr("importance needs at least 2"));
  EXPECT_THAT(empty_report, HasSubstr("id='plot-timeline'"));
  v1::AddTrialsRequest add;
  add.set_study("insight-empty");
  for (double x : {0.25, 0.75, 0.5}) {
    v1::AddedTrial& trial = *add.add_trials();
    (*trial.mutable_params())["x"].set_number_value(x);
    (*trial.mutable_params())["y"].set_number_value(0.5);  // y never varies.
    (*trial.mutable_metrics())["loss"] = x;
    if (x == 0.25) {
      ASSERT_TRUE(client.AddTrials(add).ok());
      std::tie(code, output) = Dhpt("importance insight-empty");
      EXPECT_EQ(code, 1);
      EXPECT_THAT(output, HasSubstr("has 1 completed trial(s)"));
      add.clear_trials();
    }
  }
  ASSERT_TRUE(client.AddTrials(add).ok());
  std::tie(code, output) = Dhpt("importance insight-empty --json");
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("\"constant\": true"));
  std::tie(code, output) = Dhpt("importance insight-empty");
  EXPECT_THAT(output, HasSubstr("(never varied)"));

  std::tie(code, output) = Dhpt("plot insight --kind=contour --params=lr --out=/tmp/unused");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("a contour plot draws two parameters"));
  std::tie(code, output) = Dhpt("plot insight --kind=violin");
  EXPECT_EQ(code, 2);  // A flag value that names nothing: a usage error, before any call.
  EXPECT_THAT(output, HasSubstr("unknown plot kind \"violin\": use one of history"));
  std::tie(code, output) = Dhpt("plot insight --kind=pareto");
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("has one objective"));
  std::tie(code, output) = Dhpt("importance insight --evaluator=shap");
  EXPECT_EQ(code, 2);
  EXPECT_THAT(output, HasSubstr("unknown evaluator \"shap\""));
}

TEST_F(InsightTest, AHundredThousandTrialsAnswerInBoundedTimeAndPlotsStayBounded) {
  cli::StudyClient client(scheduler_->address());
  const v1::StudySpec large = Spec(R"(
name: insight-large
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
parameters:
  - {name: a, double_range: {min: 0, max: 1}}
  - {name: b, double_range: {min: 0, max: 1}}
  - {name: c, categorical: {values: [p, q]}}
max_trials: 100000
)");
  // A finished study of 100,000 trials, restored from an export (AddTrials stops at 20,000).
  constexpr int kTrials = 100'000;
  v1::StudyExport exported;
  *exported.mutable_study()->mutable_spec() = large;
  exported.mutable_study()->set_state(v1::Study::COMPLETED);
  for (int n = 0; n < kTrials; ++n) {
    const double a = (n % 1000) / 1000.0, b = (n / 1000) / 100.0;
    v1::Trial& trial = *exported.add_trials();
    trial.set_number(n);
    trial.set_state(v1::Trial::COMPLETED);
    (*trial.mutable_params())["a"].set_double_value(a);
    (*trial.mutable_params())["b"].set_double_value(b);
    (*trial.mutable_params())["c"].set_string_value(n % 2 ? "p" : "q");
    (*trial.mutable_metrics())["loss"] = 10 * a + b;
    trial.set_objective_value(10 * a + b);
  }
  absl::StatusOr<v1::Study> imported = client.ImportStudy(exported);
  ASSERT_TRUE(imported.ok()) << imported.status();
  for (auto evaluator : {v1::GetParamImportancesRequest::PED_ANOVA,
                         v1::GetParamImportancesRequest::FANOVA}) {
    v1::GetParamImportancesRequest request;
    request.set_study("insight-large");
    request.set_evaluator(evaluator);
    const absl::Time start = absl::Now();
    absl::StatusOr<v1::GetParamImportancesResponse> response = client.GetParamImportances(request);
    const absl::Duration took = absl::Now() - start;
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->trials_considered(), kTrials);
    EXPECT_EQ(response->trials_used(), evaluator == v1::GetParamImportancesRequest::FANOVA
                                           ? analysis::kMaxFanovaTrials
                                           : analysis::kMaxPedAnovaTrials);
    EXPECT_EQ(response->importances(0).name(), "a");
    EXPECT_LT(took, absl::Seconds(20)) << "bounded by the subsample, even on a loaded machine";
  }
  const std::string out = absl::StrCat(directory_->path(), "/large");
  auto [code, output] = Dhpt(absl::StrCat("plot insight-large --kind=history --out=", out));
  ASSERT_EQ(code, 0) << output;
  const std::string data = Read(out + "/data/history.dat");
  EXPECT_LT(std::count(data.begin(), data.end(), '\n'), analysis::kMaxPointsPerSeries + 200);
}

// The gauge keeps its label set small: a study of 7 parameters exports its 5 most important.
TEST(InsightMetricsTest, TheImportanceGaugeExportsEachStudysTopParameters) {
  TestCluster cluster(/*workers=*/0);
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: wide
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
parameters:
  - {name: p0, double_range: {min: 0, max: 1}}
  - {name: p1, double_range: {min: 0, max: 1}}
  - {name: p2, double_range: {min: 0, max: 1}}
  - {name: p3, double_range: {min: 0, max: 1}}
  - {name: p4, double_range: {min: 0, max: 1}}
  - {name: p5, double_range: {min: 0, max: 1}}
  - {name: p6, double_range: {min: 0, max: 1}}
max_trials: 10
)")).ok());
  v1::AddTrialsRequest add;
  add.set_study("wide");
  std::mt19937_64 generator(3);
  for (int t = 0; t < 200; ++t) {
    v1::AddedTrial& trial = *add.add_trials();
    double loss = 0;
    for (int p = 0; p < 7; ++p) {
      const double x = std::uniform_real_distribution<double>(0, 1)(generator);
      (*trial.mutable_params())[absl::StrCat("p", p)].set_number_value(x);
      loss += (p == 0 ? 10 : 1) * x;
    }
    (*trial.mutable_metrics())["loss"] = loss;
  }
  ASSERT_TRUE(cluster.client().AddTrials(add).ok());
  scheduler::SchedulerStateCollector collector(&cluster.core());
  int series = 0;
  std::string top;
  double top_share = -1;
  for (const prometheus::MetricFamily& family : collector.Collect()) {
    if (family.name != "dhpt_study_param_importance") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::string study, param;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "study") study = label.value;
        if (label.name == "param") param = label.value;
      }
      ASSERT_EQ(study, "wide");
      ++series;
      EXPECT_GE(metric.gauge.value, 0);
      EXPECT_LE(metric.gauge.value, 1);
      if (metric.gauge.value > top_share) {
        top_share = metric.gauge.value;
        top = param;
      }
    }
  }
  EXPECT_EQ(series, scheduler::kMaxImportanceParamsPerStudy);
  EXPECT_EQ(top, "p0");
}

}  // namespace
}  // namespace dhpt::testing
