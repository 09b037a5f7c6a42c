#include "services/cli/compare_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/time_util.h"

namespace dhpt::cli {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

v1::Trial Trial(int number, double x, v1::Trial::State state, double objective, double wall,
                double cpu, double rss, const std::string& worker) {
  v1::Trial trial;
  trial.set_number(number);
  trial.set_state(state);
  (*trial.mutable_params())["x"].set_double_value(x);
  if (state == v1::Trial::COMPLETED) trial.set_objective_value(objective);
  (*trial.mutable_metrics())["wall_seconds"] = wall;
  (*trial.mutable_metrics())["cpu_seconds"] = cpu;
  (*trial.mutable_metrics())["peak_rss_bytes"] = rss;
  trial.set_worker_id(worker);
  return trial;
}

v1::CompareReport TwoRuns(v1::Algorithm::Name algorithm) {
  v1::CompareReport report;
  report.mutable_spec()->set_name("s");
  report.mutable_spec()->mutable_objective()->set_metric("r2");
  report.mutable_spec()->mutable_objective()->set_goal(v1::Objective::MAXIMIZE);
  report.mutable_spec()->mutable_algorithm()->set_name(algorithm);
  report.mutable_machine()->set_cores(2);

  v1::RunReport& seq = *report.mutable_sequential();
  seq.set_workers(1);
  seq.set_slots_per_worker(1);
  seq.set_threads_per_trial(1);
  seq.set_wall_seconds(10);
  seq.set_state(v1::Study::COMPLETED);
  *seq.add_trials() = Trial(0, 0.1, v1::Trial::COMPLETED, 0.5, 3, 3, 100 << 20, "sequential");
  *seq.add_trials() = Trial(1, 0.2, v1::Trial::COMPLETED, 0.9, 3, 3, 120 << 20, "sequential");
  *seq.add_trials() = Trial(2, 0.3, v1::Trial::COMPLETED, 0.7, 3, 3, 110 << 20, "sequential");
  v1::ProcessUsage& seq_process = *seq.add_processes();
  seq_process.set_name("sequential");
  seq_process.set_cpu_seconds(9.5);
  seq_process.set_peak_rss_bytes(130 << 20);

  v1::RunReport& fw = *report.mutable_framework();
  fw.set_workers(2);
  fw.set_slots_per_worker(1);
  fw.set_threads_per_trial(1);
  fw.set_wall_seconds(5);
  fw.set_state(v1::Study::COMPLETED);
  *fw.add_trials() = Trial(0, 0.1, v1::Trial::COMPLETED, 0.5, 3, 3, 100 << 20, "w1");
  *fw.add_trials() = Trial(1, 0.3, v1::Trial::COMPLETED, 0.7, 3, 3, 100 << 20, "w2");
  *fw.add_trials() = Trial(2, 0.2, v1::Trial::FAILED, 0, 2, 2, 90 << 20, "w1");
  for (const char* name : {"scheduler", "w1", "w2"}) {
    v1::ProcessUsage& p = *fw.add_processes();
    p.set_name(name);
    p.set_cpu_seconds(3);
    p.set_peak_rss_bytes(50 << 20);
  }
  return report;
}

TEST(CompareReportTest, SummariesFollowFromTrialsAndProcesses) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  Conclude(report, /*cores=*/2);
  const v1::RunSummary& seq = report.sequential().summary();
  EXPECT_EQ(seq.trials_completed(), 3);
  EXPECT_DOUBLE_EQ(seq.best_objective(), 0.9);  // MAXIMIZE.
  EXPECT_DOUBLE_EQ(seq.median_objective(), 0.7);
  EXPECT_DOUBLE_EQ(seq.trial_seconds_sum(), 9);
  EXPECT_DOUBLE_EQ(seq.cpu_seconds(), 9.5);  // The process, not the trials.
  EXPECT_DOUBLE_EQ(seq.cpu_utilization(), 0.95);
  EXPECT_DOUBLE_EQ(seq.overhead_seconds(), 10 * 1 - 9);
  EXPECT_TRUE(seq.processes_measured());
  EXPECT_FALSE(seq.has_gpu_utilization_avg());

