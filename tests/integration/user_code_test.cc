// Users' own code with real processes: COMMAND studies placed only on workers that registered
// the command, pruned by early stopping or ended by a killed worker with nothing of their
// processes left behind (a child in a session of its own included), and warm starts through the CLI.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "services/cli/report.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

// A script in `dir`, executable.
std::string WriteScript(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// Processes of the trials: the script (its path and a parameter) and its child (named after
// it). "[d]hpt-..." matches them but not the shell running pgrep, and the worker's own command
// line (which names the script without a parameter) neither.
int TrialProcesses(const std::string& marker) {
  const auto [status, output] = RunCommandLine(absl::StrCat(
      "pgrep -c -f '[", marker.substr(0, 1), "]", marker.substr(1), "( --x=|-child)'"));
  return status == 0 ? std::stoi(output) : 0;
}

// The processes whose parent is `pid`, zombies included, as "PID (STATE)".
std::vector<std::string> ChildrenOf(pid_t pid) {
  std::vector<std::string> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;  // Not a process.
    std::ifstream file(entry.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const size_t end = stat.rfind(')');
    char state = '?';
    int ppid = 0;
    if (end == std::string::npos || std::sscanf(stat.c_str() + end + 1, " %c %d", &state, &ppid) != 2) {
      continue;
    }
    if (ppid == pid) children.push_back(absl::StrCat(name, " (", std::string(1, state), ")"));
  }
  return children;
}

TEST(UserCodeTest, CommandStudiesRunOnlyOnWorkersThatRegisteredTheCommand) {
  TempDirectory dir;
  const std::string script = WriteScript(dir.path(), "square.sh", R"(
for arg in "$@"; do case "$arg" in --x=*) x=${arg#--x=} ;; esac; done
awk -v x="$x" 'BEGIN { printf "loss=%.9f\n", (x - 0.3) ^ 2 }'
)");
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("plain", 2);
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: square
model: {kind: COMMAND, command: square}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: -1, max: 1}}]
max_trials: 6
parallel_trials: 2
)")).ok());
  // Once the worker without it is connected, the study says what it waits for.
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(cluster.client().GetStudy("square")->state_reason(),
                             "waiting for a worker that has command \"square\" (connected: 1 "
                             "CPU worker; 0 of them with it;");
  })) << cluster.client().GetStudy("square")->state_reason();
  cluster.SpawnWorkerProcess("with-square", 2, "dhpt-cpu-worker",
                             {"--command=square=" + script});
  const v1::Study study = cluster.WaitForEnd("square");
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), 6);
  const std::vector<v1::Trial> trials = *cluster.client().ListTrials("square");
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.worker_id(), "with-square");
    const double x = trial.params().at("x").double_value();
    EXPECT_NEAR(trial.metrics().at("loss"), (x - 0.3) * (x - 0.3), 1e-8);
    EXPECT_GT(trial.metrics().at("cpu_seconds"), 0);  // The process tree's, measured.
  }
}

TEST(UserCodeTest, PrunedCommandTrialsLeaveNoProcessBehind) {
  TempDirectory dir;
  // Slow, and stubborn: it ignores SIGTERM and leaves a child that does too, in a session of
  // its own (setsid). Bad values of x learn slowly, so the median rule stops them.
  const std::string marker = absl::StrCat("dhpt-prune-marker-", getpid());
  const std::string script = WriteScript(dir.path(), marker, R"(
trap '' TERM
setsid sh -c 'trap "" TERM; while :; do sleep 1; done' "$(basename "$0")-child" &
for arg in "$@"; do case "$arg" in --x=*) x=${arg#--x=} ;; esac; done
step=1
while [ $step -le 40 ]; do
  awk -v x="$x" -v s="$step" 'BEGIN { printf "step=%d loss=%.9f\n", s, (1 + 10 * x * x) / s }'
  sleep 0.05
  step=$((step + 1))
done
)");
  TestCluster cluster(0);
  const pid_t worker =
      cluster
          .SpawnWorkerProcess("pruner", 2, "dhpt-cpu-worker",
                              {"--command=slow=" + script, "--command_grace_seconds=1"})
          .pid();
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: prune
model: {kind: COMMAND, command: slow}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 2}
early_stopping: {median: {n_startup_trials: 2, n_warmup_steps: 3}}
parameters: [{name: x, double_range: {min: -1, max: 1}}]
max_trials: 10
parallel_trials: 2
)")).ok());
  const bool saw_trial_processes = WaitFor([&] { return TrialProcesses(marker) >= 2; });
  const v1::Study study = cluster.WaitForEnd("prune", absl::Minutes(3));
  ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_GE(study.trials_pruned(), 1);
  // Completed ones were waited for; pruned ones were stopped, children and all.
  // While it ran, the pattern did see them.
  EXPECT_TRUE(saw_trial_processes);
  EXPECT_TRUE(WaitFor([&] { return TrialProcesses(marker) == 0; }, absl::Seconds(10)))
      << TrialProcesses(marker) << " processes of the trials are left";
  // Nor a zombie under the worker: every trial's supervisor was reaped with its trial.
  EXPECT_THAT(ChildrenOf(worker), ::testing::IsEmpty());
}

