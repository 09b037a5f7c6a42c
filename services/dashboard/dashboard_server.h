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

struct DashboardOptions {
  std::string scheduler;  // HOST:PORT
  ChannelSecurity security;
  // Off by default: the dashboard only reads. On, a study page offers a Stop button (asking
  // first); the scheduler still checks the token the dashboard holds.
  bool allow_stop = false;
  int max_event_streams = kDefaultMaxEventStreams;
  absl::Duration keepalive = kEventStreamKeepalive;
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
