#include "services/worker/resource_meter.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

namespace dhpt::worker {
namespace {

// This process's CPU time, as the kernel counts it: a clock of the test's own, not the meter's.
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Busy work until this process has used `seconds` more CPU time.
void Spin(double seconds) {
  volatile double sink = 0;
  const double until = ProcessCpuSeconds() + seconds;
  while (ProcessCpuSeconds() < until) {
    for (int i = 0; i < 10000; ++i) sink = sink + i * 0.5;
  }
}

// What the meter reports lies between what the test's own clocks saw inside and outside its
// life, for two amounts of work: a meter that reported constants could match one, not both.
TEST(ResourceMeterTest, MeasuresCpuBusyWork) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  // getrusage (the meter's source) may count in scheduler ticks: up to a few ms either way.
  constexpr double kTick = 0.01;
  for (double work : {0.05, 0.25}) {
    SCOPED_TRACE(work);
    const double cpu_before = ProcessCpuSeconds();
    const Clock::time_point wall_before = Clock::now();
    ResourceMeter meter;
    const double cpu_started = ProcessCpuSeconds();
    const Clock::time_point wall_started = Clock::now();
    Spin(work);
    const double cpu_done = ProcessCpuSeconds();
    const Clock::time_point wall_done = Clock::now();
    const ResourceUsage usage = meter.Stop();
    const double cpu_after = ProcessCpuSeconds();
    const Clock::time_point wall_after = Clock::now();
    EXPECT_GE(usage.cpu_seconds, cpu_done - cpu_started - kTick);
    EXPECT_LE(usage.cpu_seconds, cpu_after - cpu_before + kTick);
    EXPECT_GE(usage.wall_seconds, seconds(wall_done - wall_started));
    EXPECT_LE(usage.wall_seconds, seconds(wall_after - wall_before));
    EXPECT_DOUBLE_EQ(usage.cpu_utilization, usage.cpu_seconds / usage.wall_seconds);
  }
}

TEST(ResourceMeterTest, PeakRssSeesAnAllocationMadeDuringTheTrial) {
  ResourceMeter before;
  const double baseline = before.Stop().peak_rss_bytes.value_or(0);
  ResourceMeter meter;
  std::vector<char> block(64 << 20);
  std::memset(block.data(), 1, block.size());
  ResourceUsage usage = meter.Stop();
  ASSERT_TRUE(usage.peak_rss_bytes.has_value()) << "clear_refs not writable here";
  EXPECT_GE(*usage.peak_rss_bytes, baseline + (60 << 20));
  block.clear();
  block.shrink_to_fit();
  // After the reset, a new measurement no longer carries the old peak.
  ResourceMeter after;
  EXPECT_LT(*after.Stop().peak_rss_bytes, *usage.peak_rss_bytes - (32 << 20));
}

// An inference measurement resets the mark mid-trial; the trial still reports its training peak.
TEST(ResourceMeterTest, AResetWithinTheTrialKeepsTheTrialsPeak) {
  ResourceMeter meter;
  const double baseline = PeakRssBytes().value_or(0);
  {
    std::vector<char> block(64 << 20);
    std::memset(block.data(), 1, block.size());
  }
  const std::optional<double> after_reset = ResetPeakRssWithinTrial();
  ASSERT_TRUE(after_reset.has_value()) << "clear_refs not writable here";
  EXPECT_LT(*after_reset, baseline + (32 << 20));  // The block is gone from the new mark.
  EXPECT_GE(*meter.Stop().peak_rss_bytes, baseline + (60 << 20));
  // A new trial starts afresh.
  ResourceMeter next;
  EXPECT_LT(*next.Stop().peak_rss_bytes, baseline + (32 << 20));
}

// The heartbeat's utilisation counts a trial's processes while they run (a COMMAND trial: the
// worker's child, the supervisor, and its child, the command), then once when they are reaped.
// The grandchild here reports when it has used kWork of CPU and waits to be killed; both are
// non-dumpable, as a supervisor is.
TEST(WorkerUtilisationMeterTest, CountsALiveProcessTreeWhileItRunsAndOnceAfter) {
  constexpr double kWork = 0.5;
  constexpr double kTicks = 0.05;  // /proc counts in 10 ms ticks, a few per process.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  WorkerUtilisationMeter meter;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As a COMMAND trial's supervisor, forked from a worker that made itself non-dumpable
    // (HideFromCommands): its /proc entries are root's, their times still readable.
    prctl(PR_SET_DUMPABLE, 0);
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      Spin(kWork);
      const pid_t self = getpid();
      (void)!write(ready[1], &self, sizeof self);
      while (true) pause();
    }
    int status = 0;
    waitpid(grandchild, &status, 0);
    _exit(0);
  }
  pid_t grandchild = 0;
  // Blocks until the grandchild has done its work.
  ASSERT_EQ(read(ready[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  const WorkerUtilisationSample running = meter.Sample();
  kill(grandchild, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const WorkerUtilisationSample reaped = meter.Sample();
  close(ready[0]);
  close(ready[1]);
  const auto cpu = [](const WorkerUtilisationSample& s) {
    return s.cpu_cores * std::chrono::duration<double>(s.interval).count();
  };
  // Live: counted (before, only once reaped: this test's own few milliseconds).
  EXPECT_GE(cpu(running), kWork - kTicks);
  // Reaped: moved from the live processes to the reaped ones, not counted a second time.
  EXPECT_LT(cpu(reaped), kTicks + 0.05);
}

}  // namespace
}  // namespace dhpt::worker
