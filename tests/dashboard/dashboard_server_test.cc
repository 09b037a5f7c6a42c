// The dashboard's HTTP server against clients that send slowly, over real sockets on
// loopback: they cannot hold it, and a normal request is answered while they try.
#include "services/dashboard/dashboard_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "services/dashboard/http_server.h"

namespace dhpt::dashboard {
namespace {

// A TCP connection to 127.0.0.1:port from the loopback address `from` (127.0.0.2 is another
// client to the server than 127.0.0.1).
int Connect(const char* from, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, from, &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  return fd;
}

// What the server sent on fd until it closed it, or nullopt-like "" with timed_out set.
std::string ReadToClose(int fd, absl::Time deadline, bool& timed_out) {
  std::string got;
  char buffer[4096];
  timed_out = false;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int wait = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait <= 0 || poll(&p, 1, wait) <= 0) {
      timed_out = true;
      return got;
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) return got;
    got.append(buffer, static_cast<size_t>(n));
  }
}

TEST(DashboardServerTest, ClientsTricklingHeadersNeitherHoldTheServerNorBlockOthers) {
  DashboardOptions options;
  options.scheduler = "127.0.0.1:1";  // Nothing here asks the scheduler.
  options.connections.request_timeout = absl::Seconds(2);  // 10 s by default; a shorter test.
  auto server = DashboardServer::Start(options, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  // More slow clients than one address may hold (and than cpp-httplib's 40 threads before),
  // all from 127.0.0.2, each sending a header line every 300 ms, as a slow-request attack does.
  constexpr int kSlow = 80;
  const int held = options.connections.max_per_client;
  std::vector<int> slow;
  std::vector<absl::Time> opened;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = Connect("127.0.0.2", port);
    ASSERT_GE(fd, 0) << "connect " << i;
    const std::string line = "GET / HTTP/1.1\r\n";
    ASSERT_EQ(send(fd, line.data(), line.size(), MSG_NOSIGNAL), static_cast<ssize_t>(line.size()));
    slow.push_back(fd);
    opened.push_back(absl::Now());
  }
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    while (trickling) {
      for (int fd : slow) (void)send(fd, "X-a: b\r\n", 8, MSG_NOSIGNAL | MSG_DONTWAIT);
      absl::SleepFor(absl::Milliseconds(300));  // The attack's pace, not a synchronisation.
    }
  });

  // A normal request from another address is answered while they trickle.
  const absl::Time asked = absl::Now();
  const int fd = Connect("127.0.0.1", port);
  ASSERT_GE(fd, 0);
  const std::string request = "GET /assets/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  bool timed_out = false;
  const std::string answer = ReadToClose(fd, asked + absl::Seconds(2), timed_out);
  close(fd);
  EXPECT_FALSE(timed_out) << "a normal request was not answered within 2 s";
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer.substr(0, 200);

  // The address's connections past its share were refused at once with 503; the others were
  // closed by the server once their request had taken longer than its timeout.
  int refused = 0, cut = 0;
  for (int i = 0; i < kSlow; ++i) {
    const std::string got =
        ReadToClose(slow[i], opened[i] + options.connections.request_timeout + absl::Seconds(3), timed_out);
    EXPECT_FALSE(timed_out) << "slow connection " << i << " was still held after its request's timeout";
    if (absl::StartsWith(got, "HTTP/1.1 503")) {
      ++refused;
    } else {
      ++cut;
    }
  }
  trickling = false;
  trickle.join();
  for (int s : slow) close(s);
  EXPECT_EQ(refused, kSlow - held);
  EXPECT_EQ(cut, held);
}

