// Placement by learnt speed with real worker processes (issue 32): a fast and a slow worker
// (the same COMMAND, its sleep set per worker), speeds learnt from a first study; in a second,
// the idle fast worker duplicates the slow worker's trial, its result counts once and the slow
// attempt is cancelled at no cost.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>
#include <vector>

#include <gmock/gmock.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/cli/report.h"
#include "services/scheduler/scheduler_metrics.h"
#include "absl/synchronization/mutex.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

std::string WriteNapScript(const std::string& dir, const std::string& name, double seconds) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\nsleep " << seconds << "\necho loss=1\n";
  chmod(path.c_str(), 0755);
  return path;
}

// The slow worker's trial processes ("[d]hpt-..." so pgrep does not count its own shell).
int SlowTrialProcesses(const std::string& marker) {
  const auto [status, output] = RunCommandLine(
      absl::StrCat("pgrep -c -f '[", marker.substr(0, 1), "]", marker.substr(1), " --x='"));
  return status == 0 ? std::stoi(output) : 0;
}

// The COMMAND study every test here runs: `nap` (each worker's own script), one trial a slot.
v1::StudySpec NapStudy(const std::string& name, int max_trials) {
  return Spec(absl::StrCat("name: ", name, "\nmax_trials: ", max_trials, R"(
model: {kind: COMMAND, command: nap}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 1}
parameters: [{name: x, double_range: {min: 0, max: 1}}]
parallel_trials: 2
)"));
}

struct NapWorker {
  std::string id;
  std::string script;
  std::string board;
};

// Starts one single-slot worker per entry, running `script` as `nap` with its board label, and
// has their boards' speeds learnt from a study "learn" of a trial each.
void StartAndLearn(TestCluster& cluster, const std::vector<NapWorker>& workers) {
  for (const NapWorker& worker : workers) {
    cluster.SpawnWorkerProcess(worker.id, 1, "dhpt-cpu-worker",
                               {"--command=nap=" + worker.script, "--labels=board=" + worker.board});
  }
  ASSERT_TRUE(WaitFor([&] { return cluster.client().ListWorkers()->size() == workers.size(); }));
  ASSERT_TRUE(cluster.client().CreateStudy(NapStudy("learn", static_cast<int>(workers.size()))).ok());
  ASSERT_EQ(cluster.WaitForEnd("learn").state(), v1::Study::COMPLETED);
  std::set<std::string> boards;
  for (const NapWorker& worker : workers) boards.insert(worker.board);
  ASSERT_EQ(cluster.core().SpeedEstimates().size(), boards.size());
}

class CountingObserver : public scheduler::SchedulerObserver {
 public:
  void TrialEnded(const v1::StudySpec& spec, v1::Trial::State state, absl::string_view,
                  absl::Duration) override {
    absl::MutexLock lock(&mutex_);
    if (spec.name() == "main") ++ended_[state];
  }
  void TrialDuplicated(const v1::StudySpec&) override {
    absl::MutexLock lock(&mutex_);
    ++duplicated_;
  }
  int ended(v1::Trial::State state) {
    absl::MutexLock lock(&mutex_);
    return ended_[state];
  }
  int duplicated() {
    absl::MutexLock lock(&mutex_);
    return duplicated_;
  }

 private:
  absl::Mutex mutex_;
  std::map<v1::Trial::State, int> ended_ ABSL_GUARDED_BY(mutex_);
  int duplicated_ ABSL_GUARDED_BY(mutex_) = 0;
};