  const v1::RunSummary& fw = report.framework().summary();
  EXPECT_EQ(fw.trials_completed(), 2);
  EXPECT_EQ(fw.trials_failed(), 1);
  EXPECT_DOUBLE_EQ(fw.median_objective(), 0.6);  // Even count: the middle two averaged.
  EXPECT_DOUBLE_EQ(fw.cpu_seconds(), 9);
  EXPECT_DOUBLE_EQ(fw.peak_rss_bytes_sum(), 150 << 20);
  EXPECT_DOUBLE_EQ(fw.peak_rss_bytes_max(), 50 << 20);
  EXPECT_DOUBLE_EQ(fw.overhead_seconds(), 5 * 2 - 8);
  EXPECT_DOUBLE_EQ(report.speedup(), 2);
  // The same three points in both runs, whatever their outcome.
  EXPECT_TRUE(report.same_points());
}

TEST(CompareReportTest, WithoutProcessesTheTrialsMeasurementsStandIn) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  report.mutable_framework()->clear_processes();  // A remote cluster.
  Conclude(report, /*cores=*/0);
  const v1::RunSummary& fw = report.framework().summary();
  EXPECT_FALSE(fw.processes_measured());
  EXPECT_DOUBLE_EQ(fw.cpu_seconds(), 8);
  // The largest trial of each worker, summed over workers.
  EXPECT_DOUBLE_EQ(fw.peak_rss_bytes_sum(), 200 << 20);
  EXPECT_DOUBLE_EQ(fw.peak_rss_bytes_max(), 100 << 20);
}

// issue 32: a row per node of the framework run, with a listed node that ran nothing all idle
// and a trial without its own wall time measured by the scheduler's times.
TEST(CompareReportTest, NodeRowsShowWhichNodesWorkedAndWhichWaited) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  v1::RunReport& fw = *report.mutable_framework();
  fw.mutable_trials(0)->set_node_name("n1");
  fw.mutable_trials(0)->set_device("cpu");
  fw.mutable_trials(2)->set_node_name("n1");
  fw.mutable_trials(2)->mutable_metrics()->erase("wall_seconds");
  *fw.mutable_trials(2)->mutable_start_time() =
      google::protobuf::util::TimeUtil::SecondsToTimestamp(100);
  *fw.mutable_trials(2)->mutable_end_time() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(101500);
  fw.mutable_trials(1)->set_node_name("n2");
  for (const char* name : {"n1", "n2", "n3"}) {
    v1::NodeUsage& listed = *fw.add_nodes();
    listed.set_node(name);
    listed.set_slots(1);
    listed.set_board(name == std::string("n1") ? "orin" : "pi4");
    listed.set_memory_bytes(512 << 20);
  }
  Conclude(report, /*cores=*/0);
  Summarize(report.spec(), fw);  // Idempotent: the rows are recomputed, not added to.
  ASSERT_EQ(fw.nodes_size(), 3);
  const v1::NodeUsage& n1 = fw.nodes(0);
  EXPECT_EQ(n1.node(), "n1");
  EXPECT_EQ(n1.board(), "orin");
  EXPECT_EQ(n1.devices(), "cpu");
  EXPECT_EQ(n1.trials(), 2);
  EXPECT_DOUBLE_EQ(n1.busy_seconds(), 3 + 1.5);
  EXPECT_DOUBLE_EQ(n1.idle_seconds(), 5 - 4.5);
  EXPECT_DOUBLE_EQ(n1.cpu_seconds(), 3 + 2);
  EXPECT_DOUBLE_EQ(n1.cpu_utilization(), 1.0);
  EXPECT_DOUBLE_EQ(n1.peak_rss_bytes(), 100 << 20);
  EXPECT_EQ(fw.nodes(1).trials(), 1);
  EXPECT_DOUBLE_EQ(fw.nodes(1).idle_seconds(), 2);
  const v1::NodeUsage& n3 = fw.nodes(2);
  EXPECT_EQ(n3.trials(), 0);
  EXPECT_DOUBLE_EQ(n3.busy_seconds(), 0);
  EXPECT_DOUBLE_EQ(n3.idle_seconds(), 5);
  EXPECT_DOUBLE_EQ(n3.memory_bytes(), 512 << 20);
  const std::string md = CompareMarkdown(report, {});
  EXPECT_THAT(md, HasSubstr("## Framework nodes"));
  EXPECT_THAT(md, ContainsRegex(R"(\| n1 +\| orin +\| cpu +\| +1 \| +512 \| +2 \| +4\.50 \| +0\.50 \| +90 \|)"));
  EXPECT_THAT(md, ContainsRegex(R"(\| n3 +\| pi4 +\| +\| +1 \| +512 \| +0 \| +0\.00 \| +5\.00 \| +0 \|)"));
}

