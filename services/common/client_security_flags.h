#pragma once

// The flags every client binary (workers, the CLI) shares for reaching a scheduler that
// serves TLS or wants a token: --tls_ca, --tls_cert, --tls_key, --tls_server_name,
// --auth_token_file (each also DHPT_<FLAG>).

#include <vector>

#include "absl/strings/string_view.h"
#include "services/common/transport_security.h"

namespace dhpt {

// For ApplyEnvironmentToFlags.
std::vector<absl::string_view> ClientSecurityFlagNames();
ClientSecurityOptions ClientSecurityFromFlags();

}  // namespace dhpt