TEST(SpeedPlacementIntegrationTest, TheFastWorkersDuplicateCountsOnceAndTheSlowAttemptIsCancelled) {
  TempDirectory dir;
  const std::string marker = absl::StrCat("dhpt-slow-nap-", getpid());
  // The slow board takes 12 s a trial, the fast one 0.3 s: learnt from study "learn", the
  // slow worker's trial of study "main" is worth duplicating once the fast one is idle.
  const std::string fast = WriteNapScript(dir.path(), "fast-nap", 0.3);
  const std::string slow = WriteNapScript(dir.path(), marker, 12);
  CountingObserver observer;
  TestCluster cluster(0, 1, &observer);
  ASSERT_NO_FATAL_FAILURE(StartAndLearn(cluster, {{"fast", fast, "orin"}, {"slow", slow, "pi4"}}));

  // Four trials on two slots: the slow worker takes the second (three left: not yet the
  // study's end, where it would leave them to the fast one), the fast one the rest.
  ASSERT_TRUE(cluster.client().CreateStudy(NapStudy("main", 4)).ok());
  // Ends long before the slow trial's 12 s: the duplicate finished it.
  const v1::Study study = cluster.WaitForEnd("main", absl::Seconds(10));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 4);
  EXPECT_EQ(study.trials_failed(), 0);
  const std::vector<v1::Trial> trials = *cluster.client().ListTrials("main");
  ASSERT_EQ(trials.size(), 4u);
  int duplicated = 0;
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
    EXPECT_EQ(trial.worker_id(), "fast");
    EXPECT_EQ(trial.lost_attempts(), 0);
    if (trial.attempt() == 2) {
      ++duplicated;
      EXPECT_EQ(trial.attempts(0).worker_id(), "slow");
      EXPECT_EQ(trial.attempts(1).worker_id(), "fast");
    }
  }
  EXPECT_EQ(duplicated, 1);
  EXPECT_TRUE(cluster.client().GetBestTrial("main").ok());
  // The slow attempt was stopped, not left to run out its 12 s.
  EXPECT_TRUE(WaitFor([&] { return SlowTrialProcesses(marker) == 0; }, absl::Seconds(5)))
      << SlowTrialProcesses(marker) << " processes of the slow attempt are left";
  EXPECT_TRUE(WaitFor([&] {
    const std::vector<v1::Worker> workers = *cluster.client().ListWorkers();
    for (const v1::Worker& worker : workers) {
      if (worker.running_trials_size() != 0) return false;
    }
    return true;
  }));
  // Each worker's learnt speed: in ListWorkers, `dhpt workers` and the metrics.
  std::map<std::string, double> speeds;
  const std::vector<v1::Worker> workers = *cluster.client().ListWorkers();
  for (const v1::Worker& worker : workers) {
    ASSERT_EQ(worker.speeds_size(), 1) << worker.worker_id();
    speeds[worker.node_class()] = worker.speeds(0).relative_speed();
  }
  EXPECT_GT(speeds["orin"], 5 * speeds["pi4"]);
  const std::string table = cli::WorkersTable(workers);
  EXPECT_THAT(table, HasSubstr("speed"));
  EXPECT_THAT(table, HasSubstr(absl::StrFormat("COMMAND %.2fx", speeds["pi4"])));
  std::map<std::string, double> gauges;
  for (const prometheus::MetricFamily& family :
       scheduler::SchedulerStateCollector(&cluster.core()).Collect()) {
    if (family.name != "dhpt_node_speed_relative") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "node_class") gauges[label.value] = metric.gauge.value;
      }
    }
  }
  EXPECT_EQ(gauges, speeds);
  // Counted once in the metrics' events too: four trials ended, all completed, one duplicate.
  EXPECT_EQ(observer.ended(v1::Trial::COMPLETED), 4);
  EXPECT_EQ(observer.ended(v1::Trial::CANCELLED), 0);
  EXPECT_EQ(observer.duplicated(), 1);
}

