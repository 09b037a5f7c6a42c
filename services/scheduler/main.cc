// dhpt-scheduler: holds studies and streams trial assignments to workers.

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "services/common/channel_options.h"
#include "services/common/env_flags.h"
#include "services/common/flag_ranges.h"
#include "services/common/logging.h"
#include "services/common/signals.h"
#include "services/common/metrics_endpoint.h"
#include "services/common/thread_priority.h"
#include "services/common/transport_security.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/scheduler/scheduler_server.h"
#include "services/study/spec_validation.h"
#include "services/scheduler/sqlite_study_store.h"

namespace {

// $XDG_STATE_HOME/dhpt/scheduler.db, or ~/.local/state/dhpt/scheduler.db.
std::string DefaultDatabasePath() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state != '\0') {
    return std::string(state) + "/dhpt/scheduler.db";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") +
         "/.local/state/dhpt/scheduler.db";
}

// Every client and worker holds a socket: take every descriptor the system allows, so that a
// burst of connections cannot use them up (gRPC stops accepting connections when it runs out).
void RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

ABSL_FLAG(std::string, listen, "0.0.0.0:50051",
          "HOST:PORT to serve on; port 0 picks a free port (printed as 'listening on HOST:PORT')");
ABSL_FLAG(int, metrics_port, -1,
          "serve Prometheus metrics on this port at /metrics; 0 picks a free port (printed as "
          "'metrics on :PORT'); -1 = off");
ABSL_FLAG(std::string, db, DefaultDatabasePath(),
          "SQLite file holding every study and trial (created if missing; the default path's "
          "directory too); ':memory:' keeps them only while the scheduler runs");
ABSL_FLAG(int64_t, max_db_bytes, 0,
          "cap on the database file in bytes; past it writes fail (UNAVAILABLE) until space is "
          "made; its log is checkpointed at a quarter of the cap; 0 = no cap");
ABSL_FLAG(std::string, db_sync, "full",
          "full: every commit reaches the disk before it is acknowledged (survives power loss); "
          "normal: survives the scheduler being killed, may lose the last commits on power loss");
ABSL_FLAG(std::string, tls_cert, "",
          "serve TLS with this certificate chain (PEM); with --tls_key");
ABSL_FLAG(std::string, tls_key, "", "the private key (PEM) of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "mutual TLS: accept only clients with a certificate signed by this CA (PEM)");
ABSL_FLAG(std::string, auth_token_file, "",
          "users' token: StudyService calls must carry 'authorization: Bearer TOKEN', TOKEN "
          "being this file's content (needs TLS and --worker_token_file)");
ABSL_FLAG(std::string, worker_token_file, "",
          "workers' token: WorkerService streams must carry this file's token; it cannot call "
          "StudyService, and the users' token cannot connect as a worker");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0",
          "address the metrics endpoint binds; it is plaintext HTTP without a token, so use "
          "127.0.0.1 or a NetworkPolicy where that matters");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(5),
          "on SIGTERM or SIGINT, how long calls in flight (a reply to a slow client, a worker "
          "stream) may take to end before they are cancelled; a client or worker that stopped "
          "answering holds the stop this long; at most 10m; a second signal stops at once "
          "(docs/deployment.md)");
ABSL_FLAG(int, max_studies, 10'000, "studies the scheduler holds at most (ended ones included)");
ABSL_FLAG(int, max_parameters, dhpt::study::kDefaultMaxParameters,
          "parameters one study may tune at most");
ABSL_FLAG(int64_t, max_dataset_bytes, dhpt::study::kDefaultMaxDatasetBytes,
          "largest generated data set a study may ask workers to hold, in bytes");
ABSL_FLAG(int, max_message_bytes, 4 << 20,
          "largest request the scheduler reads, in bytes (an ImportStudy of a large export "
          "needs more)");
ABSL_FLAG(int64_t, max_spec_bytes_total, dhpt::scheduler::kDefaultMaxSpecBytesTotal,
          "bytes of study specs the scheduler holds at most (each costs about three times "
          "that in memory); past it CreateStudy and ImportStudy are RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_reply_bytes_in_flight, dhpt::scheduler::kDefaultMaxReplyBytesInFlight,
          "bytes of ListTrials and ListStudies pages being built or sent at once, all callers "
          "together; pages are cut short to fit, and a call finding under 64 KiB left is "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, ended_study_cache_bytes,
          static_cast<int64_t>(dhpt::scheduler::kDefaultEndedStudyCacheBytes),
          "bytes (estimated) of ended studies' trials kept in memory, the most recently used; "
          "the others keep only their summary and are read back from --db when asked (a "
          "--db of :memory: keeps everything)");
ABSL_FLAG(int64_t, max_memory_bytes, -1,
          "memory the scheduler may hold, in bytes; near it (90%) it sheds the ended studies "
          "from memory, then refuses new studies and trials (RESOURCE_EXHAUSTED) until it is "
          "back under, so the kernel does not kill it. -1: the memory limit of its container "
          "(cgroup v2 or v1), read at start, if it has one; 0: no cap");
ABSL_FLAG(int, watch_journal_events, 16'384,
          "latest events each watched study keeps for its WatchStudy readers (and at most 8 MiB); "
          "a reader further behind, or resuming from an older position, is brought up to date "
          "with each changed trial once");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(5),
          "how often workers must send a heartbeat");
