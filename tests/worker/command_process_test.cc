// COMMAND trials' process care: stopping whole process trees, bounded output, and what the
// tree costs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "services/worker/resource_meter.h"
#include "services/worker/trial_runner.h"
#include "services/worker/worker_core.h"
#include "tests/worker/command_fixture.h"

namespace dhpt::worker {
namespace {

using ::testing::HasSubstr;
using CommandProcessTest = CommandFixture;

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// A process as /proc shows it; zombies too.
struct ProcessInfo {
  pid_t pid = 0;
  char state = '?';  // 'Z' for a zombie.
  pid_t ppid = 0, pgrp = 0, session = 0;
};

std::optional<ProcessInfo> ReadProcess(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/stat"));
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t end = text.rfind(')');
  if (end == std::string::npos) return std::nullopt;
  ProcessInfo info{.pid = pid};
  if (std::sscanf(text.c_str() + end + 1, " %c %d %d %d", &info.state, &info.ppid, &info.pgrp,
                  &info.session) != 4) {
    return std::nullopt;
  }
  return info;
}

// "gone", or the state letter /proc gives the process ("Z": a zombie).
std::string StateOf(pid_t pid) {
  const std::optional<ProcessInfo> info = ReadProcess(pid);
  return info ? std::string(1, info->state) : "gone";
}

// Every process in /proc in `session`, zombies included, as "PID (STATE)".
std::vector<std::string> ProcessesInSession(pid_t session) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::optional<ProcessInfo> info = ReadProcess(pid);
    if (info && info->session == session) found.push_back(absl::StrCat(pid, " (", std::string(1, info->state), ")"));
  }
  return found;
}

// What a process of a trial recorded with `echo $$ $(cut -d' ' -f5,6 /proc/$$/stat)`: its pid,
// process group and session.
struct Ids {
  pid_t pid = 0, pgrp = 0, session = 0;
};

Ids ParseIds(const std::string& text) {
  Ids ids;
  EXPECT_EQ(std::sscanf(text.c_str(), "%d %d %d", &ids.pid, &ids.pgrp, &ids.session), 3) << text;
  return ids;
}

// Shell for "this process's pid, group and session, into FILE" (the script's name has no space).
std::string RecordIds(const std::string& file) {
  return absl::StrCat("echo $$ $(cut -d' ' -f5,6 /proc/$$/stat) > ", file, ".tmp; mv ", file,
                      ".tmp ", file);
}

// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// A program that ignores SIGTERM and leaves a grandchild doing the same: only SIGKILL, sent
// to the whole group after the grace period, stops them, and both are reaped.
TEST_F(CommandProcessTest, CancelKillsAForkingChildThatIgnoresSigterm) {
  options_.grace_period = absl::Milliseconds(300);
  std::atomic<bool> cancelled = false;
  absl::Time cancel_time;
  TrialContext context;
  context.cancelled = &cancelled;
  context.progress = [&](int64_t, double) {  // The grandchild runs: cancel now.
    cancel_time = absl::Now();
    cancelled = true;
  };
  CommandTrialOutcome outcome = Run(Script(R"(
trap '' TERM
echo "main=$$"
sh -c 'echo $$ > $DIR/grandchild.pid; echo "pid=$$ ready=1"; while :; do sleep 0.05; done' &
while :; do sleep 0.05; done)"),
                                    MakeAssign("ready"), context);
  const absl::Duration stop_time = absl::Now() - cancel_time;
  EXPECT_TRUE(absl::IsCancelled(outcome.status)) << outcome.status;
  EXPECT_GE(stop_time, absl::Milliseconds(300));  // SIGTERM was ignored for the grace period.
  EXPECT_LT(stop_time, absl::Milliseconds(300) + absl::Seconds(2));
  pid_t grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Read("grandchild.pid")), &grandchild));
  EXPECT_EQ(outcome.metrics.at("pid"), grandchild);
  EXPECT_TRUE(Gone(grandchild));
  // No process of the group is left: its id, the main process's pid, names no group.
  const auto group = static_cast<pid_t>(outcome.metrics.at("main"));
  EXPECT_NE(kill(-group, 0), 0);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_TRUE(std::filesystem::is_empty(options_.workdir_root));
}

