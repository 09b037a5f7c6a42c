#pragma once

// TLS and bearer tokens on DHPT's connections. The scheduler serves TLS with its certificate
// (and, for mutual TLS, asks clients for one signed by a CA it trusts); workers and the CLI
// verify it against a CA and may present their own. A bearer token, when set, is required on
// every call (gRPC's AuthMetadataProcessor answers UNAUTHENTICATED before any handler runs)
// and is sent by clients as call credentials. Users and workers hold different tokens, and each
// service admits only its own role (CheckRole), so a user's token cannot connect as a worker and
// a worker's cannot create studies. Tokens need TLS: over plaintext anyone on the path could read
// and replay them, and gRPC itself refuses to send call credentials there.
// Without any of it, connections are plaintext, as on a trusted cluster network.

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
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

inline constexpr char kUserRole[] = "user";
inline constexpr char kWorkerRole[] = "worker";

// A scheduler's two bearer tokens and the role each grants.
class BearerTokens {
 public:
  BearerTokens(std::string user_token, std::string worker_token);
  // kUserRole or kWorkerRole for an "authorization" value that carries that role's token, ""
  // for any other. Both comparisons always run, in constant time, so timing tells nothing.
  absl::string_view RoleOf(absl::string_view authorization) const;

 private:
  const std::string user_;    // "Bearer <token>", as the header carries it.
  const std::string worker_;
};

// OK when the call may act as `role`: `tokens` is null (none in use), or the call's own
// authorization header carries that role's token; PERMISSION_DENIED naming the right token
// otherwise. Read from the call's metadata, never from its AuthContext: gRPC gives every call of
// a connection the connection's one AuthContext, so a role recorded there for one call was read
// by every later call on it (a worker's token passed as a user's after one user call).
absl::Status CheckRole(const BearerTokens* tokens, const grpc::ServerContextBase& context,
                       absl::string_view role);

// What a scheduler serves with: the credentials, and the tokens its services check (null when
// none are in use).
struct ServerSecurity {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::shared_ptr<const BearerTokens> tokens;
};

struct ClientSecurityOptions {
  std::string tls_ca_file;      // Turns TLS on: the scheduler's certificate must chain to it.
  std::string tls_cert_file;    // Mutual TLS: this client's certificate and key.
  std::string tls_key_file;
  std::string tls_server_name;  // The name to verify instead of the address's host.
  std::string token_file;
};

// INVALID_ARGUMENT naming the flag for unreadable files, half-given pairs and a token
// without TLS.
absl::StatusOr<ServerSecurity> MakeServerSecurity(const ServerSecurityOptions& options);

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
