#include "services/worker/command_trial.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "services/common/logging.h"
#include "services/common/model_catalog.h"
#include "services/worker/command_launch.h"
#include "services/worker/command_output.h"
#include "services/worker/memory_cgroup.h"

namespace dhpt::worker {
namespace {

// The length of the valid UTF-8 sequence at the start of `s`, 0 when there is none.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // The second byte's range, per RFC 3629.
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;  // No surrogates.
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

// Reads what the trial's pipes hold, waiting up to `timeout` for something to arrive.
class OutputPump {
 public:
  OutputPump(const ProcessTree& tree, CommandOutputParser& parser, const TrialContext& context)
      : fds_{tree.stdout_fd(), tree.stderr_fd()}, parser_(parser), context_(context) {}

  // `wake_fd` (-1: none) only ends the wait: its reader is the caller's.
  void Pump(absl::Duration timeout, int wake_fd) {
    pollfd polled[3];
    int count = 0;
    for (int fd : fds_) {
      if (fd >= 0) polled[count++] = {.fd = fd, .events = POLLIN, .revents = 0};
    }
    const int outputs = count;
    if (wake_fd >= 0) polled[count++] = {.fd = wake_fd, .events = POLLIN, .revents = 0};
    if (poll(polled, static_cast<nfds_t>(count),
             static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
      return;
    }
    for (int i = 0; i < outputs; ++i) {
      if (polled[i].revents != 0) Drain(polled[i].fd, kMaxReadPerWake);
    }
  }
  // What is left once the tree is gone (bounded: a process the supervisor could not kill may
  // write), and a last line without a newline.
  void Finish() {
    for (int fd : fds_) {
      if (fd >= 0) Drain(fd, 4 * kMaxReadPerWake);
    }
    Stream(parser_.Finish());
  }
  const std::string& stderr_bytes() const { return stderr_; }

 private:
  void Drain(int fd, size_t budget) {
    char buffer[64 * 1024];
    while (budget > 0) {
      const ssize_t n = read(fd, buffer, std::min(sizeof buffer, budget));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) Closed(fd);
        return;
      }
      budget -= static_cast<size_t>(n);
      Handle(fd, absl::string_view(buffer, static_cast<size_t>(n)));
    }
  }
  void Handle(int fd, absl::string_view bytes) {
    if (fd == fds_[1]) {
      stderr_.append(bytes.data(), bytes.size());
      if (stderr_.size() > 4 * kStderrTailBytes)
        stderr_.erase(0, stderr_.size() - kStderrTailBytes);
      return;
    }
    Stream(parser_.Feed(bytes));
  }
  void Closed(int fd) {
    if (fd == fds_[0]) Stream(parser_.Finish());
    for (int& open : fds_) {
      if (open == fd) open = -1;
    }
  }
  void Stream(const std::vector<IntermediateValue>& values) {
    if (!context_.progress) return;
    for (const IntermediateValue& value : values) context_.progress(value.step, value.value);
  }

