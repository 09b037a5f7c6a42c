#include "services/common/channel_options.h"

namespace dhpt {

void ApplyKeepalive(const KeepaliveOptions& options, grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options.ping_interval_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.ping_timeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             options.min_ping_interval_ms);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

grpc::ChannelArguments ClientChannelArguments(const KeepaliveOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, options.ping_interval_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options.ping_timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnects are ours (exponential backoff with jitter in the worker); keep gRPC's short.
  // The first retry comes after 100 ms. Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes
  // that as the least time a connection attempt is given, and 100 ms is missed under load (a
  // TLS handshake on a busy Pi), which failed calls with UNAVAILABLE while the scheduler was up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2'000);
  // As large as the scheduler may send (a long study's ListTrials), not gRPC's default 4 MiB.
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  return args;
}

}  // namespace dhpt
