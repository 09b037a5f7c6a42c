#include "services/worker/memory_cgroup.h"

#include "gtest/gtest.h"

namespace dhpt::worker {
namespace {

TEST(MemoryCgroupTest, FindsTheV1MemoryControllersGroup) {
  const char* text =
      "12:freezer:/dhpt-e1/n2\n"
      "4:memory:/dhpt-e1/n2\n"
      "3:cpu,cpuacct:/dhpt-e1/n2\n"
      "0::/user.slice\n";
  EXPECT_EQ(MemoryCgroupDir(text, "/sys/fs/cgroup"), "/sys/fs/cgroup/memory/dhpt-e1/n2");
}

TEST(MemoryCgroupTest, FallsBackToTheUnifiedHierarchy) {
  EXPECT_EQ(MemoryCgroupDir("0::/kubepods/pod1/c:1\n", "/sys/fs/cgroup"),
            "/sys/fs/cgroup/kubepods/pod1/c:1");
  EXPECT_EQ(MemoryCgroupDir("0::/\n", "/sys/fs/cgroup"), "/sys/fs/cgroup");
  EXPECT_EQ(MemoryCgroupDir("5:cpu:/a\n", "/sys/fs/cgroup"), std::nullopt);
}

// Issue 32, fifth round: the CPU quota a worker announces for the scheduler's speed prior.
TEST(MemoryCgroupTest, FindsTheCpuControllersGroupAndReadsItsQuota) {
  const char* text =
      "4:memory:/dhpt-e1/n2\n"
      "3:cpu,cpuacct:/dhpt-e1/n2\n";
  // Co-mounted controllers: /sys/fs/cgroup/cpu links to cpu,cpuacct.
  EXPECT_EQ(CgroupDir(text, "/sys/fs/cgroup", "cpu"), "/sys/fs/cgroup/cpu/dhpt-e1/n2");
  EXPECT_EQ(CgroupDir("0::/kubepods/pod1\n", "/sys/fs/cgroup", "cpu"),
            "/sys/fs/cgroup/kubepods/pod1");
  EXPECT_EQ(ParseCpuQuotaCores("20000\n", "100000\n"), 0.2);  // v1: a fifth of a core.
  EXPECT_EQ(ParseCpuQuotaCores("-1\n", "100000\n"), std::nullopt);  // v1: none.
  EXPECT_EQ(ParseCpuQuotaCores("150000 100000\n", ""), 1.5);  // v2: a pod's limit of 1500m.
  EXPECT_EQ(ParseCpuQuotaCores("max 100000\n", ""), std::nullopt);
  EXPECT_EQ(ParseCpuQuotaCores("", ""), std::nullopt);
  EXPECT_EQ(ParseCpuQuotaCores("20000", "0"), std::nullopt);
}

TEST(MemoryCgroupTest, ReadsTheOomKillCountOfEitherVersion) {
  EXPECT_EQ(ParseOomKills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);  // v1
  EXPECT_EQ(ParseOomKills("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 0\n"), 2);
  EXPECT_EQ(ParseOomKills("oom_kill_disable 0\nunder_oom 0\n"), std::nullopt);  // Old kernels.
}

TEST(MemoryCgroupTest, NamesTheNodeOnlyWhenTheCountGrew) {
  EXPECT_EQ(OomKillProblem(1, 2, int64_t{256} << 20, "n3"),
            "was killed by the kernel's OOM killer: out of memory on node n3 (its memory limit "
            "is 256 MiB)");
  EXPECT_EQ(OomKillProblem(0, 1, std::nullopt, "n3"),
            "was killed by the kernel's OOM killer: out of memory on node n3");
  EXPECT_EQ(OomKillProblem(2, 2, int64_t{256} << 20, "n3"), "");
  EXPECT_EQ(OomKillProblem(std::nullopt, 1, std::nullopt, "n3"), "");
}

TEST(MemoryCgroupTest, ThisProcessesGroupIsReadableOrUnknown) {
  // Whatever the machine: no crash, and a count (when known) is not negative.
  const MemoryCgroup cgroup = MemoryCgroup::OfThisProcess();
  if (std::optional<int64_t> kills = cgroup.OomKills()) {
    EXPECT_GE(*kills, 0);
  }
  if (std::optional<int64_t> limit = cgroup.Limit()) {
    EXPECT_GT(*limit, 0);
  }
}

}  // namespace
}  // namespace dhpt::worker
