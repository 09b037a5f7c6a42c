// COMMAND trials' process care: stopping whole process trees, bounded output, and what the
// tree costs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "absl/strings/numbers.h"
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
// to this (subreaper) process and reaped here, its CPU time counts.
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

}  // namespace
}  // namespace dhpt::worker