// A worker killed with SIGKILL while its trials run: each trial's supervisor sees the worker's
// end of its control socket close and kills the trial's processes, the one in a session of its
// own too.
TEST(UserCodeTest, AKilledWorkersTrialsLeaveNoProcessBehind) {
  TempDirectory dir;
  const std::string marker = absl::StrCat("dhpt-orphan-marker-", getpid());
  const std::string script = WriteScript(dir.path(), marker, R"(
trap '' TERM
setsid sh -c 'trap "" TERM; while :; do sleep 1; done' "$(basename "$0")-child" &
while :; do sleep 1; done
)");
  TestCluster cluster(0);
  cli::ChildProcess& worker =
      cluster.SpawnWorkerProcess("doomed", 2, "dhpt-cpu-worker", {"--command=stuck=" + script});
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: stuck
model: {kind: COMMAND, command: stuck}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: -1, max: 1}}]
max_trials: 2
parallel_trials: 2
)")).ok());
  // Two trials: each its script and its child.
  ASSERT_TRUE(WaitFor([&] { return TrialProcesses(marker) == 4; })) << TrialProcesses(marker);
  worker.Signal(SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return TrialProcesses(marker) == 0; }, absl::Seconds(10)))
      << TrialProcesses(marker) << " processes of the trials are left";
}

TEST(UserCodeTest, WarmStartThroughTheCli) {
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("w", 2);
  const std::string space = R"(
model: {kind: FUNCTION, function: branin}
algorithm: {name: TPE, seed: 5}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 0, max: 15}}
)";
  ASSERT_TRUE(cluster.client().CreateStudy(Spec("name: first\nmax_trials: 12\n" + space)).ok());
  ASSERT_EQ(cluster.WaitForEnd("first").trials_completed(), 12);
  TempDirectory dir;
  const std::string file = dir.path() + "/second.yaml";
  std::ofstream(file) << "name: second\nmax_trials: 4\n" << space;
  const std::string submit = absl::StrCat("submit ", file, " --warm-start=first --scheduler=",
                                          cluster.address());
  auto [status, output] = RunBinary("dhpt", submit);
  ASSERT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("warm start: learnt from 12 completed trials of first"));
  std::tie(status, output) = RunBinary("dhpt", submit);  // Again: the same study, nothing more.
  ASSERT_EQ(status, 0) << output;
  EXPECT_THAT(output, HasSubstr("learnt from 12 completed"));
  const v1::Study second = cluster.WaitForEnd("second");
  EXPECT_EQ(second.state(), v1::Study::COMPLETED);
  EXPECT_EQ(second.trials_added(), 12);
  EXPECT_EQ(second.trials_completed(), 4);
  // Its own trials were suggested knowing the earlier ones: none repeats one of them.
  const std::vector<v1::Trial> trials = *cluster.client().ListTrials("second");
  ASSERT_EQ(trials.size(), 16u);
  for (const v1::Trial& trial : trials) {
    EXPECT_EQ(trial.origin(), trial.number() < 12 ? v1::Trial::ADDED : v1::Trial::SUGGESTED);
  }
  // A study with other ranges is refused whole, naming what does not fit.
  std::ofstream(file) << "name: third\nmax_trials: 4\nmodel: {kind: FUNCTION, function: branin}\n"
                         "parameters: [{name: x1, double_range: {min: 0, max: 1}}, "
                         "{name: x2, double_range: {min: 0, max: 1}}]\n";
  std::tie(status, output) = RunBinary(
      "dhpt", absl::StrCat("submit ", file, " --warm-start=first --scheduler=", cluster.address()));
  EXPECT_EQ(status, 1);
  EXPECT_THAT(output, HasSubstr("is outside [0, 1]"));
  EXPECT_THAT(output, HasSubstr("the same parameters"));
  EXPECT_EQ(cluster.client().GetStudy("third").status().code(), absl::StatusCode::kNotFound);
}