// Reads fd until `text` has come or the deadline passed; what came.
std::string ReadUntil(int fd, const std::string& text, absl::Time deadline) {
  std::string got;
  char buffer[4096];
  while (got.find(text) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    const int wait = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (wait <= 0 || poll(&p, 1, wait) <= 0) break;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// A live page's event stream opened from `from`: its socket, and the answer's start in `head`
// (a 200's first event, "retry", or a refusal's whole answer).
int OpenLivePage(const char* from, int port, std::string& head) {
  const int fd = Connect(from, port);
  const std::string request =
      absl::StrCat("GET /api/events?study=s HTTP/1.1\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  (void)send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  head = ReadUntil(fd, "\r\n\r\n", deadline);
  // A stream's first event, or the end of a refusal's JSON (its connection stays open).
  const std::string last = absl::StartsWith(head, "HTTP/1.1 200") ? "retry: 1000" : "}";
  if (head.find(last) == std::string::npos) head += ReadUntil(fd, last, deadline);
  return fd;
}

// Hostile review: 32 event streams from one address, opened and never read, held every live
// page of the dashboard for as long as they stayed open. Now an address holds its share, and
// once all are taken the address holding the most gives up its oldest (the page reconnects
// and resumes after its last event) to one holding fewer.
TEST(DashboardServerTest, NoAddressCanHoldEveryLivePage) {
  DashboardOptions options;
  options.scheduler = "127.0.0.1:1";  // A watch that waits for it keeps its stream open.
  options.max_event_streams = 4;
  options.max_event_streams_per_client = 2;
  auto server = DashboardServer::Start(options, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::string head;
  std::vector<int> pages;
  for (const char* from : {"127.0.0.2", "127.0.0.2"}) {
    pages.push_back(OpenLivePage(from, port, head));
    ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << head;
  }
  const int refused = OpenLivePage("127.0.0.2", port, head);
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 503")) << head;
  EXPECT_NE(head.find("your address already holds 2 live pages"), std::string::npos) << head;
  close(refused);
  for (const char* from : {"127.0.0.3", "127.0.0.3"}) {
    pages.push_back(OpenLivePage(from, port, head));
    ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << head;
  }
  // All four taken: a fifth address's page gets one, and 127.0.0.2's oldest page is ended
  // (its chunked answer closed: the browser reconnects to it).
  pages.push_back(OpenLivePage("127.0.0.4", port, head));
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << head;
  const std::string end = "0\r\n\r\n";
  EXPECT_NE(ReadUntil(pages[0], end, absl::Now() + absl::Seconds(5)).find(end), std::string::npos);
  // Then 127.0.0.3 holds the most; when every address holds one, a page is refused.
  pages.push_back(OpenLivePage("127.0.0.5", port, head));
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << head;
  EXPECT_NE(ReadUntil(pages[2], end, absl::Now() + absl::Seconds(5)).find(end), std::string::npos);
  const int full = OpenLivePage("127.0.0.6", port, head);
  EXPECT_TRUE(absl::StartsWith(head, "HTTP/1.1 503")) << head;
  EXPECT_NE(head.find("already serves 4 live pages"), std::string::npos) << head;
  close(full);
  // The others still stream.
  for (int i : {1, 3, 4, 5}) {
    pollfd p{pages[i], POLLIN, 0};
    char byte;
    EXPECT_FALSE(poll(&p, 1, 0) > 0 && recv(pages[i], &byte, 1, MSG_PEEK) == 0) << i;
  }
  for (int fd : pages) close(fd);
}

TEST(DashboardServerTest, AnIpv6ClientIsCountedByItsSlash64) {
  EXPECT_EQ(ClientGroup("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientGroup("2001:db8:1:2:ffff::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientGroup("::ffff:192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(ClientGroup("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(ClientGroup("::1"), "::/64");
}

// A request whose length two readers would take differently is refused with 400 and its
// connection closed, so that what follows it (here a second request, "smuggled" in what a proxy
// in front would have taken for the body) is never served (RFC 9112 section 6.3).
TEST(DashboardServerTest, RequestsWithAnAmbiguousLengthAreRefusedAndTheirConnectionClosed) {
  DashboardOptions options;
  options.scheduler = "127.0.0.1:1";  // Nothing here asks the scheduler.
  auto server = DashboardServer::Start(options, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string smuggled = "GET /assets/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
       "Content-Length: 5\r\n\r\n0\r\n\r\n",
       "both Transfer-Encoding and Content-Length"},
      {"GET /api/studies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n"
       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       "both Transfer-Encoding and Content-Length"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
       "0\r\n\r\n",
       "only chunked"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nContent-Length: 2\r\n\r\n"
       "ab",
       "one Content-Length only"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding : chunked\r\n\r\n"
       "0\r\n\r\n",
       "may not hold whitespace"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: +2\r\n\r\nab",
       "digits only"},
  };
  for (const auto& [request, why] : cases) {
    SCOPED_TRACE(request);
    const int fd = Connect("127.0.0.1", (*server)->port());
    ASSERT_GE(fd, 0);
    const std::string sent = request + smuggled;
    ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
    bool timed_out = false;
    const std::string answer = ReadToClose(fd, absl::Now() + absl::Seconds(3), timed_out);
    close(fd);
    EXPECT_FALSE(timed_out) << "the connection was kept open after the refusal";
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400")) << answer.substr(0, 200);
    EXPECT_TRUE(absl::StrContains(answer, why)) << answer;
    // One answer only: the request after it was not served.
    EXPECT_EQ(answer.find("HTTP/1.1", 1), std::string::npos) << answer;
  }
  // A request with one of them is served as before.
  const int fd = Connect("127.0.0.1", (*server)->port());
  ASSERT_GE(fd, 0);
  const std::string normal =
      "POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nab";
  ASSERT_EQ(send(fd, normal.data(), normal.size(), MSG_NOSIGNAL), static_cast<ssize_t>(normal.size()));
  bool timed_out = false;
  const std::string answer = ReadToClose(fd, absl::Now() + absl::Seconds(3), timed_out);
  close(fd);
  EXPECT_FALSE(timed_out);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 403")) << answer.substr(0, 200);  // Read-only.
}

// An error answer to a request whose end is in doubt (a request line that does not parse, a
// URI too long, a malformed chunked body, a body of unknown or too great length, a body on a
// GET that would not be read) closes the connection at once, so that nothing after it (here a
// second request) is served as a request; an error to a whole request keeps it.
TEST(DashboardServerTest, ErrorsThatLeaveTheRequestStreamInDoubtCloseTheConnectionAtOnce) {
  DashboardOptions options;
  options.scheduler = "127.0.0.1:1";  // Nothing here asks the scheduler.
  auto server = DashboardServer::Start(options, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string next = "GET /assets/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const struct {
    std::string request;
    std::string status;
  } cases[] = {
      {"GET /api/studies\r\nHost: 127.0.0.1\r\n\r\n", "400"},
      {"GET /api/studies HTTP/1.1 extra\r\nHost: 127.0.0.1\r\n\r\n", "400"},
      {"BREW /api/studies HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "400"},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "414"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
       "zz\r\n",
       "400"},
      // Without a length cpp-httplib read the body until the client closed (here until the
      // request's 10 s deadline); a long one it read whole to drop it.
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "411"},
      {"POST /api/stop?study=s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n", "413"},
      // cpp-httplib reads no GET body: this one was served as the next request.
      {"GET /assets/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
           std::to_string(next.size()) + "\r\n\r\n",
       "400"},
  };
  for (const auto& [request, status] : cases) {
    SCOPED_TRACE(request.substr(0, 80));
    const int fd = Connect("127.0.0.1", (*server)->port());
    ASSERT_GE(fd, 0);
    const std::string sent = request + next;
    ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
    bool timed_out = false;
    // Well before the request deadline (10 s), which would close it anyway.
    const std::string answer = ReadToClose(fd, absl::Now() + absl::Seconds(5), timed_out);
    close(fd);
    EXPECT_FALSE(timed_out) << "the connection was kept open after: " << answer.substr(0, 200);
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 " + status)) << answer.substr(0, 200);
    EXPECT_TRUE(absl::StrContains(answer, "Connection: close")) << answer.substr(0, 400);
    EXPECT_EQ(answer.find("HTTP/1.1", 1), std::string::npos) << "served after it: " << answer;
  }
  // An error to a whole request without a body keeps the connection: both are answered.
  const int fd = Connect("127.0.0.1", (*server)->port());
  ASSERT_GE(fd, 0);
  const std::string sent = "GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                           "GET /assets/app.css HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
  bool timed_out = false;
  const std::string answer = ReadToClose(fd, absl::Now() + absl::Seconds(5), timed_out);
  close(fd);
  EXPECT_FALSE(timed_out);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 404")) << answer.substr(0, 200);
  EXPECT_NE(answer.find("HTTP/1.1 200", 1), std::string::npos) << answer.substr(0, 400);
}

// A web page that re-points its own name at the dashboard (DNS rebinding) sends that name as
// Host: it is refused before anything is read or stopped; the names the dashboard answers to
// (an address, localhost, --allowed_hosts) are served.
TEST(DashboardServerTest, RequestsNamingAnotherHostAreRefusedWith421) {
  DashboardOptions options;
  options.scheduler = "127.0.0.1:1";  // Nothing here reaches the scheduler.
  options.allow_stop = true;
  auto allowed = AllowedHosts::Parse({"dash.lab.local"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  options.allowed_hosts = *allowed;
  auto server = DashboardServer::Start(options, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = std::to_string((*server)->port());
  auto ask = [&](const std::string& request) {
    const int fd = Connect("127.0.0.1", (*server)->port());
    EXPECT_GE(fd, 0);
    EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    bool timed_out = false;
    const std::string answer = ReadToClose(fd, absl::Now() + absl::Seconds(5), timed_out);
    close(fd);
    EXPECT_FALSE(timed_out);
    return answer;
  };
  for (const std::string& request :
       {"GET /api/studies HTTP/1.1\r\nHost: evil.example:" + port + "\r\nConnection: close\r\n\r\n",
        "POST /api/stop?study=s HTTP/1.1\r\nHost: evil.example:" + port +
            "\r\nX-DHPT-Confirm: stop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"}) {
    SCOPED_TRACE(request);
    const std::string answer = ask(request);
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 421")) << answer.substr(0, 200);
    EXPECT_TRUE(absl::StrContains(answer, "--allowed_hosts=evil.example:" + port)) << answer;
  }
  for (const std::string& host : {"127.0.0.1:" + port, "localhost:" + port, std::string("dash.lab.local")}) {
    SCOPED_TRACE(host);
    const std::string answer =
        ask("GET /assets/app.css HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer.substr(0, 200);
  }
  // No Host, an empty one, two (the first was read: hostile review) or one with a control
  // byte: 400, as RFC 9112 has it, before anything is read or stopped.
  for (const std::string& hosts :
       {std::string(""), std::string("Host: \r\n"),
        std::string("Host: 127.0.0.1\r\nHost: evil.example\r\n"),
        std::string("Host: localhost\x01" "evil\r\n")}) {
    SCOPED_TRACE(hosts);
    const std::string answer = ask("POST /api/stop?study=s HTTP/1.1\r\n" + hosts +
                                   "X-DHPT-Confirm: stop\r\nContent-Length: 0\r\n"
                                   "Connection: close\r\n\r\n");
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 400")) << answer.substr(0, 200);
  }
}

}  // namespace
}  // namespace dhpt::dashboard
