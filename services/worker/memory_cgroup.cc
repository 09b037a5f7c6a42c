#include "services/worker/memory_cgroup.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dhpt::worker {
namespace {

// Cgroup files are a few hundred bytes: no file larger than this is read.
constexpr std::streamsize kMaxCgroupFileBytes = 64 << 10;
// v1 reports "no limit" as a page-rounded LONG_MAX; anything this large is no limit.
constexpr int64_t kUnlimitedAbove = int64_t{1} << 60;

std::optional<std::string> ReadCgroupFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return std::nullopt;
  std::string text(kMaxCgroupFileBytes, '\0');
  file.read(text.data(), kMaxCgroupFileBytes);
  text.resize(static_cast<size_t>(file.gcount()));
  return text;
}

}  // namespace

std::optional<std::string> MemoryCgroupDir(absl::string_view proc_self_cgroup,
                                           absl::string_view root) {
  return CgroupDir(proc_self_cgroup, root, "memory");
}

std::optional<std::string> CgroupDir(absl::string_view proc_self_cgroup, absl::string_view root,
                                     absl::string_view wanted) {
  std::optional<std::string> v2;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    // hierarchy-id:controllers:path; the path may itself hold ':'.
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    if (parts[1].empty() && parts[0] == "0") {
      v2 = absl::StrCat(root, parts[2] == "/" ? "" : parts[2]);
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      if (controller == wanted) {
        return absl::StrCat(root, "/", wanted, parts[2] == "/" ? "" : parts[2]);
      }
    }
  }
  return v2;
}

std::optional<int64_t> ParseOomKills(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&line, "oom_kill ")) continue;
    int64_t count = 0;
    if (absl::SimpleAtoi(line, &count)) return count;
  }
  return std::nullopt;
}

std::optional<double> ParseCpuQuotaCores(absl::string_view quota_or_cpu_max,
                                         absl::string_view v1_period) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(quota_or_cpu_max), ' ', absl::SkipEmpty());
  if (fields.size() == 1) fields.push_back(absl::StripAsciiWhitespace(v1_period));
  int64_t quota = 0;
  int64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &quota) ||
      !absl::SimpleAtoi(fields[1], &period) || quota <= 0 || period <= 0) {
    return std::nullopt;  // "max", v1's -1, or not a quota.
  }
  return static_cast<double>(quota) / static_cast<double>(period);
}

std::optional<double> CpuQuotaCoresOfThisProcess() {
  std::optional<std::string> text = ReadCgroupFile("/proc/self/cgroup");
  if (!text) return std::nullopt;
  const std::optional<std::string> dir = CgroupDir(*text, "/sys/fs/cgroup", "cpu");
  if (!dir) return std::nullopt;
  std::optional<double> cores;
  // From the process's group up to the hierarchy's root: the tightest quota binds.
  for (std::string at = *dir; at.size() >= std::string("/sys/fs/cgroup").size();
       at = at.substr(0, at.rfind('/'))) {
    std::optional<double> here;
    if (std::optional<std::string> max = ReadCgroupFile(at + "/cpu.max")) {
      here = ParseCpuQuotaCores(*max, "");
    } else if (std::optional<std::string> quota = ReadCgroupFile(at + "/cpu.cfs_quota_us")) {
      here = ParseCpuQuotaCores(*quota, ReadCgroupFile(at + "/cpu.cfs_period_us").value_or(""));
    }
    if (here && (!cores || *here < *cores)) cores = here;
  }
  return cores;
}

MemoryCgroup MemoryCgroup::OfThisProcess() {
  std::optional<std::string> text = ReadCgroupFile("/proc/self/cgroup");
  if (!text) return MemoryCgroup(std::nullopt);
  std::optional<std::string> dir = MemoryCgroupDir(*text, "/sys/fs/cgroup");
  // A hybrid host mounts v2 at /sys/fs/cgroup/unified.
  if (dir && !ReadCgroupFile(*dir + "/memory.events") && !ReadCgroupFile(*dir + "/memory.oom_control")) {
    std::optional<std::string> unified = MemoryCgroupDir(*text, "/sys/fs/cgroup/unified");
    if (unified && ReadCgroupFile(*unified + "/memory.events")) dir = unified;
  }
  return MemoryCgroup(dir);
}

std::optional<int64_t> MemoryCgroup::OomKills() const {
  if (!dir_) return std::nullopt;
  for (const char* name : {"/memory.oom_control", "/memory.events"}) {
    if (std::optional<std::string> text = ReadCgroupFile(*dir_ + name)) return ParseOomKills(*text);
  }
  return std::nullopt;
}

std::optional<int64_t> MemoryCgroup::Limit() const {
  if (!dir_) return std::nullopt;
  for (const char* name : {"/memory.limit_in_bytes", "/memory.max"}) {
    std::optional<std::string> text = ReadCgroupFile(*dir_ + name);
    if (!text) continue;
    int64_t bytes = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &bytes) || bytes >= kUnlimitedAbove) {
      return std::nullopt;  // "max", or v1's no-limit.
    }
    return bytes;
  }
  return std::nullopt;
}

std::string OomKillProblem(std::optional<int64_t> kills_before, std::optional<int64_t> kills_after,
                           std::optional<int64_t> limit_bytes, absl::string_view node_name) {
  if (!kills_before || !kills_after || *kills_after <= *kills_before) return "";
  std::string problem =
      absl::StrCat("was killed by the kernel's OOM killer: out of memory on node ", node_name);
  if (limit_bytes) absl::StrAppend(&problem, " (its memory limit is ", *limit_bytes >> 20, " MiB)");
  return problem;
}

}  // namespace dhpt::worker
