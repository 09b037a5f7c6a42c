// dhpt-scheduler: holds studies and streams trial assignments to workers.

#include <csignal>
#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "services/common/env_flags.h"
#include "services/common/logging.h"
#include "services/common/signals.h"
#include "services/scheduler/scheduler_server.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051",
          "HOST:PORT to serve on; port 0 picks a free port (printed as 'listening on HOST:PORT')");
ABSL_FLAG(int, metrics_port, 0, "Prometheus /metrics port; 0 = off (not available yet)");
ABSL_FLAG(std::string, db, "",
          "SQLite file for durable state (not available yet: state is kept in memory)");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(5),
          "how often workers must send a heartbeat");
ABSL_FLAG(int, missed_heartbeats, 3, "silent intervals after which a worker loses its trials");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "dhpt-scheduler --listen=HOST:PORT\n\n"
      "Holds studies and their optimisers, and streams trial assignments to dhpt workers.\n"
      "Every flag can also be set as DHPT_<FLAG> in the environment (e.g. DHPT_LISTEN).");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return std::string("dhpt-scheduler " DHPT_VERSION "\n"); };
  usage.contains_helpshort_flags = [](absl::string_view file) { return absl::StrContains(file, "services/"); };
  usage.contains_help_flags = usage.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(usage);
  dhpt::ApplyEnvironmentToFlags(
      {"listen", "metrics_port", "db", "heartbeat_interval", "missed_heartbeats"});
  dhpt::ParseCommandLineWithDashes(argc, argv);
  dhpt::BlockTerminationSignals();

  if (!absl::GetFlag(FLAGS_db).empty()) {
    std::fprintf(stderr, "--db: durable state is not available yet; refusing to start so that "
                         "no study is silently kept only in memory\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_metrics_port) != 0) {
    std::fprintf(stderr, "--metrics-port: metrics are not available yet\n");
    return 2;
  }
  dhpt::scheduler::SchedulerServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.core.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  options.core.missed_heartbeats = absl::GetFlag(FLAGS_missed_heartbeats);
  if (options.core.heartbeat_interval < absl::Milliseconds(10) ||
      options.core.missed_heartbeats < 1) {
    std::fprintf(stderr, "--heartbeat_interval must be >= 10ms and --missed_heartbeats >= 1\n");
    return 2;
  }

  dhpt::scheduler::InMemoryStudyStore store;
  auto server = dhpt::scheduler::SchedulerServer::Start(options, &store);
  if (!server.ok()) {
    std::fprintf(stderr, "dhpt-scheduler: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const std::string& listen = options.listen_address;
  std::cout << "listening on " << listen.substr(0, listen.rfind(':')) << ":" << (*server)->port()
            << std::endl;

  const int signal = dhpt::WaitForTerminationSignal();
  DHPT_LOG_INFO("received %s; shutting down", strsignal(signal));
  (*server)->Shutdown();
  return 0;
}
