#include "services/common/client_security_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_ca, "",
          "connect with TLS, trusting this CA (PEM) for the scheduler's certificate");
ABSL_FLAG(std::string, tls_cert, "",
          "with --tls_ca: this client's certificate (PEM), for a scheduler that wants mutual TLS");
ABSL_FLAG(std::string, tls_key, "", "with --tls_cert: its private key (PEM)");
ABSL_FLAG(std::string, tls_server_name, "",
          "with --tls_ca: the name the scheduler's certificate must carry, when it is not the "
          "host of --scheduler (an IP address, a port-forward)");
ABSL_FLAG(std::string, auth_token_file, "",
          "with --tls_ca: a file holding the scheduler's bearer token, sent with every call");

namespace dhpt {

std::vector<absl::string_view> ClientSecurityFlagNames() {
  return {"tls_ca", "tls_cert", "tls_key", "tls_server_name", "auth_token_file"};
}

ClientSecurityOptions ClientSecurityFromFlags() {
  return {.tls_ca_file = absl::GetFlag(FLAGS_tls_ca),
          .tls_cert_file = absl::GetFlag(FLAGS_tls_cert),
          .tls_key_file = absl::GetFlag(FLAGS_tls_key),
          .tls_server_name = absl::GetFlag(FLAGS_tls_server_name),
          .token_file = absl::GetFlag(FLAGS_auth_token_file)};
}

}  // namespace dhpt