  int fds_[2];  // stdout, stderr; -1 once closed.
  CommandOutputParser& parser_;
  const TrialContext& context_;
  std::string stderr_;
};

std::string ExitProblem(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* abbreviation = sigabbrev_np(signal);
    return absl::StrCat(
        "was killed by signal ",
        abbreviation != nullptr ? absl::StrCat("SIG", abbreviation) : absl::StrCat(signal), " (",
        strsignal(signal), ")");
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

// Runs the started tree to its end: SIGTERM to every process once the main process exits or
// the trial is cancelled, SIGKILL after the grace period, every process reaped. Returns whether
// the cancellation came first.
bool Supervise(ProcessTree& tree, OutputPump& pump, const TrialContext& context,
               absl::Duration grace, absl::Duration sample_interval) {
  enum class Phase { kRunning, kTerminating, kKilled } phase = Phase::kRunning;
  bool cancelled = false;
  absl::Time next_sample = absl::Now(), kill_at, give_up_at;
  tree.SampleMemory();
  while (true) {
    pump.Pump(
        std::min(kCommandPollInterval, std::max(next_sample - absl::Now(), absl::ZeroDuration())),
        tree.event_fd());
    tree.Reap();
    const absl::Time now = absl::Now();
    if (now >= next_sample) {
      tree.SampleMemory();
      next_sample = now + sample_interval;
    }
    const bool cancel = context.cancelled != nullptr && context.cancelled->load();
    if (phase == Phase::kRunning && (tree.main_status() || cancel)) {
      cancelled = !tree.main_status();
      tree.Signal(SIGTERM);
      tree.Signal(SIGCONT);  // A stopped process would never see the SIGTERM.
      phase = Phase::kTerminating;
      kill_at = now + grace;
    }
    if (phase != Phase::kRunning && tree.Empty()) break;
    if (phase == Phase::kTerminating && now >= kill_at) {
      tree.Signal(SIGKILL);
      phase = Phase::kKilled;
      give_up_at = now + kProcessTreeKillTimeout;
    }
    if (phase == Phase::kKilled && now >= give_up_at) break;  // The destructor warns.
  }
  pump.Finish();
  return cancelled;
}

absl::Status Outcome(const RegisteredCommand& command, const v1::Assign& assign,
                     const std::optional<int>& status, bool has_objective,
                     const CommandOutputParser& parser,
                     const std::string& stderr_bytes, const std::string& oom_problem) {
  std::string problem;
  if (!status) {
    problem = "did not exit after SIGKILL";
  } else if (*status != 0 && !oom_problem.empty()) {
    // Not the trial's fault nor a bug: the node is too small for it (its operator or the
    // study can act on that), so say so rather than a bare SIGKILL. The victim may be a child
    // of the command (a shell's python), which then exits 137.
    problem = absl::StrCat(oom_problem, " (it ", ExitProblem(*status), ")");
  } else if (*status != 0) {
    problem = ExitProblem(*status);
  } else if (!has_objective && !IsMeasurementMetric(assign.objective_metric())) {
    const std::string& metric = assign.objective_metric();
    problem = absl::StrCat("exited 0 but never printed the objective metric ", metric,
                           " (print a line `", metric, "=0.93`, or a JSON line)");
    // Or printed it where it was not read.
    if (parser.discarded_bytes() > 0) {
      absl::StrAppend(&problem, "; its stdout passed the worker's --command_max_output_bytes and ",
                      parser.discarded_bytes(), " bytes were not read");
    } else if (parser.skipped_long_lines() > 0) {
      absl::StrAppend(&problem, "; ", parser.skipped_long_lines(), " stdout lines longer than ",
                      kMaxOutputLineBytes, " bytes were skipped");
    }
  } else {
    return absl::OkStatus();
  }
  std::string message = absl::StrCat("command ", command.name, " ", problem);
  if (std::string tail = PrintableTail(stderr_bytes, kStderrTailBytes); !tail.empty()) {
    absl::StrAppend(&message, "; stderr ends:\n", tail);
  }
  return absl::AbortedError(message);
}

// What the output limits cost the trial, so that an operator can tell why a metric is missing.
void LogLimits(const v1::Assign& assign, const CommandOutputParser& parser) {
  std::vector<std::string> limits;
  if (parser.skipped_long_lines() > 0) {
    limits.push_back(absl::StrCat("skipped ", parser.skipped_long_lines(),
                                  " stdout lines longer than ", kMaxOutputLineBytes, " bytes"));
  }
  if (parser.discarded_bytes() > 0) {
    limits.push_back(absl::StrCat("discarded ", parser.discarded_bytes(),
                                  " stdout bytes past --command_max_output_bytes"));
  }
  if (parser.metric_limit_reached()) {
    limits.push_back(absl::StrCat("ignored metric names past the first ", kMaxOutputMetrics));
  }
  if (limits.empty()) return;
  DHPT_LOG_INFO("trial %d attempt %d: %s", assign.trial_id(), assign.attempt(),
                absl::StrJoin(limits, "; "));
}

}  // namespace

std::string PrintableTail(absl::string_view bytes, size_t max_bytes) {
  if (bytes.size() > max_bytes) bytes.remove_prefix(bytes.size() - max_bytes);
  // Not from the middle of a character.
  for (int i = 0; i < 3 && !bytes.empty() && (bytes[0] & 0xC0) == 0x80; ++i) bytes.remove_prefix(1);
  std::string text;
  text.reserve(bytes.size());
  while (!bytes.empty()) {
    const size_t length = Utf8SequenceLength(bytes);
    if (length == 0) {
      text.push_back('?');
      bytes.remove_prefix(1);
      continue;
    }
    const char c = bytes[0];
    if (length == 1 && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) && c != '\n' &&
        c != '\t') {
      text.push_back('?');
    } else {
      text.append(bytes.data(), length);
    }
    bytes.remove_prefix(length);
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

CommandTrialOutcome RunCommandTrial(const RegisteredCommand& command, const CommandOptions& options,
                                    const v1::Assign& assign, const TrialContext& context) {
  CommandTrialOutcome outcome;
  if (context.cancelled != nullptr && context.cancelled->load()) {
    outcome.status = absl::CancelledError("cancelled before the command started");
    return outcome;
  }
  absl::StatusOr<std::string> workdir = MakeTrialWorkdir(options.workdir_root, assign);
  if (!workdir.ok()) {
    outcome.status = absl::FailedPreconditionError(
        absl::StrCat("cannot make the trial's working directory: ", workdir.status().message()));
    return outcome;
  }
  absl::StatusOr<std::string> params = ParamsJson(assign);
  absl::StatusOr<std::vector<std::string>> argv = CommandArguments(command, assign);
  if (!params.ok() || !argv.ok()) {
    RemoveTrialWorkdir(*workdir);
    outcome.status = absl::InvalidArgumentError(
        absl::StrCat("command ", command.name, ": ",
                     (params.ok() ? argv.status() : params.status()).message()));
    return outcome;
  }
  {
    std::ofstream file(absl::StrCat(*workdir, "/", kParamsFileName));
    file << *params;
    if (!file.flush()) {
      RemoveTrialWorkdir(*workdir);
      outcome.status = absl::FailedPreconditionError(
          absl::StrCat("cannot write ", kParamsFileName, " in ", *workdir));
      return outcome;
    }
  }
  ProcessSpec spec;
  spec.argv = std::move(*argv);
  spec.env = CommandEnvironmentVariables(
      command, options, assign,
      {.workdir = *workdir, .params_json = *params, .threads = context.threads});
  spec.workdir = *workdir;
  CommandOutputParser parser(assign.objective_metric(), options.max_output_bytes);
  const MemoryCgroup memory_cgroup = MemoryCgroup::OfThisProcess();
  const std::optional<int64_t> oom_kills_before = memory_cgroup.OomKills();
  absl::StatusOr<std::unique_ptr<ProcessTree>> tree = ProcessTree::Start(spec);
  if (!tree.ok()) {
    RemoveTrialWorkdir(*workdir);
    outcome.status = absl::FailedPreconditionError(
        absl::StrCat("command ", command.name, ": ", tree.status().message()));
    return outcome;
  }
  OutputPump pump(**tree, parser, context);
  const bool cancelled =
      Supervise(**tree, pump, context, command.grace_period.value_or(options.grace_period),
                options.sample_interval);
  outcome.usage = (*tree)->usage();
  outcome.metrics = parser.metrics();
  if (cancelled) {
    outcome.status = absl::CancelledError("cancelled; the command was stopped");
  } else {
    const std::string oom_problem = OomKillProblem(
        oom_kills_before, memory_cgroup.OomKills(), memory_cgroup.Limit(), options.node_name);
    const std::optional<int>& status = (*tree)->main_status();
    outcome.status = Outcome(command, assign, status, parser.objective().has_value(), parser,
                             pump.stderr_bytes(), oom_problem);
    outcome.out_of_memory = !oom_problem.empty() && status && *status != 0;
  }
  LogLimits(assign, parser);
  tree->reset();
  RemoveTrialWorkdir(*workdir);
  return outcome;
}

}  // namespace dhpt::worker