// Through the worker: the study's trial_timeout sets the cancelled flag, the program (which
// dies on SIGTERM) goes at once rather than after the grace period, and the trial FAILS.
TEST_F(CommandProcessTest, ATrialTimeoutStopsTheProgramAndFailsTheTrial) {
  auto registry = std::make_shared<CommandRegistry>();
  ASSERT_TRUE(registry->Add(Script("echo accuracy=0.1; while :; do sleep 0.05; done")).ok());
  TrialRunner runner({.commands = registry, .command_options = options_});
  WorkerCore core({.slots = 1}, &runner);
  core.Start();
  absl::Mutex mutex;
  std::vector<v1::WorkerMessage> sent;
  core.Attach(v1::WorkerMessage(), [&](v1::WorkerMessage message) {
    absl::MutexLock lock(&mutex);
    sent.push_back(std::move(message));
  });
  v1::SchedulerMessage message;
  *message.mutable_assign() = MakeAssign();
  message.mutable_assign()->set_timeout_ms(300);
  const absl::Time start = absl::Now();
  core.Handle(message);
  auto has_result = [&] {
    return std::any_of(sent.begin(), sent.end(), [](const auto& m) { return m.has_result(); });
  };
  {
    absl::MutexLock lock(&mutex);
    mutex.AwaitWithTimeout(absl::Condition(&has_result), absl::Seconds(30));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));  // Well within the 10 s grace period.
  core.Stop();
  absl::MutexLock lock(&mutex);
  ASSERT_TRUE(has_result());
  const v1::TrialResult& result = sent.back().result();
  EXPECT_EQ(result.state(), v1::Trial::FAILED);
  EXPECT_THAT(result.error(), HasSubstr("trial_timeout of 300ms"));
}

// 100 MB of metric lines: 64 MiB parsed, the rest drained; the worker holds no more than a line.
TEST_F(CommandProcessTest, AFloodOfOutputIsBoundedAndTheTrialStillEnds) {
  const std::optional<double> before = ResetPeakRssWithinTrial();
  CommandTrialOutcome outcome = Run(Script(R"(
echo accuracy=0.5
yes loss=0.25 | head -c 100000000
echo
echo accuracy=0.9)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.metrics.at("accuracy"), 0.5);  // The last line was past the limit.
  EXPECT_EQ(outcome.metrics.at("loss"), 0.25);
  if (before) {
    EXPECT_LT(*PeakRssBytes() - *before, 32e6);
  }
}

TEST_F(CommandProcessTest, ATenMegabyteLineIsSkipped) {
  const std::optional<double> before = ResetPeakRssWithinTrial();
  CommandTrialOutcome outcome = Run(Script(R"(
printf accuracy=0.1
head -c 10000000 /dev/zero | tr '\0' x
echo
echo accuracy=0.75)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.metrics.at("accuracy"), 0.75);
  if (before) {
    EXPECT_LT(*PeakRssBytes() - *before, 16e6);
  }
}