// A setup error, as a newcomer makes one: every trial fails alike. The study fails fast with
// the error, and every view of the trials says why: the watch's lines, the trials table's
// reason column, and `dhpt trial` with the whole stderr tail.
TEST(UserCodeTest, ACommandThatAlwaysFailsFailsFastAndEveryViewSaysWhy) {
  TempDirectory dir;
  const std::string script = WriteScript(dir.path(), "broken.sh", R"(
echo "loading /data/missing.csv" >&2
echo "FileNotFoundError: /data/missing.csv" >&2
exit 3
)");
  TestCluster cluster(0);
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: broken
model: {kind: COMMAND, command: broken}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: -1, max: 1}}]
max_trials: 40
parallel_trials: 2
)")).ok());
  // The watch starts before any trial can run (no worker yet), so it sees every failure.
  const std::string watched = dir.path() + "/watch.out";
  RunCommandLine(absl::StrCat(DHPT_BIN_DIR "/dhpt watch broken --scheduler=", cluster.address(),
                              " > ", watched, " 2>&1 &"));
  auto watch_output = [&] {
    std::ifstream file(watched);
    return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  };
  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(watch_output(), "broken PENDING"); }))
      << watch_output();
  cluster.SpawnWorkerProcess("w", 2, "dhpt-cpu-worker", {"--command=broken=" + script});
  const v1::Study study = cluster.WaitForEnd("broken");
  EXPECT_EQ(study.state(), v1::Study::FAILED);
  EXPECT_EQ(study.trials_failed(), 5);
  EXPECT_THAT(study.state_reason(), HasSubstr("fail fast: the first 5 trials all failed with the "
                                              "same error"));
  EXPECT_THAT(study.state_reason(), HasSubstr("FileNotFoundError: /data/missing.csv"));

  ASSERT_TRUE(WaitFor([&] { return absl::StrContains(watch_output(), "study broken: FAILED"); }))
      << watch_output();
  const std::string watch = watch_output();
  int failure_lines = 0;
  for (size_t at = 0; (at = watch.find(" FAILED on w: command broken exited with status 3; stderr "
                                       "ends: loading /data/missing.csv FileNotFoundError: "
                                       "/data/missing.csv (dhpt trial broken ", at)) != std::string::npos;
       ++at) {
    ++failure_lines;
  }
  EXPECT_EQ(failure_lines, 5) << watch;

  auto [status, trials] = RunBinary("dhpt", "trials broken --scheduler=" + cluster.address());
  ASSERT_EQ(status, 0) << trials;
  EXPECT_THAT(trials, HasSubstr("reason"));
  const std::vector<v1::Trial> listed = *cluster.client().ListTrials("broken");
  for (const v1::Trial& trial : listed) {
    EXPECT_THAT(trials, HasSubstr(cli::ShortReason(trial.error(), cli::kReasonColumnWidth)));
  }

  const int64_t first_failed = [&] {
    for (const v1::Trial& trial : listed) {
      if (trial.state() == v1::Trial::FAILED) return trial.number();
    }
    return int64_t{-1};
  }();
  auto [shown, view] = RunBinary(
      "dhpt", absl::StrCat("trial broken ", first_failed, " --scheduler=", cluster.address()));
  ASSERT_EQ(shown, 0) << view;
  EXPECT_THAT(view, HasSubstr(absl::StrCat("trial ", first_failed, " of broken: FAILED")));
  EXPECT_THAT(view, HasSubstr("    1: worker w, node "));
  // The whole error (the scheduler keeps a worker's text on one line).
  EXPECT_THAT(view, HasSubstr("  error:\n    command broken exited with status 3; stderr ends: "
                              "loading /data/missing.csv FileNotFoundError: /data/missing.csv"));
  std::tie(shown, view) = RunBinary("dhpt", "trial broken 99 --scheduler=" + cluster.address());
  EXPECT_EQ(shown, 1);
  EXPECT_THAT(view, HasSubstr("study broken has no trial 99"));
}

