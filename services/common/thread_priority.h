#pragma once

// CPU priority between a process's own threads. On Linux each thread has a nice value of its
// own, and any thread may lower its own priority (raise its nice value) without privilege, while
// raising it back needs CAP_SYS_NICE, which a container rarely has. So a service that wants some
// threads served first lowers the others: the scheduler's worker-stream threads yield the CPU to
// its user-call threads (study_service.h).

namespace dhpt {

// Linux's lowest priority: a nice value stops here, however many steps are asked for.
inline constexpr int kLowestThreadPriority = 19;

// Sets the calling thread's nice value to `steps` above the process's (at most
// kLowestThreadPriority) the first time it is called on a thread; later calls on that thread do
// nothing. 0 leaves the thread as it is. Returns false where the kernel refused (the thread
// keeps its priority: this is a preference, never a reason to fail).
bool LowerCallingThreadPriority(int steps);

// The calling thread's nice value (for tests and logs).
int CallingThreadNice();

}  // namespace dhpt
