#pragma once

// A worker process's own directory in the --command_workdir (ROOT/worker-XXXXXX), and the
// removal of those that earlier workers left when they were killed (SIGKILL, the OOM killer, a
// power cut): such a worker never got to remove its own.
//
// Each directory holds a marker, kWorkerMarkerName, that its worker made, wrote (pid, boot id,
// start time) and holds a write lock on for as long as the process lives; the kernel drops the
// lock when the process ends, however it ends, in whatever pid namespace it ran. A later worker
// removes a directory only when it is ours for sure and its worker has ended for sure: a real
// directory (not a symlink) of this user named worker-XXXXXX, holding a marker of this user in
// our format whose lock it can take, and whose pid does not run with the same start time on the
// same boot. Anything else (the user's files, a directory without a marker, a live worker's) is
// never touched.

#include <string>

#include "absl/status/statusor.h"

namespace dhpt::worker {

inline constexpr char kWorkerMarkerName[] = ".dhpt-worker";

// ROOT/worker-XXXXXX (mkdtemp, mode 0700) in the prepared --command_workdir `root`, with its
// locked marker: this worker process's own directory, so that workers sharing one root never
// touch each other's trials, nor what else the root holds.
absl::StatusOr<std::string> MakeWorkerWorkdir(const std::string& root);

// Removes from `root` the worker directories whose worker has ended for sure (above), each
// with a log line naming it and the process that left it; returns how many. Call it before
// MakeWorkerWorkdir: a process that closes a marker it looked at drops its own lock on it.
int RemoveEndedWorkersWorkdirs(const std::string& root);

// At this worker's exit: its own directory, with the marker, if nothing else is in it. One that
// still holds something (a trial directory that could not be removed) stays with its marker,
// for a later worker to remove once this process has ended.
void RemoveOwnWorkdir(const std::string& own);

}  // namespace dhpt::worker