// Earliest finish time at a study's end, with real workers: three trials left for a fast worker
// (0.3 s a trial) and a slow one (3 s). The fast one, busy with the first, is predicted to
// finish all three before the slow one would finish one: the slow worker takes none, and no
// duplicate is needed. First-come gave it the second trial (and a duplicate then finished it).
TEST(SpeedPlacementIntegrationTest, AtAStudysEndTheSlowWorkerLeavesTheTrialsToTheFastOne) {
  TempDirectory dir;
  const std::string fast = WriteNapScript(dir.path(), "fast-nap", 0.3);
  const std::string slow = WriteNapScript(dir.path(), "slow-nap", 3);
  CountingObserver observer;
  TestCluster cluster(0, 1, &observer);
  ASSERT_NO_FATAL_FAILURE(StartAndLearn(cluster, {{"fast", fast, "orin"}, {"slow", slow, "pi4"}}));

  ASSERT_TRUE(cluster.client().CreateStudy(NapStudy("main", 3)).ok());
  const v1::Study study = cluster.WaitForEnd("main", absl::Seconds(10));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  const std::vector<v1::Trial> trials = *cluster.client().ListTrials("main");
  ASSERT_EQ(trials.size(), 3u);
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
    ASSERT_EQ(trial.attempts_size(), 1) << "trial " << trial.number();
    EXPECT_EQ(trial.attempts(0).worker_id(), "fast") << "trial " << trial.number();
  }
  EXPECT_EQ(observer.duplicated(), 0);
}

// A board that slows after its speed was learnt (issue 32, from the hostile review): two
// workers of one board learn 0.3 s a trial; then one's trials take 60 s (its board throttled;
// a COMMAND trial reports no progress). When the other is idle, the slowed trial is past its
// prediction, and the periodic sweep has the idle worker run a duplicate, which finishes the
// study in seconds; the slowed attempt is cancelled. Before, a trial past its prediction without
// progress was taken as ending any moment, and the study waited the 60 s.
TEST(SpeedPlacementIntegrationTest, ATrialOnABoardThatSlowedIsDuplicatedOnAnIdleOne) {
  TempDirectory dir;
  const std::string marker = absl::StrCat("dhpt-slowed-nap-", getpid());
  const std::string slowed_flag = dir.path() + "/slowed";
  const std::string slowed = dir.path() + "/" + marker;
  std::ofstream(slowed) << "#!/bin/sh\nif [ -e " << slowed_flag
                        << " ]; then sleep 60; else sleep 0.3; fi\necho loss=1\n";
  chmod(slowed.c_str(), 0755);
  const std::string steady = WriteNapScript(dir.path(), "steady-nap", 0.3);
  CountingObserver observer;
  TestCluster cluster(0, 1, &observer);
  ASSERT_NO_FATAL_FAILURE(
      StartAndLearn(cluster, {{"slowed", slowed, "orin"}, {"steady", steady, "orin"}}));
  std::ofstream(slowed_flag) << "throttled\n";

  // Two trials, one each; the slowed board's takes 60 s.
  ASSERT_TRUE(cluster.client().CreateStudy(NapStudy("main", 2)).ok());
  const v1::Study study = cluster.WaitForEnd("main", absl::Seconds(40));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 2);
  const std::vector<v1::Trial> trials = *cluster.client().ListTrials("main");
  ASSERT_EQ(trials.size(), 2u);
  int duplicated = 0;
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.state(), v1::Trial::COMPLETED);
    EXPECT_EQ(trial.worker_id(), "steady");
    EXPECT_EQ(trial.lost_attempts(), 0);
    if (trial.attempt() == 2) {
      ++duplicated;
      EXPECT_EQ(trial.attempts(0).worker_id(), "slowed");
    }
  }
  EXPECT_EQ(duplicated, 1);
  EXPECT_EQ(observer.duplicated(), 1);
  EXPECT_EQ(observer.ended(v1::Trial::COMPLETED), 2);
  // The slowed attempt was stopped, not left to run out its 60 s.
  EXPECT_TRUE(WaitFor([&] { return SlowTrialProcesses(marker) == 0; }, absl::Seconds(10)))
      << SlowTrialProcesses(marker) << " processes of the slowed attempt are left";
}

}  // namespace
}  // namespace dhpt::testing
