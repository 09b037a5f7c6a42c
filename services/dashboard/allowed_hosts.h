#pragma once

// Which Host headers the dashboard answers. A page on any web site can re-point its own name
// at 127.0.0.1 (DNS rebinding) and so read a dashboard there as its own origin; its requests
// still carry its own name in Host. So the dashboard answers only names that cannot be an
// attacker's: an IP address written out, localhost, and the names the operator allows
// (--allowed_hosts, for a proxy, an Ingress or a Kubernetes Service in front).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dhpt::dashboard {

class AllowedHosts {
 public:
  // `names`: NAME or NAME:PORT each (a name without a port is allowed on any port: a proxy's
  // port is not the dashboard's). InvalidArgument names an entry that is not one.
  static absl::StatusOr<AllowedHosts> Parse(const std::vector<std::string>& names);
  AllowedHosts() = default;

  // Whether a request with this Host header is answered. A missing Host (HTTP/1.0) is: a
  // browser always sends one.
  bool Allows(absl::string_view host_header) const;

 private:
  struct Entry {
    std::string name;  // Lower case, without a trailing dot.
    std::string port;  // "" = any.
  };
  std::vector<Entry> entries_;
};

// The 421 answer's text to a refused Host.
std::string RefusedHostMessage(absl::string_view host_header);

// Whether `text` can be a Host header's value (and an --allowed_hosts entry's): not empty, no
// space or control byte. RFC 9112 answers a request without one, or with two, 400.
bool IsHostHeaderText(absl::string_view text);

}  // namespace dhpt::dashboard
