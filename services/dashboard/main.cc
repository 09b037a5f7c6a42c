// dhpt-dashboard: every study, trial and worker of a scheduler in a browser, live.
//   dhpt-dashboard --scheduler=localhost:50051 --listen=127.0.0.1:8080
// It reads through the scheduler's public StudyService (the CLI's TLS and token flags), and
// prints "dashboard at http://HOST:PORT/" once it serves (port 0 picks a free port).

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/common/client_security_flags.h"
#include "services/common/env_flags.h"
#include "services/common/flag_ranges.h"
#include "services/common/signals.h"
#include "services/dashboard/dashboard_server.h"

ABSL_FLAG(std::string, scheduler, "localhost:50051", "the scheduler's HOST:PORT");
ABSL_FLAG(std::string, listen, "127.0.0.1:8080",
          "HOST:PORT to serve browsers on (port 0 picks a free one); 0.0.0.0 to be reached "
          "from other machines");
ABSL_FLAG(bool, allow_stop, false,
          "offer a Stop button on study pages (asks first); off, the dashboard only reads");
ABSL_FLAG(std::vector<std::string>, allowed_hosts, {},
          "names besides IP addresses and localhost that browsers may reach the dashboard by, "
          "NAME or NAME:PORT, comma-separated (a proxy's, an Ingress' or a Service's name); "
          "requests naming another Host are answered 421, so a web page cannot re-point its "
          "own name here (DNS rebinding) and read or stop studies");
ABSL_FLAG(bool, plot_view, true,
          "read the trials for the plots in ListTrials' plot view (only what plots draw); false "
          "reads whole trials, as before the view existed (to compare the two)");
ABSL_FLAG(int, max_event_streams, dhpt::dashboard::kDefaultMaxEventStreams,
          "study pages open at once with live updates, --per_address_share of them at most "
          "from one address; past it the address holding the most gives up its oldest page "
          "(which reconnects) to one holding fewer, else the new page is refused");
ABSL_FLAG(int, max_connections, dhpt::dashboard::kDefaultMaxConnections,
          "HTTP connections served at once (live pages among them), half of them at most from "
          "one address (--per_address_share); more are answered 503 at once");
ABSL_FLAG(double, per_address_share, dhpt::dashboard::kDefaultPerAddressShare,
          "the share of --max_connections and of --max_event_streams one client address (an "
          "IPv6 /64) may hold (above 0, at most 1). "
          "Every browser behind a proxy or kubectl port-forward is one address and shares it: "
          "give 1 there");

// The values the numeric flags take (docs/dashboard.md); --max_connections must also leave 8
// connections beside --max_event_streams, checked below.
std::vector<dhpt::FlagRange> DashboardFlagRanges() {
  using dhpt::FlagRange;
  return {FlagRange::Address("scheduler", 1),
          FlagRange::Address("listen", 0, "0: any free port"),
          FlagRange::Integer("max_event_streams", 1, 1024),
          FlagRange::Integer("max_connections", 9, 4096),
          FlagRange::Real("per_address_share", 0, false, 1)};
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "dhpt-dashboard --scheduler=HOST:PORT --listen=HOST:PORT\n\n"
      "Serves the scheduler's studies, trials and workers to browsers, live.\n"
      "Every flag can also be set as DHPT_<FLAG> in the environment (e.g. DHPT_SCHEDULER).");
  absl::FlagsUsageConfig usage;
  usage.version_string = [] { return std::string("dhpt-dashboard " DHPT_VERSION "\n"); };
  usage.contains_helpshort_flags = [](absl::string_view file) {
    return absl::StrContains(file, "services/");
  };
  usage.contains_help_flags = usage.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(usage);
  // Every flag of this file: a list kept by hand missed --plot_view.
  dhpt::ApplyEnvironmentToFlagsDefinedIn("services/dashboard/main.cc");
  dhpt::ApplyEnvironmentToFlags(dhpt::ClientSecurityFlagNames());
  dhpt::ParseFlagsOnly("dhpt-dashboard", argc, argv, DashboardFlagRanges());
  dhpt::BlockTerminationSignals();
  // A browser that closes mid-answer must not end the process.
  std::signal(SIGPIPE, SIG_IGN);

  const std::string listen = absl::GetFlag(FLAGS_listen);
  // HOST:PORT, as DashboardFlagRanges checked.
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port)) return 2;
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  dhpt::dashboard::DashboardOptions options;
  options.scheduler = absl::GetFlag(FLAGS_scheduler);
  options.allow_stop = absl::GetFlag(FLAGS_allow_stop);
  options.plot_view = absl::GetFlag(FLAGS_plot_view);
  absl::StatusOr<dhpt::dashboard::AllowedHosts> allowed =
      dhpt::dashboard::AllowedHosts::Parse(absl::GetFlag(FLAGS_allowed_hosts));
  if (!allowed.ok()) {
    return dhpt::ReportFlagError("dhpt-dashboard", allowed.status().message());
  }
  options.allowed_hosts = *std::move(allowed);
  // In range: DashboardFlagRanges.
  options.max_event_streams = absl::GetFlag(FLAGS_max_event_streams);
  options.connections.max_connections = absl::GetFlag(FLAGS_max_connections);
  options.connections.max_per_client = dhpt::dashboard::PerAddressLimit(
      options.connections.max_connections, absl::GetFlag(FLAGS_per_address_share));
  options.max_event_streams_per_client = dhpt::dashboard::PerAddressLimit(
      options.max_event_streams, absl::GetFlag(FLAGS_per_address_share));
  // Every live page holds a connection; a page also needs a few for its other requests.
  if (options.connections.max_connections < options.max_event_streams + 8) {
    std::fprintf(stderr,
                 "dhpt-dashboard: --max_connections must be at least --max_event_streams + 8 "
                 "(%d); got %d\n",
                 options.max_event_streams + 8, options.connections.max_connections);
    return 2;
  }
  absl::StatusOr<dhpt::ChannelSecurity> security =
      dhpt::MakeChannelSecurity(dhpt::ClientSecurityFromFlags());
  if (!security.ok()) {
    return dhpt::ReportFlagError("dhpt-dashboard", security.status().message());
  }
  options.security = *security;
  absl::StatusOr<std::unique_ptr<dhpt::dashboard::DashboardServer>> server =
      dhpt::dashboard::DashboardServer::Start(options, host, port);
  if (!server.ok()) {
    std::fprintf(stderr, "dhpt-dashboard: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string shown = host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host;
  std::printf("dashboard at http://%s:%d/ (scheduler %s)\n", shown.c_str(), (*server)->port(),
              options.scheduler.c_str());
  std::fflush(stdout);
  dhpt::WaitForTerminationSignal();
  (*server)->Stop();
  return 0;
}