// The grandchild outlives its parent, ignores SIGTERM and burns CPU until it is done: re-parented
// to the trial's supervisor (a subreaper) and reaped there, its CPU time counts.
TEST_F(CommandProcessTest, CountsTheCpuTimeOfAnOrphanedGrandchild) {
  CommandTrialOutcome outcome = Run(Script(R"(
trap '' TERM
sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; times > $DIR/times.txt' &
echo accuracy=1)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  // times: "0m0.31s 0m0.01s" (the shell's user and system time) on its first line.
  std::vector<std::string> fields = absl::StrSplit(Read("times.txt"), absl::ByAnyChar(" \n"));
  ASSERT_GE(fields.size(), 2u) << Read("times.txt");
  double burnt = 0;
  for (int i = 0; i < 2; ++i) {
    double minutes = 0, seconds = 0;
    ASSERT_EQ(std::sscanf(fields[i].c_str(), "%lfm%lfs", &minutes, &seconds), 2) << fields[i];
    burnt += minutes * 60 + seconds;
  }
  ASSERT_GT(burnt, 0.05);
  EXPECT_GE(outcome.usage->cpu_seconds, burnt - 0.02);
}

TEST_F(CommandProcessTest, CountsThePeakMemoryOfTheTree) {
  CommandTrialOutcome outcome = Run(Script(R"(
head -c 100000000 /dev/zero | tail -c 100000000 > /dev/null
echo accuracy=1)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_GT(outcome.usage->peak_rss_bytes, 90e6);
  EXPECT_LT(outcome.usage->peak_rss_bytes, 1e9);
}

// A child that moves to a process group of its own (setpgid(0, 0), as a shell with job control
// does) still ends with its trial, and is reaped: no process of that group is left, not even a
// zombie.
TEST_F(CommandProcessTest, AChildInAGroupOfItsOwnEndsWithItsTrial) {
  Script(absl::StrCat(RecordIds("$DIR/sleeper.ids"), "\nexec sleep 1000"), "sleeper");
  CommandTrialOutcome outcome = Run(Script(R"(
echo main=$$
perl -e 'setpgrp(0, 0) or die "setpgrp: $!"; exec @ARGV or die "exec: $!"' $DIR/sleeper.sh &
while [ ! -e $DIR/sleeper.ids ]; do sleep 0.01; done
echo accuracy=1)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  const Ids sleeper = ParseIds(Read("sleeper.ids"));
  EXPECT_EQ(sleeper.pgrp, sleeper.pid);  // It had left the main process's group.
  EXPECT_NE(sleeper.pgrp, outcome.metrics.at("main"));
  EXPECT_EQ(StateOf(sleeper.pid), "gone");
  EXPECT_NE(kill(-sleeper.pgrp, 0), 0);
  EXPECT_TRUE(std::filesystem::is_empty(options_.workdir_root));
}

// A daemon: a child in a new session (setsid) forks a grandchild that ignores SIGTERM and
// exits, orphaning it. Cancelling the trial kills the grandchild and the children it keeps
// starting after the grace period, and reaps them all.
TEST_F(CommandProcessTest, ADoubleForkedDaemonInANewSessionEndsWhenTheTrialIsCancelled) {
  options_.grace_period = absl::Milliseconds(300);
  Script(absl::StrCat("trap '' TERM\n", RecordIds("$DIR/daemon.ids"),
                      "\nwhile :; do sleep 0.05; done"),
         "daemon");
  Script("$DIR/daemon.sh &\nexit 0", "daemon-parent");
  std::atomic<bool> cancelled = false;
  TrialContext context;
  context.cancelled = &cancelled;
  context.progress = [&](int64_t, double) { cancelled = true; };
  CommandTrialOutcome outcome = Run(Script(R"(
setsid $DIR/daemon-parent.sh &
wait
while [ ! -e $DIR/daemon.ids ]; do sleep 0.01; done
echo ready=1
while :; do sleep 0.05; done)"),
                                    MakeAssign("ready"), context);
  EXPECT_TRUE(absl::IsCancelled(outcome.status)) << outcome.status;
  const Ids daemon = ParseIds(Read("daemon.ids"));
  EXPECT_NE(daemon.session, getsid(0));  // It had left the worker's session.
  EXPECT_NE(daemon.pgrp, getpgrp());
  EXPECT_EQ(StateOf(daemon.pid), "gone");
  EXPECT_THAT(ProcessesInSession(daemon.session), ::testing::IsEmpty());
}

// When the tree's owner lets go of it (the worker stops, or leaves a trial it cannot finish),
// every process of the tree goes with it, in whatever session.
TEST_F(CommandProcessTest, DestroyingTheTreeKillsAndReapsEveryProcessOfIt) {
  Script(absl::StrCat(RecordIds("$DIR/daemon.ids"), "\nexec sleep 1000"), "daemon");
  const RegisteredCommand main = Script("setsid $DIR/daemon.sh &\nexec sleep 1000");
  absl::StatusOr<std::unique_ptr<ProcessTree>> tree =
      ProcessTree::Start({.argv = {main.path}, .env = {"PATH=/usr/bin:/bin"}, .workdir = dir_});
  ASSERT_TRUE(tree.ok()) << tree.status();
  const pid_t main_pid = (*tree)->pid();
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_ + "/daemon.ids"); }));
  const Ids daemon = ParseIds(Read("daemon.ids"));
  ASSERT_NE(StateOf(daemon.pid), "gone");
  tree->reset();
  EXPECT_EQ(StateOf(main_pid), "gone");
  EXPECT_EQ(StateOf(daemon.pid), "gone");
  EXPECT_THAT(ProcessesInSession(daemon.session), ::testing::IsEmpty());
}

