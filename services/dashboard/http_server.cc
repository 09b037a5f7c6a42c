#include "services/dashboard/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/dashboard/page_data.h"

namespace dhpt::dashboard {
namespace {

// Threads beyond max_connections: never held by a served connection, so a connection past a
// limit is refused at once rather than queued behind the ones being served.
constexpr int kSpareThreads = 8;
// A refused client's request is read and dropped for at most this long before the socket
// closes, so that the close does not reset the connection before the client reads the 503.
constexpr absl::Duration kRefusalDrain = absl::Milliseconds(200);
// Connections waiting to be accepted.
constexpr int kListenBacklog = 128;
// How often a connection waiting for its next request checks whether the server stops.
constexpr absl::Duration kIdleSlice = absl::Milliseconds(100);
// The largest request body the dashboard accepts: it reads none (Stop takes its study from
// the query), so a longer one is refused (413) at once rather than read and dropped.
constexpr uint64_t kMaxRequestBodyBytes = 64 << 10;

// What the request this thread serves left of its connection's byte stream. cpp-httplib
// serves a connection's requests one after another on one thread (process_and_close_socket),
// and its error handler sees no connection, so they meet here.
// - request_whole: its line and headers were read and passed the framing checks, and it has
//   no body, so the next request starts right after it;
// - close_after: its answer closes the connection.
thread_local bool request_whole = false;
thread_local bool close_after = false;

// Methods whose body cpp-httplib reads before the routes see the request (detail::
// expect_content); for any other it reads none, so a body sent with one would be taken for the
// connection's next request.
bool BodyIsRead(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" ||
         method == "PRI";
}

// Rounded up, so that a wait that times out has reached its deadline.
int Millis(absl::Duration d) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)))));
}

// Waits until sock is ready for events or the time is up; true when ready (or closed).
bool Wait(socket_t sock, short events, absl::Duration timeout) {
  pollfd fd{sock, events, 0};
  while (true) {
    const int ready = poll(&fd, 1, Millis(timeout));
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0;
  }
}

}  // namespace

std::string ClientGroup(const std::string& ip) {
  in6_addr v6{};
  if (inet_pton(AF_INET6, ip.c_str(), &v6) != 1) return ip;  // IPv4 (or not an address).
  if (IN6_IS_ADDR_V4MAPPED(&v6)) return ip.substr(ip.rfind(':') + 1);
  std::fill(v6.s6_addr + 8, v6.s6_addr + 16, 0);
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(AF_INET6, &v6, text, sizeof(text));
  return absl::StrCat(text, "/64");
}

namespace {

void AddressOf(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST] = "", service[NI_MAXSERV] = "";
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), service,
                  sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = atoi(service);
  }
}

// A connection's socket as cpp-httplib reads and writes it, with a deadline on the reads of
// each request on top of the per-read timeout (which alone a client beats by sending a byte
// before each read times out).
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, absl::Duration read_timeout, absl::Duration write_timeout)
      : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  void set_deadline(absl::Time deadline) { deadline_ = deadline; }
  // Whether a read was refused because the request took too long.
  bool expired() const { return expired_; }

  bool is_readable() const override { return Wait(sock_, POLLIN, ReadWait()); }
  bool is_writable() const override { return Wait(sock_, POLLOUT, write_timeout_); }
  ssize_t read(char* ptr, size_t size) override {
    if (ReadWait() <= absl::ZeroDuration()) {
      expired_ = true;
      return -1;
    }
    if (!is_readable()) {
      expired_ = absl::Now() >= deadline_;
      return -1;
    }
    ssize_t n;
    do {
      n = recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) AddressOf(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) AddressOf(addr, len, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  absl::Duration ReadWait() const { return std::min(read_timeout_, deadline_ - absl::Now()); }

  const socket_t sock_;
  const absl::Duration read_timeout_, write_timeout_;
  absl::Time deadline_ = absl::InfiniteFuture();
  bool expired_ = false;
};

// Why a request's length is ambiguous, or "" when it is not. A proxy in front and this server
// could then split the connection's bytes into different requests (request smuggling):
// cpp-httplib reads a chunked body and ignores Content-Length, reads no body at all for a GET,
// and takes the first of several Content-Length values. RFC 9112 section 6.3.
std::string AmbiguousLength(const httplib::Request& req) {
  // "Transfer-Encoding : chunked" is kept by cpp-httplib under a name with a space, which it
  // then ignores, where a proxy may take it for the real one (RFC 9112 section 5.1).
  for (const auto& [name, value] : req.headers) {
    if (name.find_first_of(" \t") != std::string::npos) {
      return "a header's name may not hold whitespace (none between the name and its colon)";
    }
  }
  const size_t encodings = req.headers.count("Transfer-Encoding");
  const size_t lengths = req.headers.count("Content-Length");
  if (encodings > 0 && lengths > 0) {
    return "a request may not have both Transfer-Encoding and Content-Length";
  }
  if (encodings > 1 ||
      (encodings == 1 && !absl::EqualsIgnoreCase(req.get_header_value("Transfer-Encoding"), "chunked"))) {
    return "Transfer-Encoding: only chunked is accepted";
  }
  if (lengths > 1) return "a request may have one Content-Length only";
  // "+5" or "-1" would be read as numbers by one reader and refused by another.
  if (lengths == 1) {
    const std::string length = req.get_header_value("Content-Length");
    if (length.empty() || !std::all_of(length.begin(), length.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return "Content-Length must be a number of digits only";
    }
  }
  // cpp-httplib would not read it, and serve it as a next request.
  if (!BodyIsRead(req.method) && (encodings > 0 || (lengths == 1 && req.get_header_value("Content-Length") != "0"))) {
    return absl::StrCat("a ", req.method, " request carries no body here");
  }
  return "";
}

// The answer, other than 200, to a request the framing checks let through: 411 for a body of
// unknown length (cpp-httplib would read it until the client closes), 413 for a body longer
// than the dashboard takes (it would read it all to drop it); 0 when neither.
int UnreadableBody(const httplib::Request& req, std::string& why) {
  if (!BodyIsRead(req.method)) return 0;
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    why = absl::StrCat("a ", req.method, " request needs a Content-Length (0 for no body)");
    return 411;
  }
  uint64_t length = 0;
  if (req.has_header("Content-Length") &&
      (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &length) ||
       length > kMaxRequestBodyBytes)) {
    why = absl::StrCat("a request body may hold at most ", kMaxRequestBodyBytes, " bytes");
    return 413;
  }
  return 0;
}

}  // namespace

