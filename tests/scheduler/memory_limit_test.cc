// The container's memory limit as the scheduler reads it at start (--max_memory_bytes=-1), from
// cgroup files laid out in a temporary directory as cgroup v2 and v1 mount them.

#include "services/scheduler/memory_limit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(MemoryLimitTest, ReadsCgroupV2ThenV1AndTakesUnlimitedAsNone) {
  testing::TempDirectory root;
  EXPECT_EQ(CgroupMemoryLimit(root.path()), std::nullopt);  // No cgroup files.
  Write(root.path() + "/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1: none.
  EXPECT_EQ(CgroupMemoryLimit(root.path()), std::nullopt);
  Write(root.path() + "/memory/memory.limit_in_bytes", "268435456\n");
  EXPECT_EQ(CgroupMemoryLimit(root.path()), 268435456);
  // v2 says none: a hybrid mount's v1 limit still counts.
  Write(root.path() + "/memory.max", "max\n");
  EXPECT_EQ(CgroupMemoryLimit(root.path()), 268435456);
  Write(root.path() + "/memory.max", "536870912\n");
  EXPECT_EQ(CgroupMemoryLimit(root.path()), 536870912);
}

TEST(MemoryLimitTest, ResidentBytesAreThisProcesses) {
  const int64_t before = ResidentBytes();
  EXPECT_GT(before, 1 << 20);
  std::vector<char> touched(64 << 20, 1);  // Written, so resident.
  EXPECT_GT(ResidentBytes(), before + (32 << 20));
  EXPECT_EQ(touched[12345], 1);
}

}  // namespace
}  // namespace dhpt::scheduler