ABSL_FLAG(int, missed_heartbeats, 3, "silent intervals after which a worker loses its trials");
// Keepalive (docs/deployment.md, "Flaky links and small boards"): a dead link is noticed after
// --keepalive_time + --keepalive_timeout of silence, independently of the heartbeat lease.
ABSL_FLAG(absl::Duration, keepalive_time, absl::Milliseconds(dhpt::KeepaliveOptions{}.ping_interval_ms),
          "ping each connection after this long without traffic");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Milliseconds(dhpt::KeepaliveOptions{}.ping_timeout_ms),
          "close a connection whose ping is not answered within this long");
ABSL_FLAG(absl::Duration, keepalive_min_ping_interval,
          absl::Milliseconds(dhpt::KeepaliveOptions{}.min_ping_interval_ms),
          "the fastest pings a client may send; at most the workers' --keepalive_time");
ABSL_FLAG(int, suggestion_threads, 0,
          "threads computing model-based suggestions (0: one per core); each study has at most "
          "one suggestion in progress, so one costly study cannot hold up the others");
ABSL_FLAG(absl::Duration, client_lease, absl::Minutes(30),
          "how long an ask-and-tell client keeps a trial without reporting (ReportProgress)");
ABSL_FLAG(bool, speed_placement, true,
          "place trials by the workers' learnt speeds (the longest ready trials to the fastest "
          "workers; at a study's end, a slow worker leaves the last trials to a faster one "
          "predicted to finish them first, and duplicates); false: first-come, no duplicates");
ABSL_FLAG(double, duplicate_margin, dhpt::scheduler::kDefaultDuplicateMargin,
          "once a study has no trial left to suggest, an idle worker runs a duplicate of a "
          "slower worker's trial when the slow one's predicted remaining time exceeds this many "
          "times the idle one's predicted time (learnt speeds; docs/deployment.md#placement-by-learnt-speed); 0: never");
ABSL_FLAG(bool, early_duplicates, false,
          "also mid-study, a free worker faster than the cluster's median runs a duplicate of a "
          "slower worker's trial predicted to end after the rest of its study, before a new "
          "trial (docs/deployment.md#placement-by-learnt-speed; made the edge benchmark longer)");

ABSL_FLAG(absl::Duration, worker_log_interval, dhpt::scheduler::kDefaultWorkerLogInterval,
          "worker connects, drains and disconnects are logged one line each, at most 20 lines "
          "in this interval; the rest are counted and logged as one line when it ends or at "
          "shutdown (0: every one)");

ABSL_FLAG(int, worker_stream_nice, dhpt::scheduler::kDefaultWorkerStreamNice,
          "the threads that handle worker messages run at a lower CPU priority than the user "
          "calls' threads: their nice value this much higher, so a busy cluster does not make "
          "users wait for a core (0: all alike; docs/deployment.md#flaky-links-and-small-boards)");

static_assert(dhpt::scheduler::kWorkerLogLines == 20, "--worker_log_interval's help names it");