TEST(CompareReportTest, WarningsNameWhatMakesTheComparisonUnfair) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::RANDOM);
  report.mutable_framework()->set_workers(3);
  report.mutable_framework()->mutable_trials(1)->mutable_params()->at("x").set_double_value(0.4);
  Conclude(report, /*cores=*/2);
  EXPECT_FALSE(report.same_points());
  std::string all;
  for (const std::string& w : report.warnings()) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("3 trial slots on 2 cores"));
  EXPECT_THAT(all, HasSubstr("1 trials of the framework run failed"));
  EXPECT_THAT(all, HasSubstr("different numbers of trials"));
  EXPECT_THAT(all, HasSubstr("different parameter points although RANDOM"));

  // A model-based algorithm may well differ: no warning for that.
  v1::CompareReport tpe = TwoRuns(v1::Algorithm::TPE);
  tpe.mutable_framework()->mutable_trials(1)->mutable_params()->at("x").set_double_value(0.4);
  Conclude(tpe, 2);
  for (const std::string& w : tpe.warnings()) EXPECT_THAT(w, Not(HasSubstr("parameter points")));
}

TEST(CompareReportTest, TableAndMarkdownShowBothRuns) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  Conclude(report, 2);
  const std::string table = ComparisonTable(report);
  EXPECT_THAT(table, HasSubstr("wall time (s)"));
  EXPECT_THAT(table, HasSubstr("2.00x"));  // The speedup.
  EXPECT_THAT(table, HasSubstr("best r2"));
  EXPECT_THAT(table, HasSubstr("3 / 0 / 0"));  // Completed / pruned / failed.
  EXPECT_THAT(table, HasSubstr("2 / 0 / 1"));
  const std::string md = CompareMarkdown(report, {"best_so_far.svg", "best_so_far.png"});
  EXPECT_THAT(md, HasSubstr("| wall time (s)"));
  EXPECT_THAT(md, HasSubstr("![best_so_far.svg](best_so_far.svg)"));
  EXPECT_THAT(md, Not(HasSubstr("best_so_far.png)")));
  EXPECT_THAT(md, HasSubstr("## Warnings"));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| framework +\\| w2 +\\|"));
}

TEST(CompareReportTest, PrunedRunsSayHowManyPrunedTrialsWereWithinReachOfTheBest) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  EXPECT_THAT(ComparisonTable(report), Not(HasSubstr("within reach")));  // Nothing pruned.
  v1::Trial pruned = Trial(3, 0.4, v1::Trial::PRUNED, 0, 1, 1, 100 << 20, "sequential");
  *report.mutable_sequential()->add_trials() = pruned;
  *report.mutable_framework()->add_trials() = pruned;
  report.mutable_sequential()->set_trials_pruned_within_reach(1);
  Conclude(report, 2);
  EXPECT_THAT(ComparisonTable(report),
              ::testing::ContainsRegex("pruned within reach of the best +1 +0"));
}

