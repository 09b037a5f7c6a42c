#pragma once

// The scheduler's memory cap (--max_memory_bytes): what the process holds now, and the limit
// of the container it runs in, read from Linux's cgroup files. A scheduler near its cap sheds
// its caches and then refuses new work (SchedulerCore::CheckMemoryLocked) before the kernel's
// OOM killer ends it, and with it every stream and suggestion in flight.

#include <cstdint>
#include <optional>
#include <string>

namespace dhpt::scheduler {

// The memory limit of this process's cgroup: v2's memory.max (of its own cgroup, else the
// namespace's root, as a container sees it), else v1's memory.limit_in_bytes; nullopt when
// none is set ("max", or v1's page-rounded INT64_MAX) or the files are not there. `root` is
// where cgroupfs is mounted.
std::optional<int64_t> CgroupMemoryLimit(const std::string& root = "/sys/fs/cgroup");

// This process's resident memory in bytes (/proc/self/statm); 0 when it cannot be read.
int64_t ResidentBytes();

}  // namespace dhpt::scheduler
