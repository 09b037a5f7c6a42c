#pragma once

// dhpt-dashboard's HTTP side: the pages (built into the binary), a JSON API that the pages
// read, and a server-sent event stream per open study page fed by the scheduler's WatchStudy.
// It talks to the scheduler over the public StudyService only, as the CLI does (the same TLS
// and token flags); the page logic is in page_data.h.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/common/transport_security.h"
#include "services/dashboard/allowed_hosts.h"

namespace dhpt::dashboard {

// Browsers holding a study page open at once (each holds one event stream, one thread and
// one WatchStudy); more are answered 503 until one closes.
inline constexpr int kDefaultMaxEventStreams = 32;
// A comment sent on an idle event stream this often, so a browser that left is noticed (the
// write fails) and its stream and watch are let go.
inline constexpr absl::Duration kEventStreamKeepalive = absl::Seconds(10);
// Events waiting for a browser that reads slowly; past this its stream is closed and the
// browser reconnects after the last event it saw (Last-Event-ID), so none is lost.
inline constexpr size_t kMaxQueuedEvents = 5000;
// Connections served at once (--max_connections); half of them at most from one address.
inline constexpr int kDefaultMaxConnections = 128;
// The share of --max_connections one client address may hold (--per_address_share): a half
// leaves room for others when one client opens many. Every browser behind a proxy or a
// `kubectl port-forward` is one address (127.0.0.1 for a port-forward), so they all share it:
// there 1 lets them use every connection.
inline constexpr double kDefaultPerAddressShare = 0.5;
// A request must arrive whole (line, headers, body) within this of its first byte: a client
// sending a byte at a time holds a connection this long, not for ever.
inline constexpr absl::Duration kRequestTimeout = absl::Seconds(10);
// A kept-alive connection with no next request is closed after this.
inline constexpr absl::Duration kIdleConnectionTimeout = absl::Seconds(5);

// Connections one address may hold of `max_connections`, at `share` (0 to 1] of them; at least
// one.
constexpr int PerAddressLimit(int max_connections, double share) {
  const int limit = static_cast<int>(max_connections * share);
  return limit < 1 ? 1 : limit;
}

// What one client may hold of the HTTP server (see http_server.h): cpp-httplib serves each
// connection on one thread, so these keep a client that sends slowly, or opens many
// connections, from holding every thread.
struct ConnectionLimits {
  // Connections served at once, open event streams among them; more are answered 503 at once.
  int max_connections = kDefaultMaxConnections;
  // Connections one client address may hold at once (a browser opens at most 6 to a host).
  // Every client behind a proxy or a port-forward is one address: they share this.
  int max_per_client = PerAddressLimit(kDefaultMaxConnections, kDefaultPerAddressShare);
  // A request's line, headers and body must all arrive within this of its first byte.
  absl::Duration request_timeout = kRequestTimeout;
  // How long a kept-alive connection waits for its next request.
  absl::Duration idle_timeout = kIdleConnectionTimeout;
};

struct DashboardOptions {
  std::string scheduler;  // HOST:PORT
  ChannelSecurity security;
  // Off by default: the dashboard only reads. On, a study page offers a Stop button (asking
  // first); the scheduler still checks the token the dashboard holds.
  bool allow_stop = false;
  // Host headers answered; others get 421 (allowed_hosts.h: DNS rebinding).
  AllowedHosts allowed_hosts;
  // The plots read each trial in ListTrials' plot view (what plots draw only); off, whole
  // trials, as before the view existed: for comparing the two (bench/dashboard_bench.mjs).
  bool plot_view = true;
  int max_event_streams = kDefaultMaxEventStreams;
  // Live pages one client address (ClientGroup) may hold: --per_address_share of them.
  int max_event_streams_per_client =
      PerAddressLimit(kDefaultMaxEventStreams, kDefaultPerAddressShare);
  absl::Duration keepalive = kEventStreamKeepalive;
  ConnectionLimits connections;
};

class DashboardServer {
 public:
  // Listens on host:port (port 0 picks a free one) and serves in the background.
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(const DashboardOptions& options,
                                                                const std::string& host, int port);
  ~DashboardServer();
  int port() const;
  // Closes every event stream and stops serving; called by the destructor too.
  void Stop();

 private:
  struct State;
  explicit DashboardServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dhpt::dashboard
