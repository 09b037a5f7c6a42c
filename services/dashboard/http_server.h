#pragma once

// The dashboard's HTTP server: cpp-httplib's, with limits a slow client cannot get around.
// cpp-httplib serves each connection on one pool thread and times out each read, not a whole
// request, so clients that send their headers a byte at a time would hold every thread and
// the dashboard would stop answering. Here a request must arrive whole within a deadline,
// one address may hold only part of the connections, and a connection past a limit is
// answered 503 at once (by threads kept spare for it) instead of waiting in the queue.
// A request whose length two readers could take differently (Transfer-Encoding and
// Content-Length both, as in request smuggling) is refused with 400 and its connection closed,
// as RFC 9112 section 6.3 asks. So is every other error answer that leaves where the next
// request starts in doubt (a request line cpp-httplib cannot parse, 414, a malformed chunked
// body, a body on a GET, which cpp-httplib would not read); a POST without a length (411) or
// with a body longer than the dashboard takes (413) is refused at once, not read.

#include <httplib.h>

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "services/dashboard/dashboard_server.h"

namespace dhpt::dashboard {

// What the per-address shares count a client by: its IPv4 address, or the /64 of an IPv6 one
// (every host on a network gets a whole /64, so one client could otherwise take the shares of
// as many addresses as it likes). An IPv4-mapped IPv6 address counts as its IPv4 one.
std::string ClientGroup(const std::string& ip);

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const ConnectionLimits& limits);
  // After bind_to_port: lets connections wait to be accepted in a queue of kListenBacklog
  // rather than cpp-httplib's 5, past which a browser opening its usual 6 connections at once
  // has one refused and retried a second later.
  void WidenBacklog();
  // The server's own pre-routing handler runs after the framing check below (this hides
  // httplib::Server's, which would replace it).
  httplib::Server& set_pre_routing_handler(HandlerWithResponse handler);

 private:
  // Called by cpp-httplib on a pool thread for each accepted connection (it is the hook its
  // own TLS server overrides): counts the connection against the limits and serves its
  // requests through a stream that enforces the request deadline.
  bool process_and_close_socket(socket_t sock) override;
  // Answers 503 without reading the request, then closes.
  void Refuse(socket_t sock, const std::string& why);
  // Installs the pre-routing handler: requests whose length is ambiguous are answered 400
  // before `then` (or any route) sees them.
  void Guard(HandlerWithResponse then);

  const ConnectionLimits limits_;
  absl::Mutex mutex_;
  int open_ ABSL_GUARDED_BY(mutex_) = 0;
  std::map<std::string, int> per_client_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::dashboard
