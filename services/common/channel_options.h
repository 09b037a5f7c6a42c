#pragma once

// One keepalive policy for both ends of every DHPT connection: the server must permit the
// pings the client sends, or it answers GOAWAY "too_many_pings", so both sides read it here.

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

namespace dhpt {

// The largest reply the scheduler sends and its clients read.
inline constexpr int kMaxReplyBytes = 256 << 20;

struct KeepaliveOptions {
  int ping_interval_ms = 10'000;
  int ping_timeout_ms = 5'000;
  // Fastest client ping rate the server tolerates.
  int min_ping_interval_ms = 5'000;
};

void ApplyKeepalive(const KeepaliveOptions& options, grpc::ServerBuilder& builder);
grpc::ChannelArguments ClientChannelArguments(const KeepaliveOptions& options);

}  // namespace dhpt
