#pragma once

// TLS and bearer tokens on DHPT's connections. The scheduler serves TLS with its certificate
// (and, for mutual TLS, asks clients for one signed by a CA it trusts); workers and the CLI
// verify it against a CA and may present their own. A bearer token, when set, is required on
// every call (gRPC's AuthMetadataProcessor answers UNAUTHENTICATED before any handler runs)
// and is sent by clients as call credentials. Users and workers hold different tokens: the
// processor records which one a call carried (kRoleProperty) and each service admits only its
// own role, so a user's token cannot connect as a worker and a worker's cannot create studies. Tokens need TLS: over plaintext anyone on the
// path could read and replay them, and gRPC itself refuses to send call credentials there.
// Without any of it, connections are plaintext, as on a trusted cluster network.

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dhpt {

// File paths; empty means not used.
struct ServerSecurityOptions {
  std::string tls_cert_file;       // PEM certificate chain; with tls_key_file, turns TLS on.
  std::string tls_key_file;
  std::string tls_client_ca_file;  // Mutual TLS: clients must present a certificate it signed.
  std::string token_file;          // Users' calls carry "authorization: Bearer <token>".
  std::string worker_token_file;   // Workers' calls carry this one; required with token_file.
};

// The AuthContext property naming the role whose token a call carried.
inline constexpr char kRoleProperty[] = "dhpt_role";
inline constexpr char kUserRole[] = "user";
inline constexpr char kWorkerRole[] = "worker";

// OK when the call may act as `role`: no tokens are in use (kRoleProperty unset), or it
// carried that role's token; PERMISSION_DENIED naming the right token otherwise.
absl::Status CheckRole(const grpc::AuthContext* context, absl::string_view role);

struct ClientSecurityOptions {
  std::string tls_ca_file;      // Turns TLS on: the scheduler's certificate must chain to it.
  std::string tls_cert_file;    // Mutual TLS: this client's certificate and key.
  std::string tls_key_file;
  std::string tls_server_name;  // The name to verify instead of the address's host.
  std::string token_file;
};

// INVALID_ARGUMENT naming the flag for unreadable files, half-given pairs and a token
// without TLS.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerSecurityOptions& options);

struct ChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  std::string server_name_override;  // Applied by ApplyTo.
  void ApplyTo(grpc::ChannelArguments& arguments) const;
};
absl::StatusOr<ChannelSecurity> MakeChannelSecurity(const ClientSecurityOptions& options);

// The smallest token accepted: shorter ones could be guessed by trying.
inline constexpr size_t kMinTokenBytes = 16;
// The token in `path`, surrounding white space removed; at least kMinTokenBytes.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace dhpt
