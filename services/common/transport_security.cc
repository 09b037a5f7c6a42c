#include "services/common/transport_security.h"

#include <fstream>
#include <sstream>

#include <grpcpp/security/auth_metadata_processor.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/common/status_macros.h"

namespace dhpt {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path));
  }
  return text.str();
}

// Byte comparison whose time does not depend on where the first difference is, so that a
// client cannot find the token by timing refusals.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}

// Runs on gRPC's thread before any handler: a call without a known token never reaches one.
// The header is left to the call (not consumed): CheckRole reads which token it carries.
class BearerTokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenProcessor(std::shared_ptr<const BearerTokens> tokens)
      : tokens_(std::move(tokens)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* /*context*/,
                       OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) override {
    if (const size_t headers = metadata.count("authorization"); headers > 1) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          absl::StrCat("give one authorization header, not ", headers));
    }
    auto it = metadata.find("authorization");
    if (it == metadata.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this scheduler requires a bearer token: give the client "
                          "--auth_token_file (grpcurl: -H 'authorization: Bearer TOKEN')");
    }
    if (tokens_->RoleOf(absl::string_view(it->second.data(), it->second.size())).empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the bearer token is not this scheduler's");
    }
    return grpc::Status::OK;
  }

 private:
  const std::shared_ptr<const BearerTokens> tokens_;
};

}  // namespace

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "auth_token_file"));
  std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--auth_token_file: ", path, " is empty"));
  }
  if (token.size() < kMinTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth_token_file: the token in ", path, " is ", token.size(), " characters; a token "
        "must have at least ", kMinTokenBytes, " to resist guessing (openssl rand -hex 32 > ",
        path, ")"));
  }
  return token;
}

BearerTokens::BearerTokens(std::string user_token, std::string worker_token)
    : user_("Bearer " + std::move(user_token)), worker_("Bearer " + std::move(worker_token)) {}

absl::string_view BearerTokens::RoleOf(absl::string_view authorization) const {
  const bool user = ConstantTimeEquals(authorization, user_);
  const bool worker = ConstantTimeEquals(authorization, worker_);
  return user ? kUserRole : worker ? kWorkerRole : "";
}

absl::StatusOr<ServerSecurity> MakeServerSecurity(const ServerSecurityOptions& options) {
  const bool tls = !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (tls && (options.tls_cert_file.empty() || options.tls_key_file.empty())) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both");
  }
  if (!tls && !options.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError("--tls_client_ca needs TLS: give --tls_cert and --tls_key");
  }
  if (!tls && (!options.token_file.empty() || !options.worker_token_file.empty())) {
    return absl::InvalidArgumentError(
        "--auth_token_file and --worker_token_file need TLS (--tls_cert and --tls_key): over "
        "plaintext a token could be read on the network");
  }
  if (options.token_file.empty() != options.worker_token_file.empty()) {
    return absl::InvalidArgumentError(
        "--auth_token_file (users) and --worker_token_file (workers) go together: users and "
        "workers hold different tokens, so that neither can act as the other");
  }
  if (!tls) return ServerSecurity{.credentials = grpc::InsecureServerCredentials()};

  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadFile(options.tls_cert_file, "tls_cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadFile(options.tls_key_file, "tls_key"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.tls_client_ca_file, "tls_client_ca"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  ServerSecurity security{.credentials = grpc::SslServerCredentials(ssl)};
  if (!options.token_file.empty()) {
    ASSIGN_OR_RETURN(std::string user_token, ReadTokenFile(options.token_file));
    ASSIGN_OR_RETURN(std::string worker_token, ReadTokenFile(options.worker_token_file));
    if (user_token == worker_token) {
      return absl::InvalidArgumentError(
          "--auth_token_file and --worker_token_file hold the same token; give workers their "
          "own (e.g. openssl rand -hex 32 > worker.token)");
    }
    security.tokens =
        std::make_shared<const BearerTokens>(std::move(user_token), std::move(worker_token));
    security.credentials->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenProcessor>(security.tokens));
  }
  return security;
}

absl::Status CheckRole(const BearerTokens* tokens, const grpc::ServerContextBase& context,
                       absl::string_view role) {
  if (tokens == nullptr) return absl::OkStatus();
  // The processor let the call in with exactly one known token; a missing header here would
  // be a call it never saw, refused all the same.
  const auto header = context.client_metadata().find("authorization");
  const absl::string_view given =
      header == context.client_metadata().end()
          ? ""
          : tokens->RoleOf(absl::string_view(header->second.data(), header->second.size()));
  if (given == role) return absl::OkStatus();
  return absl::PermissionDeniedError(
      role == kWorkerRole
          ? "only workers may connect here: this is a user's token; start the worker with the "
            "scheduler's worker token (--auth_token_file=WORKER_TOKEN_FILE)"
          : "this is a worker's token; users call with the scheduler's user token");
}

void ChannelSecurity::ApplyTo(grpc::ChannelArguments& arguments) const {
  if (!server_name_override.empty()) arguments.SetSslTargetNameOverride(server_name_override);
}

absl::StatusOr<ChannelSecurity> MakeChannelSecurity(const ClientSecurityOptions& options) {
  ChannelSecurity security;
  const bool tls = !options.tls_ca_file.empty();
  if (!tls && (!options.tls_cert_file.empty() || !options.tls_key_file.empty() ||
               !options.tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_server_name need TLS: give --tls_ca, the CA that "
        "signed the scheduler's certificate");
  }
  if (!tls && !options.token_file.empty()) {
    return absl::InvalidArgumentError(
        "--auth_token_file needs TLS: give --tls_ca (a token is never sent in plaintext)");
  }
  if (!tls) return security;
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together: give both");
  }
  grpc::SslCredentialsOptions ssl;
  ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.tls_ca_file, "tls_ca"));
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.tls_cert_file, "tls_cert"));
    ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.tls_key_file, "tls_key"));
  }
  security.credentials = grpc::SslCredentials(ssl);
  if (!options.token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token, ReadTokenFile(options.token_file));
    security.credentials = grpc::CompositeChannelCredentials(
        security.credentials, grpc::AccessTokenCredentials(token));
  }
  security.server_name_override = options.tls_server_name;
  return security;
}

}  // namespace dhpt