// Two trials at once, each with a daemon in a session of its own: ending one trial leaves the
// other's processes running, untouched, until that trial ends too.
TEST_F(CommandProcessTest, EndingOneTrialLeavesAConcurrentTrialsProcessesRunning) {
  options_.grace_period = absl::Milliseconds(300);
  Script(absl::StrCat(RecordIds("$DIR/daemon-$DHPT_TRIAL_ID.ids"), "\nexec sleep 1000"),
         "daemon");
  const RegisteredCommand command = Script(R"(
setsid $DIR/daemon.sh &
while [ ! -e $DIR/daemon-$DHPT_TRIAL_ID.ids ]; do sleep 0.01; done
echo ready=1
while :; do sleep 0.05; done)");
  struct Trial {
    std::atomic<bool> cancelled = false;
    std::atomic<bool> ready = false;
    CommandTrialOutcome outcome;
    std::thread thread;
  };
  Trial trials[2];
  for (int i = 0; i < 2; ++i) {
    Trial& trial = trials[i];
    v1::Assign assign = MakeAssign("ready");
    assign.set_trial_id(i + 1);
    trial.thread = std::thread([this, &trial, command, assign] {
      TrialContext context;
      context.cancelled = &trial.cancelled;
      context.progress = [&trial](int64_t, double) { trial.ready = true; };
      trial.outcome = RunCommandTrial(command, options_, assign, context);
    });
  }
  const bool both_ready = Eventually([&] { return trials[0].ready && trials[1].ready; });
  if (!both_ready) {
    for (Trial& trial : trials) trial.cancelled = true;
  }
  ASSERT_TRUE(both_ready) << "the trials never started their daemons";
  const Ids first = ParseIds(Read("daemon-1.ids"));
  const Ids second = ParseIds(Read("daemon-2.ids"));
  trials[0].cancelled = true;
  trials[0].thread.join();
  EXPECT_TRUE(absl::IsCancelled(trials[0].outcome.status)) << trials[0].outcome.status;
  EXPECT_EQ(StateOf(first.pid), "gone");
  const std::string other = StateOf(second.pid);
  EXPECT_TRUE(other != "gone" && other != "Z") << "the other trial's daemon: " << other;
  EXPECT_FALSE(trials[1].cancelled);
  trials[1].cancelled = true;
  trials[1].thread.join();
  EXPECT_TRUE(absl::IsCancelled(trials[1].outcome.status)) << trials[1].outcome.status;
  EXPECT_EQ(StateOf(second.pid), "gone");
}

// A program that makes parts of its working directory unreadable or unwritable (run as root,
// that changes nothing: ctest also runs this test as an unprivileged user) still has the
// directory removed; a symlink out of it is removed, never followed.
TEST_F(CommandProcessTest, TheWorkingDirectoryGoesEvenWhenTheProgramLockedPartsOfIt) {
  const std::string outside = dir_ + "/outside";
  ASSERT_TRUE(std::filesystem::create_directory(outside));
  std::ofstream(outside + "/keep") << "mine";
  ASSERT_EQ(chmod(outside.c_str(), 0750), 0);
  CommandTrialOutcome outcome = Run(Script(R"(
mkdir -p locked/inner readonly
echo x > locked/inner/file
echo y > readonly/file
ln -s $DIR/outside locked/inner/link
ln -s $DIR/outside readonly/link
chmod 000 locked/inner
chmod 000 locked
chmod 500 readonly
echo accuracy=1)"),
                                    MakeAssign());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_TRUE(std::filesystem::is_empty(options_.workdir_root))
      << std::filesystem::directory_iterator(options_.workdir_root)->path();
  struct stat info {};
  ASSERT_EQ(stat(outside.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0750u);
  EXPECT_EQ(Read("outside/keep"), "mine");
}

}  // namespace
}  // namespace dhpt::worker