// Early stopping over a program that prints its objective only at exit: the study says, while
// it runs, that its rule has nothing to judge.
TEST(UserCodeTest, EarlyStoppingOverAProgramThatReportsOnlyAtExitSaysSo) {
  TempDirectory dir;
  // The fourth trial on waits for the test's go, so the study is still running when looked at;
  // each loss is better than the last, so none is pruned at its one report.
  const std::string script = WriteScript(dir.path(), "at-exit.sh", absl::StrCat(R"(
n=$(( $(cat )", dir.path(), R"(/count 2>/dev/null || echo 0) + 1 ))
echo $n > )", dir.path(), R"(/count
if [ $n -gt 3 ]; then while [ ! -e )", dir.path(), R"(/go ]; do sleep 0.05; done; fi
echo loss=0.$((10 - n))
)"));
  TestCluster cluster(0);
  cluster.SpawnWorkerProcess("w", 1, "dhpt-cpu-worker", {"--command=at-exit=" + script});
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: at-exit
model: {kind: COMMAND, command: at-exit}
objective: {metric: loss, goal: MINIMIZE}
early_stopping: {median: {n_startup_trials: 1}}
parameters: [{name: x, double_range: {min: -1, max: 1}}]
max_trials: 5
parallel_trials: 1
)")).ok());
  EXPECT_TRUE(WaitFor([&] {
    return absl::StrContains(cluster.client().GetStudy("at-exit")->state_reason(),
                             "early stopping is idle: none of the first 3 completed trials "
                             "reported progress");
  })) << cluster.client().GetStudy("at-exit")->DebugString()
     << cluster.client().ExportStudy("at-exit")->DebugString();
  EXPECT_THAT(cluster.client().GetStudy("at-exit")->state_reason(),
              HasSubstr("the command must print its objective metric (loss=VALUE, with step=N) "
                        "as it trains"));
  std::ofstream(dir.path() + "/go") << "";
  EXPECT_EQ(cluster.WaitForEnd("at-exit").state(), v1::Study::COMPLETED);
}

// `dhpt tell` of a result over the scheduler's message limit: gRPC refuses it before the
// scheduler reads it. The CLI printed gRPC's raw RESOURCE_EXHAUSTED text and the trial stayed
// RUNNING until its lease ran out; it now says which trial and what to change, and fails the
// trial with that reason (as the Python client does).
TEST(UserCodeTest, ATellOverTheMessageLimitFailsItsTrialSayingWhatToChange) {
  SchedulerProcess scheduler({"--max_message_bytes=1024"});  // The smallest it takes.
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: big-tell
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
algorithm: {name: RANDOM, seed: 5}
parameters:
  - {name: x, double_range: {min: -5, max: 5}}
max_trials: 3
)")).ok());
  const std::string at = absl::StrCat(" --scheduler=", scheduler.address(), " </dev/null");
  auto [status, output] = RunBinary("dhpt", "ask big-tell" + at);
  ASSERT_EQ(status, 0) << output;
  ASSERT_TRUE(absl::StartsWith(output, "0 --x=")) << output;
  std::string words = "loss=0.5";  // About 2 kB of metrics.
  for (int i = 1; i < 61; ++i) absl::StrAppend(&words, " a_rather_long_metric_name_", i, "=1");
  std::tie(status, output) = RunBinary("dhpt", "tell big-tell 0 " + words + at);
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("dhpt tell: trial 0: the result (61 metrics) is over the "
                                "scheduler's message limit of 1024 bytes (Received message larger "
                                "than max ("));
  EXPECT_THAT(output, HasSubstr("; dhpt-scheduler --max_message_bytes): tell the objectives and "
                                "at most 64 metrics in all\ntrial 0 is marked FAILED with this reason"));
  const absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("big-tell");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_EQ(trials->front().state(), v1::Trial::FAILED);
  EXPECT_THAT(trials->front().error(), HasSubstr("bad result: trial 0: the result (61 metrics)"));

  // An --infeasible reason too long: said as such (not "0 metrics"), and the trial keeps its
  // start.
  std::tie(status, output) = RunBinary("dhpt", "ask big-tell" + at);
  ASSERT_EQ(status, 0) << output;
  ASSERT_TRUE(absl::StartsWith(output, "1 --x=")) << output;
  std::tie(status, output) = RunBinary(
      "dhpt", absl::StrCat("tell big-tell 1 --infeasible=", std::string(1100, 'r'), at));
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("dhpt tell: trial 1: the --infeasible reason (1100 bytes) is "
                                "over the scheduler's message limit of 1024 bytes"));
  const absl::StatusOr<std::vector<v1::Trial>> after = client.ListTrials("big-tell");
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ(after->back().state(), v1::Trial::FAILED);
  EXPECT_THAT(after->back().error(), HasSubstr(absl::StrCat(std::string(253, 'r'),
                                                          "... [cut to 256 bytes; bad result: "
                                                          "trial 1: the --infeasible reason")));
}