TEST(CompareReportTest, MatrixRowsCarryEachCellsSummary) {
  v1::CompareReport report = TwoRuns(v1::Algorithm::TPE);
  Conclude(report, 2);
  v1::MatrixReport matrix;
  *matrix.add_cells() = MatrixCellOf("s-tpe", report);
  EXPECT_EQ(matrix.cells(0).algorithm(), v1::Algorithm::TPE);
  EXPECT_DOUBLE_EQ(matrix.cells(0).speedup(), 2);
  EXPECT_THAT(MatrixTable(matrix), HasSubstr("s-tpe"));
  EXPECT_THAT(MatrixMarkdown(matrix), HasSubstr("| s-tpe"));
}

TEST(CompareReportTest, MachineIsDescribed) {
  const v1::MachineInfo machine = DescribeMachine();
  EXPECT_GE(machine.cores(), 1);
  EXPECT_GT(machine.memory_bytes(), 0);
  EXPECT_FALSE(machine.kernel().empty());
  EXPECT_FALSE(machine.arch().empty());
}

}  // namespace
}  // namespace dhpt::cli

namespace dhpt::cli {
namespace {

v1::Trial TwoObjectiveTrial(double r2, double latency, bool infeasible = false) {
  v1::Trial trial;
  trial.set_state(v1::Trial::COMPLETED);
  trial.add_objective_values(r2);
  trial.add_objective_values(latency);
  trial.set_infeasible(infeasible);
  return trial;
}

TEST(CompareReportTest, FrontsOfBothRunsAreMeasuredFromOneReferencePoint) {
  v1::CompareReport report;
  v1::Objective* r2 = report.mutable_spec()->add_objectives();
  r2->set_metric("r2");
  r2->set_goal(v1::Objective::MAXIMIZE);
  v1::Objective* latency = report.mutable_spec()->add_objectives();
  latency->set_metric("inference_latency_us");
  latency->set_goal(v1::Objective::MINIMIZE);
  // Sequential: (0.5, 20) and (0.9, 30); framework: (0.8, 10), a dominated trial and an
  // infeasible one that would dominate everything.
  *report.mutable_sequential()->add_trials() = TwoObjectiveTrial(0.5, 20);
  *report.mutable_sequential()->add_trials() = TwoObjectiveTrial(0.9, 30);
  *report.mutable_framework()->add_trials() = TwoObjectiveTrial(0.8, 10);
  *report.mutable_framework()->add_trials() = TwoObjectiveTrial(0.4, 25);
  *report.mutable_framework()->add_trials() = TwoObjectiveTrial(1.0, 1, /*infeasible=*/true);
  Conclude(report, 2);
  // The worst feasible values of either run: r2 0.4, latency 30.
  EXPECT_THAT(report.pareto_reference_point(), ::testing::ElementsAre(0.4, 30));
  EXPECT_EQ(report.sequential().summary().pareto_front_size(), 2);
  EXPECT_EQ(report.framework().summary().pareto_front_size(), 1);
  // Sequential: [0.4, 0.5] x [20, 30] and [0.4, 0.9] x [30, 30] (no area): 1; framework:
  // [0.4, 0.8] x [10, 30]: 8.
  EXPECT_NEAR(report.sequential().summary().hypervolume(), 1.0, 1e-9);
  EXPECT_NEAR(report.framework().summary().hypervolume(), 8.0, 1e-9);
  const std::string table = ComparisonTable(report);
  EXPECT_THAT(table, ::testing::HasSubstr("Pareto front (trials)"));
  EXPECT_THAT(table, ::testing::HasSubstr("hypervolume (same reference)"));
  EXPECT_THAT(table, ::testing::Not(::testing::HasSubstr("best r2")));

  // With no feasible trial in either run and no references, there is nothing to measure from.
  v1::CompareReport none;
  *none.mutable_spec() = report.spec();
  *none.mutable_framework()->add_trials() = TwoObjectiveTrial(1.0, 1, /*infeasible=*/true);
  Conclude(none, 2);
  EXPECT_EQ(none.pareto_reference_point_size(), 0);
  EXPECT_FALSE(none.framework().summary().has_hypervolume());
}

}  // namespace
}  // namespace dhpt::cli
