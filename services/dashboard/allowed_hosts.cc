#include "services/dashboard/allowed_hosts.h"

#include <arpa/inet.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace dhpt::dashboard {
namespace {

struct HostPort {
  std::string name;  // Lower case, without a trailing dot or an IPv6 address's brackets.
  std::string port;  // "" when none was given.
  bool bracketed = false;
};

// "name", "name:port", "[v6]" or "[v6]:port"; false for anything else (a bad port included).
bool Split(absl::string_view text, HostPort& out) {
  absl::string_view name = text, port;
  if (absl::ConsumePrefix(&name, "[")) {
    const size_t close = name.find(']');
    if (close == absl::string_view::npos) return false;
    absl::string_view rest = name.substr(close + 1);
    name = name.substr(0, close);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) return false;
    port = rest;
    out.bracketed = true;
  } else if (const size_t colon = name.rfind(':'); colon != absl::string_view::npos) {
    port = name.substr(colon + 1);
    name = name.substr(0, colon);
  }
  if (text.find(':') != absl::string_view::npos && port.empty() && !out.bracketed) return false;
  int number = 0;
  if (!port.empty() && (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535 ||
                        port.find_first_not_of("0123456789") != absl::string_view::npos)) {
    return false;
  }
  absl::ConsumeSuffix(&name, ".");
  if (name.empty()) return false;
  out.name = absl::AsciiStrToLower(name);
  out.port = std::string(port);
  return true;
}

bool IsAddress(const HostPort& host) {
  unsigned char buffer[16];
  if (host.bracketed) return inet_pton(AF_INET6, host.name.c_str(), buffer) == 1;
  return inet_pton(AF_INET, host.name.c_str(), buffer) == 1;
}

}  // namespace

absl::StatusOr<AllowedHosts> AllowedHosts::Parse(const std::vector<std::string>& names) {
  AllowedHosts allowed;
  for (const std::string& name : names) {
    HostPort host;
    if (!Split(name, host) || host.name.find_first_of("/ \t@") != std::string::npos ||
        !IsHostHeaderText(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allowed_hosts: \"", absl::CHexEscape(name),
          "\" is not NAME or NAME:PORT (e.g. dash.lab.local or dash.lab.local:8080)"));
    }
    allowed.entries_.push_back({host.name, host.port});
  }
  return allowed;
}

bool IsHostHeaderText(absl::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

bool AllowedHosts::Allows(absl::string_view host_header) const {
  if (host_header.empty()) return true;
  HostPort host;
  if (!Split(host_header, host)) return false;
  // An address written out is never an attacker's name; localhost resolves here only.
  if (IsAddress(host) || host.name == "localhost") return true;
  for (const Entry& entry : entries_) {
    if (entry.name == host.name && (entry.port.empty() || entry.port == host.port)) return true;
  }
  return false;
}

std::string RefusedHostMessage(absl::string_view host_header) {
  return absl::StrCat(
      "this dashboard does not answer to the name \"", host_header,
      "\": open it by its IP address or localhost, or start it with --allowed_hosts=",
      host_header, " (a name of this dashboard behind a proxy or in DNS)\n");
}

}  // namespace dhpt::dashboard