// glibc gives a thread that first allocates while every arena is busy an arena of its own, up
// to 8 per core, each reserving 64 MiB of address space. A thread whose arena cannot be made
// (under a memory limit: a container's, or RLIMIT_AS) then maps a page per allocation, and
// ran out of memory where the other arenas had room: a suggestion thread's first allocations
// after a failed suggestion ended the scheduler (OptimizerLimitsTest, 1 run in 6). A few
// arenas, made as its threads start and then shared by them, leave no thread without one;
// MALLOC_ARENA_MAX overrides.
constexpr int kSchedulerMallocArenas = 4;

// The longest --shutdown_grace: longer would let one frozen client hold a stop (a node drain, a
// rolling update) for good; `inf` is refused too (a deadline that far overflowed to none).
constexpr absl::Duration kMaxShutdownGrace = absl::Minutes(10);

// The values the numeric flags take (docs/deployment.md, "Flag ranges").
std::vector<dhpt::FlagRange> SchedulerFlagRanges() {
  using dhpt::FlagRange;
  return {
      FlagRange::Address("listen", 0, "0: any free port"),
      FlagRange::Integer("metrics_port", -1, 65535, "-1: off, 0: any free port"),
      FlagRange::Integer("max_db_bytes", 0, FlagRange::kNoMax, "0: no cap"),
      // `inf` is refused too: a deadline that far overflowed to none.
      FlagRange::Duration("shutdown_grace", absl::ZeroDuration(), kMaxShutdownGrace),
      FlagRange::Integer("max_studies", 1, FlagRange::kNoMax),
      FlagRange::Integer("max_parameters", 1, FlagRange::kNoMax),
      FlagRange::Integer("max_dataset_bytes", 1, FlagRange::kNoMax),
      FlagRange::Integer("max_message_bytes", 1024, FlagRange::kNoMax),
      FlagRange::Integer("max_spec_bytes_total", 1, FlagRange::kNoMax),
      FlagRange::Integer("max_reply_bytes_in_flight", int64_t{1} << 20, FlagRange::kNoMax),
      FlagRange::Integer("ended_study_cache_bytes", 0, FlagRange::kNoMax),
      FlagRange::Integer("max_memory_bytes", -1, FlagRange::kNoMax,
                         "-1: the memory limit of its container, 0: no cap"),
      FlagRange::Integer("watch_journal_events", 1, FlagRange::kNoMax),
      FlagRange::Duration("heartbeat_interval", absl::Milliseconds(10), absl::Hours(1)),
      FlagRange::Integer("missed_heartbeats", 1, FlagRange::kNoMax),
      // gRPC takes keepalive times in milliseconds as an int: 24 days would overflow it.
      FlagRange::Duration("keepalive_time", absl::Seconds(1), absl::Hours(24)),
      FlagRange::Duration("keepalive_timeout", absl::Seconds(1), absl::Hours(24)),
      FlagRange::Duration("keepalive_min_ping_interval", absl::Seconds(1), absl::Hours(24)),
      FlagRange::Integer("suggestion_threads", 0, 1024, "0: one per core"),
      FlagRange::Duration("client_lease", absl::Seconds(1), absl::Hours(24 * 30)),
      // Between 0 and 1 it is refused below: a margin under 1 would duplicate faster trials.
      FlagRange::Real("duplicate_margin", 0, true, 100, "0: no duplicates, else at least 1"),
      FlagRange::Duration("worker_log_interval", absl::ZeroDuration(), absl::Hours(24),
                          "0: every line"),
      FlagRange::Integer("worker_stream_nice", 0, dhpt::kLowestThreadPriority, "0: all alike"),
  };
}

