#pragma once

// One COMMAND trial: the operator's registered program, run with the trial's parameters
// (command_launch.h) as a process tree of its own (process_tree.h), its stdout read as
// metrics (command_output.h) and its objective streamed as progress, until it exits, is
// cancelled or times out; then nothing of it is left running.

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/worker/command_registry.h"
#include "services/worker/model_trainer.h"
#include "services/worker/process_tree.h"

namespace dhpt::worker {

// How much of stderr a failed trial's message quotes, from its end.
inline constexpr size_t kStderrTailBytes = 1024;
// How often the output loop wakes without output: the bound on noticing a cancellation.
inline constexpr absl::Duration kCommandPollInterval = absl::Milliseconds(50);
// Read from one pipe per wake-up, so that a flood of output never delays a cancellation.
inline constexpr size_t kMaxReadPerWake = size_t{1} << 20;

struct CommandTrialOutcome {
  // OK: the program exited 0 and printed the objective. CANCELLED: `context.cancelled` was
  // set before it exited. Otherwise why the trial failed, ending with the tail of stderr.
  absl::Status status;
  // Every metric it printed, each at its last value (also when it failed).
  std::map<std::string, double> metrics;
  // The process tree's costs; absent when no process ran.
  std::optional<ProcessTreeUsage> usage;
  // It failed because the kernel's OOM killer ended a process of it (memory_cgroup.h).
  bool out_of_memory = false;
};

CommandTrialOutcome RunCommandTrial(const RegisteredCommand& command, const CommandOptions& options,
                                    const v1::Assign& assign, const TrialContext& context);

// The last `max_bytes` of `bytes` as text fit for an error message: valid UTF-8 starting on a
// character, control bytes other than newline and tab as '?', outer whitespace trimmed.
std::string PrintableTail(absl::string_view bytes, size_t max_bytes);

}  // namespace dhpt::worker
