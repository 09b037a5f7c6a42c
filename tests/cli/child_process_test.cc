#include "services/cli/child_process.h"

#include <sys/wait.h>

#include <gtest/gtest.h>

namespace dhpt::cli {
namespace {

TEST(ChildProcessTest, MeasuresCpuAndMemoryOfAChildThatWorks) {
  PeakRssSampler sampler(absl::Milliseconds(20));
  // About 0.3 s of CPU and a 64 MiB string held for a moment.
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(
      "busy",
      {"/usr/bin/python3", "-c",
       "import time\nx = 'a' * (64 << 20)\nend = time.process_time() + 0.3\n"
       "while time.process_time() < end: pass\ntime.sleep(0.1)"},
      -1, -1, &sampler);
  ASSERT_TRUE(child.ok()) << child.status();
  (*child)->Wait();
  ASSERT_TRUE(WIFEXITED((*child)->wait_status()));
  EXPECT_EQ(WEXITSTATUS((*child)->wait_status()), 0);
  const v1::ProcessUsage usage = (*child)->Usage();
  EXPECT_EQ(usage.name(), "busy");
  EXPECT_GE(usage.cpu_seconds(), 0.25);
  EXPECT_GE(usage.peak_rss_bytes(), 64 << 20);
  EXPECT_GE(usage.wall_seconds(), usage.cpu_seconds() * 0.9);
  EXPECT_EQ((*child)->CpuSecondsSoFar(), 0);  // Gone.
}

TEST(ChildProcessTest, AMissingBinaryExitsWith127) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("missing", {"/nonexistent/dhpt-nothing"}, -1, -1);
  ASSERT_TRUE(child.ok());
  (*child)->Wait();
  EXPECT_EQ(WEXITSTATUS((*child)->wait_status()), 127);
}

TEST(ChildProcessTest, DestroyingARunningChildKillsIt) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Start("sleeper", {"/bin/sleep", "60"}, -1, -1);
  ASSERT_TRUE(child.ok());
  const pid_t pid = (*child)->pid();
  EXPECT_FALSE((*child)->Poll());
  child->reset();
  EXPECT_NE(kill(pid, 0), 0);  // Reaped: no such process.
}

}  // namespace
}  // namespace dhpt::cli
