#include "services/worker/worker_workdir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/common/logging.h"
#include "services/worker/command_launch.h"

namespace dhpt::worker {
namespace {

constexpr char kWorkerPrefix[] = "worker-";
constexpr size_t kWorkerSuffixLength = 6;  // mkdtemp's XXXXXX.

std::string ReadText(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

std::string BootId() {
  return std::string(absl::StripAsciiWhitespace(ReadText("/proc/sys/kernel/random/boot_id")));
}

// The process's start time in clock ticks after boot (/proc/PID/stat, field 22), or nullopt
// when no such process runs.
std::optional<uint64_t> StartTime(const std::string& pid) {
  const std::string stat = ReadText(absl::StrCat("/proc/", pid, "/stat"));
  const size_t end = stat.rfind(')');  // The name in parentheses may hold spaces.
  if (end == std::string::npos) return std::nullopt;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(end + 2), ' ', absl::SkipEmpty());
  uint64_t ticks = 0;
  // Field 22 is the 20th after the name (fields 3 on).
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &ticks)) return std::nullopt;
  return ticks;
}

bool Lock(int fd, bool wait) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  return fcntl(fd, wait ? F_SETLKW : F_SETLK, &lock) == 0;
}

// What a marker says: pid=, boot_id=, start_time= lines.
struct Marker {
  std::string pid;
  std::string boot_id;
  uint64_t start_time = 0;
};

std::optional<Marker> ParseMarker(const std::string& text) {
  Marker marker;
  bool start_time = false;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> field = absl::StrSplit(line, '=');
    if (field.first == "pid") marker.pid = std::string(field.second);
    if (field.first == "boot_id") marker.boot_id = std::string(field.second);
    if (field.first == "start_time") start_time = absl::SimpleAtoi(field.second, &marker.start_time);
  }
  int pid = 0;
  if (!absl::SimpleAtoi(marker.pid, &pid) || pid <= 0 || marker.boot_id.empty() || !start_time) {
    return std::nullopt;
  }
  return marker;
}

bool IsWorkerName(absl::string_view name) {
  return absl::ConsumePrefix(&name, kWorkerPrefix) && name.size() == kWorkerSuffixLength &&
         name.find('/') == absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::string> MakeWorkerWorkdir(const std::string& root) {
  std::string own = absl::StrCat(root, "/", kWorkerPrefix, "XXXXXX");
  if (mkdtemp(own.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a directory in ", root, ": ", std::strerror(errno)));
  }
  const std::string path = absl::StrCat(own, "/", kWorkerMarkerName);
  // Kept open, and so locked, for the life of the process: never closed on purpose. Not
  // inherited by the trials' programs (O_CLOEXEC), nor by a fork (a POSIX lock never is).
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  // Waits, briefly, for a starting worker that looked at the empty marker meanwhile.
  if (fd < 0 || !Lock(fd, /*wait=*/true)) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    unlink(path.c_str());
    rmdir(own.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot make and lock ", path, ": ", why));
  }
  const std::string self = std::to_string(getpid());
  const std::string text = absl::StrCat("pid=", self, "\nboot_id=", BootId(),
                                        "\nstart_time=", StartTime(self).value_or(0), "\n");
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    DHPT_LOG_WARNING("cannot write %s: %s; a later worker will not remove %s if this one is killed",
                     path, std::strerror(errno), own);
  }
  return own;
}

int RemoveEndedWorkersWorkdirs(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return 0;
  const std::string boot_id = BootId();
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    if (!IsWorkerName(entry->d_name)) continue;
    const std::string path = absl::StrCat(root, "/", entry->d_name);
    struct stat info {};
    if (lstat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != geteuid()) {
      continue;
    }
    const std::string marker_path = absl::StrCat(path, "/", kWorkerMarkerName);
    const int fd = open(marker_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;  // No marker: not one of ours, or one from before markers.
    struct stat marker_info {};
    // The lock is free: the process that held it has ended.
    if (fstat(fd, &marker_info) == 0 && S_ISREG(marker_info.st_mode) &&
        marker_info.st_uid == geteuid() && Lock(fd, /*wait=*/false)) {
      const std::optional<Marker> marker = ParseMarker(ReadText(marker_path));
      // A second look where the pid means something (the same boot): a process of that pid and
      // start time still running keeps its directory, whatever the lock said (a filesystem that
      // does not share locks).
      const bool runs = marker && marker->boot_id == boot_id &&
                        StartTime(marker->pid) == std::optional<uint64_t>(marker->start_time);
      if (marker && !runs) {
        DHPT_LOG_INFO("removing %s: its worker (pid %s%s) has ended without removing it", path,
                      marker->pid, marker->boot_id == boot_id ? "" : ", before the last boot");
        RemoveTrialWorkdir(path);
        ++removed;
      }
    }
    close(fd);  // Drops the lock taken, if any.
  }
  closedir(dir);
  return removed;
}

void RemoveOwnWorkdir(const std::string& own) {
  DIR* dir = opendir(own.c_str());
  if (dir == nullptr) return;
  bool only_marker = true;
  while (const dirent* entry = readdir(dir)) {
    const absl::string_view name = entry->d_name;
    if (name != "." && name != ".." && name != kWorkerMarkerName) only_marker = false;
  }
  closedir(dir);
  if (!only_marker) return;
  unlink(absl::StrCat(own, "/", kWorkerMarkerName).c_str());
  rmdir(own.c_str());
}

}  // namespace dhpt::worker