GuardedServer::GuardedServer(const ConnectionLimits& limits) : limits_(limits) {
  const size_t threads = static_cast<size_t>(limits.max_connections + kSpareThreads);
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  Guard(nullptr);
  // Every error answer comes here before it is written. One to a request not known to have
  // been read to its end (a request line or header cpp-httplib could not parse, 414, 416, a
  // malformed chunked body, the framing checks' refusals, any error to a request with a body)
  // leaves where the next request starts in doubt: the connection closes after it, and says
  // so. Errors the routes answer to a whole request without a body (404, a bad query) keep it.
  httplib::Server::set_error_handler(
      HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!request_whole) {
          close_after = true;
          if (!res.has_header("Connection")) res.set_header("Connection", "close");
        }
        return HandlerResponse::Unhandled;
      }));
}

httplib::Server& GuardedServer::set_pre_routing_handler(HandlerWithResponse handler) {
  Guard(std::move(handler));
  return *this;
}

void GuardedServer::Guard(HandlerWithResponse then) {
  // Runs after the headers are read and before any body is (cpp-httplib reads a body only for
  // the route that takes it); process_and_close_socket closes the connection after the answer,
  // since whatever follows on it cannot be told apart from a body.
  httplib::Server::set_pre_routing_handler(
      [then = std::move(then)](const httplib::Request& req, httplib::Response& res) {
        std::string why = AmbiguousLength(req);
        const int status = why.empty() ? UnreadableBody(req, why) : 400;
        if (status != 0) {
          res.status = status;
          res.set_header("Connection", "close");
          res.set_content(ErrorJson(why), "application/json; charset=utf-8");
          return HandlerResponse::Handled;
        }
        request_whole = !BodyIsRead(req.method);
        return then ? then(req, res) : HandlerResponse::Unhandled;
      });
}

void GuardedServer::WidenBacklog() {
  // listen() again on a listening socket only changes its backlog.
  if (svr_sock_ != INVALID_SOCKET) (void)::listen(svr_sock_, kListenBacklog);
}

void GuardedServer::Refuse(socket_t sock, const std::string& why) {
  const std::string body = ErrorJson(why);
  const std::string answer = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
      "Content-Length: ", body.size(), "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", body);
  // A fresh socket's send buffer takes this at once; a client that does not read loses it.
  (void)send(sock, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(sock, SHUT_WR);
  const absl::Time until = absl::Now() + kRefusalDrain;
  char drop[4096];
  while (absl::Now() < until && Wait(sock, POLLIN, until - absl::Now()) &&
         recv(sock, drop, sizeof(drop), 0) > 0) {
  }
  close(sock);
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  DeadlineStream stream(sock, absl::Seconds(read_timeout_sec_) + absl::Microseconds(read_timeout_usec_),
                        absl::Seconds(write_timeout_sec_) + absl::Microseconds(write_timeout_usec_));
  std::string address;
  int client_port = 0;
  stream.get_remote_ip_and_port(address, client_port);
  const std::string client = ClientGroup(address);
  std::string refusal;
  {
    absl::MutexLock lock(&mutex_);
    if (open_ >= limits_.max_connections) {
      refusal = absl::StrCat("the dashboard already serves ", limits_.max_connections,
                             " connections (--max_connections); try again in a moment");
    } else if (per_client_[client] >= limits_.max_per_client) {
      refusal = absl::StrCat("your address already holds ", limits_.max_per_client,
                             " connections to the dashboard; close some and try again");
    } else {
      ++open_;
      ++per_client_[client];
    }
    if (!refusal.empty() && per_client_[client] == 0) per_client_.erase(client);
  }
  if (!refusal.empty()) {
    Refuse(sock, refusal);
    return false;
  }
  bool ret = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    // The wait for the next request, a slice at a time so that a stopping server does not
    // wait for it.
    const absl::Time idle_until = absl::Now() + limits_.idle_timeout;
    bool ready = false;
    while (!ready && svr_sock_ != INVALID_SOCKET && absl::Now() < idle_until) {
      ready = Wait(sock, POLLIN, std::min(kIdleSlice, idle_until - absl::Now()));
    }
    if (!ready) break;
    stream.set_deadline(absl::Now() + limits_.request_timeout);
    bool closed = false;
    request_whole = close_after = false;
    ret = process_request(stream, /*close_connection=*/left == 1, closed, nullptr);
    // A request cut off at its deadline was answered 400; its client gets no second one. Nor
    // does one answered with an error that leaves the stream in doubt (the error handler).
    if (!ret || closed || close_after || stream.expired()) break;
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  absl::MutexLock lock(&mutex_);
  --open_;
  if (--per_client_[client] == 0) per_client_.erase(client);
  return ret;
}

}  // namespace dhpt::dashboard
