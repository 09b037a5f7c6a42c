#include "services/worker/module_loader.h"

#include <dlfcn.h>  // dlinfo, Dl_serinfo: _GNU_SOURCE, which g++ and clang++ define
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dhpt::worker {
namespace {

std::string ExecutableDirectory() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return ".";
  const std::string executable(path, static_cast<size_t>(length));
  const size_t slash = executable.rfind('/');
  return slash == std::string::npos ? "." : executable.substr(0, slash);
}

// What the probe process writes back: fixed size, so one write and no allocation in between.
struct ProbeReply {
  int loaded = 0;
  std::array<int64_t, 4> values{};
  char error[1024] = {};  // Within PIPE_BUF (4096): the reply is written at once.
};

// In the forked child: load the library, ask it, write the answer, exit without running the
// library's (or anyone's) static destructors.
[[noreturn]] void RunProbe(const ModuleSpec& spec, const std::string& path,
                           void (*ask)(const void*, std::array<int64_t, 4>&), int fd) {
  ProbeReply reply;
  if (absl::StatusOr<const void*> table = LoadModuleTable(spec, path); table.ok()) {
    ask(*table, reply.values);
    reply.loaded = 1;
  } else {
    std::snprintf(reply.error, sizeof(reply.error), "%s",
                  std::string(table.status().message()).c_str());
  }
  const char* data = reinterpret_cast<const char*>(&reply);
  for (size_t written = 0; written < sizeof(reply);) {
    const ssize_t n = write(fd, data + written, sizeof(reply) - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  _exit(0);
}

// Reads the probe's reply until `deadline`; false when it ended or timed out without one.
bool ReadReply(int fd, absl::Time deadline, ProbeReply& reply) {
  char* data = reinterpret_cast<char*>(&reply);
  size_t got = 0;
  while (got < sizeof(reply)) {
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return false;
    pollfd poll_fd{.fd = fd, .events = POLLIN};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<int64_t>(wait_ms, INT_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, data + got, sizeof(reply) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// Why the library cannot be used, then what to do, said once: every caller passes this on as
// it is (the start-up checks add only what the worker would have announced).
absl::Status Unloadable(const ModuleSpec& spec, absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot load the ", spec.what, " library (", why, "): install ", spec.file,
      " beside this worker's binary or in ../lib/dhpt/, or set ", spec.env, " to its path"));
}

// The file dlopen would open for `name`, a name without a slash: the first directory of the
// search path it walks (LD_LIBRARY_PATH, this executable's RUNPATH, the system directories) that
// holds something of that name. Empty when none does: dlopen then asks its cache, or reports
// the name missing in its words.
std::string ResolveOnLibraryPath(const std::string& name) {
  void* self = dlopen(nullptr, RTLD_LAZY);
  Dl_serinfo size{};
  if (self == nullptr || dlinfo(self, RTLD_DI_SERINFOSIZE, &size) != 0) return "";
  std::vector<char> buffer(size.dls_size);
  auto* paths = reinterpret_cast<Dl_serinfo*>(buffer.data());
  *paths = size;  // RTLD_DI_SERINFO fills the buffer that RTLD_DI_SERINFOSIZE sized.
  if (dlinfo(self, RTLD_DI_SERINFO, paths) != 0) return "";
  for (unsigned i = 0; i < paths->dls_cnt; ++i) {
    const std::string directory = paths->dls_serpath[i].dls_name;
    const std::string candidate = absl::StrCat(directory.empty() ? "." : directory, "/", name);
    if (access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return "";
}

// dlopen opens what it is given: a FIFO blocks it (and the worker's start-up probe, silently,
// until the probe's timeout) and a directory or device is no library either. A name without a
// slash is looked up on the library search path first, as dlopen does, and what it finds there
// is checked the same way (dlopen stops at the first entry of that name, whatever it is).
absl::Status CheckRegularFile(const ModuleSpec& spec, const std::string& path) {
  const std::string file = path.find('/') == std::string::npos ? ResolveOnLibraryPath(path) : path;
  struct stat info {};
  if (file.empty() || stat(file.c_str(), &info) != 0 || S_ISREG(info.st_mode)) {
    return absl::OkStatus();  // A missing file is dlopen's to report, in its words.
  }
  const char* kind = S_ISDIR(info.st_mode)    ? "a directory"
                     : S_ISFIFO(info.st_mode) ? "a FIFO"
                     : S_ISSOCK(info.st_mode) ? "a socket"
                     : S_ISCHR(info.st_mode)  ? "a character device"
                     : S_ISBLK(info.st_mode)  ? "a block device"
                                              : "not a regular file";
  const std::string found =
      file == path ? path : absl::StrCat(path, " (found on the library search path as ", file, ")");
  return Unloadable(spec, absl::StrCat(found, " is ", kind, ", not a library file"));
}

}  // namespace

std::string ModulePath(const ModuleSpec& spec) {
  if (const char* path = std::getenv(spec.env); path != nullptr && *path != '\0') return path;
  const std::string directory = ExecutableDirectory();
  const std::string beside = absl::StrCat(directory, "/", spec.file);
  const std::string installed = absl::StrCat(directory, "/../lib/dhpt/", spec.file);
  if (access(beside.c_str(), F_OK) != 0 && access(installed.c_str(), F_OK) == 0) return installed;
  return beside;
}

absl::StatusOr<const void*> LoadModuleTable(const ModuleSpec& spec, const std::string& path) {
  if (absl::Status file = CheckRegularFile(spec, path); !file.ok()) return file;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return Unloadable(spec, error != nullptr ? error : path);
  }
  auto* entry = reinterpret_cast<const void* (*)()>(dlsym(handle, spec.symbol));
  if (entry == nullptr) {
    return Unloadable(spec, absl::StrCat(path, " is not an ", spec.what, " library: it has no ",
                                         spec.symbol));
  }
  const void* table = entry();
  // Every table starts with its `int abi` (module_loader.h).
  const int abi = *static_cast<const int*>(table);
  if (abi != spec.abi) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load the ", spec.what, " library (", path,
        " was built for another version of this worker: interface ", abi, ", this worker needs ",
        spec.abi, "): install the library built with it"));
  }
  return table;
}

// glibc's fork keeps malloc and the loader usable in the child of a threaded process; the child
// only loads, asks, writes and exits.
ModuleProbe ProbeModule(const ModuleSpec& spec,
                        void (*ask)(const void* table, std::array<int64_t, 4>& values),
                        absl::Duration timeout) {
  ModuleProbe probe;
  const std::string path = ModulePath(spec);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    probe.error = absl::StrCat("cannot probe the ", spec.what, " library: pipe: ", std::strerror(errno));
    return probe;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    RunProbe(spec, path, ask, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    probe.error = absl::StrCat("cannot probe the ", spec.what, " library: fork: ", std::strerror(errno));
    close(fds[0]);
    return probe;
  }
  ProbeReply reply;
  const bool answered = ReadReply(fds[0], absl::Now() + timeout, reply);
  close(fds[0]);
  if (!answered) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!answered) {
    // SIGKILL is this timeout's (or the OOM killer's); any other signal is the file's doing.
    probe.unusable = WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL;
    probe.error = probe.unusable
                      ? std::string(Unloadable(spec, absl::StrCat("loading ", path,
                                                                  " killed the probe with signal ",
                                                                  WTERMSIG(status),
                                                                  ": a truncated file?"))
                                        .message())
                      : absl::StrCat("the ", spec.what, " library probe (", path,
                                     ") gave no answer in ", absl::FormatDuration(timeout));
    return probe;
  }
  if (reply.loaded == 0) {
    probe.unusable = true;
    probe.error = reply.error;
    return probe;
  }
  probe.loaded = true;
  probe.values = reply.values;
  return probe;
}

}  // namespace dhpt::worker