int main(int argc, char** argv) {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, kSchedulerMallocArenas);
  // Debian's Abseil is built with its debug-mode lock-order graph on: every contended lock of the
  // core's mutex walked it, 3% of the scheduler's CPU under a saturating run (docs/benchmarks.md,
  // "Scale"), and a suspected cycle would abort the service. The tests that run the core in
  // their own process keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "dhpt-scheduler --listen=HOST:PORT\n\n"
      "Holds studies and their optimisers, and streams trial assignments to dhpt workers.\n"
      "Every flag can also be set as DHPT_<FLAG> in the environment (e.g. DHPT_LISTEN).");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] {
    return "dhpt-scheduler " DHPT_VERSION " (grpc " + grpc::Version() + ")\n";
  };
  usage.contains_helpshort_flags = [](absl::string_view file) { return absl::StrContains(file, "services/"); };
  usage.contains_help_flags = usage.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(usage);
  // Every flag of this file, DHPT_<FLAG> (the command line wins).
  dhpt::ApplyEnvironmentToFlagsDefinedIn("services/scheduler/main.cc");
  dhpt::ParseFlagsOnly("dhpt-scheduler", argc, argv, SchedulerFlagRanges());
  dhpt::BlockTerminationSignals();
  RaiseDescriptorLimit();

  const std::string db_sync = absl::GetFlag(FLAGS_db_sync);
  if (db_sync != "full" && db_sync != "normal") {
    return dhpt::ReportFlagError("dhpt-scheduler", "--db_sync must be full or normal");
  }
  // The numbers are in range: SchedulerFlagRanges.
  const int metrics_port = absl::GetFlag(FLAGS_metrics_port);
  // Declared before the server, so the core never outlives its observer.
  dhpt::scheduler::SchedulerMetrics metrics;
  dhpt::scheduler::SchedulerServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.core.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.core.missed_heartbeats = absl::GetFlag(FLAGS_missed_heartbeats);
  options.core.client_lease = absl::GetFlag(FLAGS_client_lease);
  options.core.duplicate_margin = absl::GetFlag(FLAGS_duplicate_margin);
  options.core.early_duplicates = absl::GetFlag(FLAGS_early_duplicates);
  options.core.speed_placement = absl::GetFlag(FLAGS_speed_placement);
  options.core.worker_log_interval = absl::GetFlag(FLAGS_worker_log_interval);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int suggestion_threads = absl::GetFlag(FLAGS_suggestion_threads);
  options.core.suggestion_threads = suggestion_threads > 0 ? suggestion_threads : cores;
  if (metrics_port >= 0) options.core.observer = &metrics;
  options.core.max_studies = absl::GetFlag(FLAGS_max_studies);
  options.core.spec_limits.max_parameters = absl::GetFlag(FLAGS_max_parameters);
  options.core.spec_limits.max_dataset_bytes = absl::GetFlag(FLAGS_max_dataset_bytes);
  options.max_receive_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.core.max_spec_bytes_total = absl::GetFlag(FLAGS_max_spec_bytes_total);
  options.core.max_reply_bytes_in_flight =
      static_cast<size_t>(absl::GetFlag(FLAGS_max_reply_bytes_in_flight));
  options.core.ended_study_cache_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_ended_study_cache_bytes));
  int64_t max_memory_bytes = absl::GetFlag(FLAGS_max_memory_bytes);
  if (max_memory_bytes == -1) {
    max_memory_bytes = dhpt::scheduler::CgroupMemoryLimit().value_or(0);
  }
  options.core.max_memory_bytes = max_memory_bytes;
  const int pressure_percent = static_cast<int>(dhpt::scheduler::kMemoryPressureShare * 100 + 0.5);
  if (const int64_t resident = dhpt::scheduler::ResidentBytes();
      max_memory_bytes > 0 &&
      resident >= static_cast<int64_t>(static_cast<double>(max_memory_bytes) *
                                       dhpt::scheduler::kMemoryPressureShare)) {
    // It would refuse every study from the start: say so now rather than at each call.
    std::fprintf(stderr,
                 "the memory cap (%lld bytes, %s) is below what the scheduler holds at start "
                 "(%lld MiB, and new work is refused past %d%% of the cap): give it at least "
                 "%lld MiB, or 0 for no cap\n",
                 static_cast<long long>(max_memory_bytes),
                 absl::GetFlag(FLAGS_max_memory_bytes) == -1 ? "the container's limit"
                                                             : "--max_memory_bytes",
                 static_cast<long long>(resident >> 20), pressure_percent,
                 static_cast<long long>((resident * 2) >> 20));
    return 2;
  }
  if (max_memory_bytes > 0) {
    DHPT_LOG_INFO("memory cap: %d MiB (new work is refused past %d%% of it, and taken again under %d%%)",
                  max_memory_bytes >> 20, pressure_percent,
                  static_cast<int>(dhpt::scheduler::kMemoryResumeShare * 100 + 0.5));
  }
  options.core.watch_journal.max_events = absl::GetFlag(FLAGS_watch_journal_events);
  if (options.core.duplicate_margin > 0 && options.core.duplicate_margin < 1) {
    return dhpt::ReportFlagError(
        "dhpt-scheduler",
        absl::StrFormat("--duplicate_margin must be 0 (no duplicates) or at least 1; got %g",
                        options.core.duplicate_margin));
  }
  options.worker_stream_nice = absl::GetFlag(FLAGS_worker_stream_nice);
  if (const int process_nice = getpriority(PRIO_PROCESS, 0);
      options.worker_stream_nice > 0 &&
      process_nice + options.worker_stream_nice > dhpt::kLowestThreadPriority) {
    DHPT_LOG_WARNING("started at nice %d, worker messages can run only %d of --worker_stream_nice's "
                     "%d steps below user calls (a nice value stops at %d)",
                     process_nice, std::max(0, dhpt::kLowestThreadPriority - process_nice),
                     options.worker_stream_nice, dhpt::kLowestThreadPriority);
  }
  options.keepalive.ping_interval_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_time));
  options.keepalive.ping_timeout_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_timeout));
  options.keepalive.min_ping_interval_ms =
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_min_ping_interval));

  absl::StatusOr<dhpt::ServerSecurity> security =
      dhpt::MakeServerSecurity({.tls_cert_file = absl::GetFlag(FLAGS_tls_cert),
                                .tls_key_file = absl::GetFlag(FLAGS_tls_key),
                                .tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca),
                                .token_file = absl::GetFlag(FLAGS_auth_token_file),
                                .worker_token_file = absl::GetFlag(FLAGS_worker_token_file)});
  if (!security.ok()) {
    return dhpt::ReportFlagError("dhpt-scheduler", security.status().message());
  }
  options.credentials = security->credentials;
  options.tokens = security->tokens;

  const std::string db = absl::GetFlag(FLAGS_db);
  if (db == DefaultDatabasePath()) {
    std::error_code ignored;  // Open reports a directory it cannot use.
    std::filesystem::create_directories(std::filesystem::path(db).parent_path(), ignored);
  }
  absl::StatusOr<std::unique_ptr<dhpt::scheduler::SqliteStudyStore>> store =
      dhpt::scheduler::SqliteStudyStore::Open({.path = db,
                                               .max_bytes = absl::GetFlag(FLAGS_max_db_bytes),
                                               .sync_to_disk = db_sync == "full"});
  if (!store.ok()) {
    std::fprintf(stderr, "dhpt-scheduler: %s\n", store.status().ToString().c_str());
    return 1;
  }
  DHPT_LOG_INFO("studies are kept in %s", db == ":memory:" ? "memory only (--db=:memory:)" : db);
  auto server = dhpt::scheduler::SchedulerServer::Start(options, store->get());
  if (!server.ok()) {
    std::fprintf(stderr, "dhpt-scheduler: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string& listen = options.listen_address;
  std::cout << "listening on " << listen.substr(0, listen.rfind(':')) << ":" << (*server)->port()
            << std::endl;
  std::unique_ptr<dhpt::MetricsEndpoint> metrics_endpoint;
  if (metrics_port >= 0) {
    auto endpoint = dhpt::MetricsEndpoint::Start(
        absl::GetFlag(FLAGS_metrics_listen), metrics_port, {{"component", "scheduler"}},
        {metrics.registry(), std::make_shared<dhpt::scheduler::SchedulerStateCollector>(&(*server)->core())});
    if (!endpoint.ok()) {
      std::fprintf(stderr, "dhpt-scheduler: %s\n", endpoint.status().ToString().c_str());
      (*server)->Shutdown();
      return 1;
    }
    metrics_endpoint = std::move(*endpoint);
    std::cout << "metrics on :" << metrics_endpoint->port() << std::endl;
  }

  const int signal = dhpt::WaitForTerminationSignal();
  DHPT_LOG_INFO("received %s; shutting down (a second SIGTERM or SIGINT stops at once)",
                strsignal(signal));
  // The impatient operator's way out of the grace (a client that stopped answering holds it):
  // what was acknowledged is already stored, so stopping now loses only the calls in flight.
  std::thread([] {
    const int again = dhpt::WaitForTerminationSignal();
    DHPT_LOG_WARNING("received %s again; stopping now, without waiting for calls in flight",
                     strsignal(again));
    std::fflush(nullptr);
    std::_Exit(128 + again);
  }).detach();
  metrics_endpoint.reset();  // Stop scraping the core before it goes.
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  return 0;
}
