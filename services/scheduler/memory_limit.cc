#include "services/scheduler/memory_limit.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace dhpt::scheduler {
namespace {

// Above this a limit is "none": cgroup v1 writes an unlimited group as INT64_MAX rounded down
// to a page, and no machine has an exbibyte.
constexpr int64_t kNoLimitAbove = int64_t{1} << 60;

std::optional<int64_t> ReadLimit(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  if (!file || !std::getline(file, text)) return std::nullopt;
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes)) return std::nullopt;  // "max"
  if (bytes <= 0 || bytes >= kNoLimitAbove) return std::nullopt;
  return bytes;
}

// The v2 cgroup this process is in ("0::/PATH" in /proc/self/cgroup), or "" if none.
std::string OwnCgroupV2() {
  std::ifstream file("/proc/self/cgroup");
  for (std::string line; std::getline(file, line);) {
    if (absl::StartsWith(line, "0::")) return line.substr(3);
  }
  return "";
}

}  // namespace

std::optional<int64_t> CgroupMemoryLimit(const std::string& root) {
  if (const std::string own = OwnCgroupV2(); !own.empty() && own != "/") {
    if (std::optional<int64_t> limit = ReadLimit(absl::StrCat(root, own, "/memory.max"))) {
      return limit;
    }
  }
  if (std::optional<int64_t> limit = ReadLimit(root + "/memory.max")) return limit;
  return ReadLimit(root + "/memory/memory.limit_in_bytes");
}

int64_t ResidentBytes() {
  std::ifstream file("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(file >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace dhpt::scheduler