// Trial ids repeat across schedulers (two of them, or a restarted in-memory one): two workers
// given one --command_workdir each used to remove the other's live trial-ID-ATTEMPT directory
// ("left by an earlier run") and what the user had there under that name, and both trials
// ended COMPLETED with the other's files. Each worker now has a directory of its own in it.
TEST(UserCodeTest, WorkersSharingOneWorkdirKeepTheirOwnTrialsFiles) {
  TempDirectory dir;
  const std::string shared = dir.path() + "/work";
  // The user's own, named as the trials' directories will be (trial 1, attempt 1).
  std::filesystem::create_directories(shared + "/trial-1-1");
  std::ofstream(shared + "/trial-1-1/keep") << "the user's\n";
  // Each trial writes its study's name in its working directory, waits (60 s at most) until
  // both trials run, and reports whether its file still holds its own name.
  const std::string started = dir.path() + "/started-";
  const std::string script = WriteScript(dir.path(), "own.sh", absl::StrCat(R"sh(
echo "$DHPT_STUDY" > "$HOME/own"
touch ")sh", started, R"sh($DHPT_STUDY"
i=0
while [ ! -e ")sh", started, R"sh(a" ] || [ ! -e ")sh", started, R"sh(b" ]; do
  i=$((i + 1)); [ "$i" -gt 600 ] && break; sleep 0.1
done
if [ "$(cat "$HOME/own" 2>/dev/null)" = "$DHPT_STUDY" ]; then echo kept=1; else echo kept=0; fi
)sh"));
  TestCluster a(0), b(0);
  const std::vector<std::string> flags = {"--command=own=" + script, "--command_workdir=" + shared};
  cli::ChildProcess& worker_a = a.SpawnWorkerProcess("a", 1, "dhpt-cpu-worker", flags);
  cli::ChildProcess& worker_b = b.SpawnWorkerProcess("b", 1, "dhpt-cpu-worker", flags);
  for (auto [cluster, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
    ASSERT_TRUE(cluster->client().CreateStudy(Spec(absl::StrCat("name: ", name, R"(
model: {kind: COMMAND, command: own}
objective: {metric: kept, goal: MAXIMIZE}
parameters: [{name: x, double_range: {min: 0, max: 1}}]
max_trials: 1
)"))).ok());
  }
  for (auto [cluster, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
    const v1::Study study = cluster->WaitForEnd(name);
    ASSERT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
    const std::vector<v1::Trial> trials = *cluster->client().ListTrials(name);
    ASSERT_EQ(trials.size(), 1u);
    EXPECT_EQ(trials[0].id(), 1u);  // The same trial id and attempt on both workers.
    EXPECT_EQ(trials[0].attempt(), 1);
    EXPECT_EQ(trials[0].metrics().at("kept"), 1) << "study " << name;
  }
  std::ifstream keep(shared + "/trial-1-1/keep");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(keep), {}), "the user's\n");
  // Once they have stopped, the workers' own directories are gone, and only the user's stays.
  for (cli::ChildProcess* worker : {&worker_a, &worker_b}) {
    worker->Signal(SIGTERM);
    ASSERT_TRUE(WaitForExit(*worker));
  }
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(shared)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(left, ::testing::ElementsAre("trial-1-1"));
}

// The default --command_workdir is removed at exit when this worker made it; one the user gave
// stays, even under the default's name ($TMPDIR/dhpt-trials-PID), which the worker once went by.
TEST(UserCodeTest, AGivenWorkdirNamedLikeTheDefaultSurvivesTheWorkersExit) {
  TempDirectory dir;
  const std::string script = WriteScript(dir.path(), "zero.sh", "echo loss=0\n");
  TestCluster cluster(0);
  OutputReader output;
  // The shell knows the PID the worker will have: it execs the worker.
  std::unique_ptr<cli::ChildProcess> worker = StartProcess(
      {"/bin/sh", "-c",
       absl::StrCat("export TMPDIR='", dir.path(), "'; given=\"$TMPDIR/dhpt-trials-$$\"; ",
                    "mkdir \"$given\" && exec '" DHPT_BIN_DIR "/dhpt-cpu-worker' --scheduler=",
                    cluster.address(), " --worker_id=w --command=zero=", script,
                    " --command_workdir=\"$given\"")},
      output.write_fd());
  output.Started();
  const std::string given = absl::StrCat(dir.path(), "/dhpt-trials-", worker->pid());
  ASSERT_TRUE(output.WaitForText("trials work in " + given)) << output.text();
  worker->Signal(SIGTERM);
  ASSERT_TRUE(WaitForExit(*worker)) << output.text();
  ASSERT_TRUE(std::filesystem::is_directory(given)) << output.text();
  EXPECT_THAT(output.text(), HasSubstr("trials work in " + given + "/worker-"));
  EXPECT_TRUE(std::filesystem::is_empty(given));  // Its own directory in it is gone.
}

// The worker-XXXXXX directories in `root`.
std::set<std::string> WorkerDirectories(const std::string& root) {
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "worker-")) found.insert(name);
  }
  return found;
}

// A worker killed (SIGKILL) mid-trial leaves its worker-XXXXXX directory, trial and all; the
// next worker given the same --command_workdir removes it, since the marker's lock says its
// worker has ended. A live worker's directory stays, and so does what the user keeps there,
// a directory named like a worker's (without a marker) included. Before, the killed worker's
// directory stayed for good.
TEST(UserCodeTest, AKilledWorkersDirectoryIsRemovedByTheNextWorkerALiveOnesIsKept) {
  TempDirectory dir;
  const std::string shared = dir.path() + "/work";
  std::filesystem::create_directories(shared + "/worker-user01");
  std::ofstream(shared + "/worker-user01/keep") << "the user's\n";
  std::ofstream(shared + "/keep") << "the user's\n";
  const std::string started = dir.path() + "/started";
  const std::string script = WriteScript(
      dir.path(), "busy.sh", absl::StrCat("echo working > \"$HOME/file\"\ntouch '", started,
                                          "'\nwhile :; do sleep 1; done\n"));
  TestCluster cluster(0);
  const std::vector<std::string> flags = {"--command=busy=" + script,
                                          "--command_workdir=" + shared};
  cli::ChildProcess& killed = cluster.SpawnWorkerProcess("killed", 1, "dhpt-cpu-worker", flags);
  ASSERT_TRUE(cluster.client().CreateStudy(Spec(R"(
name: busy
model: {kind: COMMAND, command: busy}
objective: {metric: loss, goal: MINIMIZE}
parameters: [{name: x, double_range: {min: 0, max: 1}}]
max_trials: 1
)")).ok());
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(started); }));
  std::set<std::string> before = WorkerDirectories(shared);
  before.erase("worker-user01");
  ASSERT_EQ(before.size(), 1u);
  const std::string left = *before.begin();
  killed.Signal(SIGKILL);
  ASSERT_TRUE(WaitForExit(killed));
  ASSERT_TRUE(std::filesystem::exists(shared + "/" + left + "/trial-1-1/file"));  // Left behind.

  const auto started_worker = [&](const std::string& id) {
    cluster.SpawnWorkerProcess(id, 1, "dhpt-cpu-worker", flags);
    // Its own directory is made after the removal, before it connects.
    EXPECT_TRUE(WaitFor([&] {
      absl::StatusOr<std::vector<v1::Worker>> workers = cluster.client().ListWorkers();
      return workers.ok() && std::any_of(workers->begin(), workers->end(),
                                         [&](const v1::Worker& w) { return w.worker_id() == id; });
    }));
  };
  started_worker("next");
  std::set<std::string> after = WorkerDirectories(shared);
  EXPECT_FALSE(after.count(left)) << left << " is left";
  EXPECT_TRUE(after.count("worker-user01"));
  after.erase("worker-user01");
  ASSERT_EQ(after.size(), 1u);
  const std::string live = *after.begin();

  started_worker("third");
  EXPECT_TRUE(std::filesystem::exists(shared + "/" + live)) << "the live worker's was removed";
  EXPECT_EQ(WorkerDirectories(shared).size(), 3u);  // The user's, next's and third's.
  for (const std::string& kept : {shared + "/keep", shared + "/worker-user01/keep"}) {
    std::ifstream file(kept);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(file), {}), "the user's\n") << kept;
  }
}

}  // namespace
}  // namespace dhpt::testing
