#include "services/common/thread_priority.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace dhpt {
namespace {

// PRIO_PROCESS with a thread id names that one thread on Linux (setpriority(2), "BUGS": the
// nice value is a per-thread attribute).
id_t CallingThreadId() { return static_cast<id_t>(syscall(SYS_gettid)); }

}  // namespace

bool LowerCallingThreadPriority(int steps) {
  thread_local bool lowered = false;
  if (lowered || steps <= 0) return true;
  lowered = true;
  // The process's nice value is the main thread's, whose thread id is the process id.
  errno = 0;
  const int process_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(getpid()));
  if (errno != 0) return false;
  const int nice = std::min(process_nice + steps, kLowestThreadPriority);
  return setpriority(PRIO_PROCESS, CallingThreadId(), nice) == 0;
}

int CallingThreadNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, CallingThreadId());
}

}  // namespace dhpt
