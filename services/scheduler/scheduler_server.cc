#include "services/scheduler/scheduler_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.pb.h"
#include "services/common/status_macros.h"

namespace dhpt::scheduler {

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    SchedulerServerOptions options, StudyStore* store) {
  std::unique_ptr<SchedulerServer> server(new SchedulerServer());
  server->core_ = std::make_unique<SchedulerCore>(store, options.core);
  RETURN_IF_ERROR(server->core_->Recover());
  server->study_service_ =
      std::make_unique<StudyServiceImpl>(server->core_.get(), options.tokens);
  server->worker_service_ =
      std::make_unique<WorkerServiceImpl>(server->core_.get(), options.worker_outbox,
                                          options.worker_stream_nice, options.tokens);

  grpc::EnableDefaultHealthCheckService(true);
  // gRPC serves health from upb, which tells protobuf nothing; reflection finds
  // grpc.health.v1 only in protobuf's generated pool (for grpcurl's Health/Check). Naming a
  // descriptor keeps the linker from dropping health.pb.o out of the static library, and so
  // keeps the static initialiser that registers it.
  grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      options.listen_address,
      options.credentials ? options.credentials : grpc::InsecureServerCredentials(),
      &server->port_);
  builder.RegisterService(server->study_service_.get());
  builder.RegisterService(server->worker_service_.get());
  ApplyKeepalive(options.keepalive, builder);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // A second scheduler on the same port must fail, not share it (Linux would split the
  // connections between the two).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  // The user calls' own queue (study_service.h): they never wait behind the worker streams.
  std::unique_ptr<grpc::ServerCompletionQueue> user_calls = builder.AddCompletionQueue();
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    // gRPC logs its own reason just before (a bad certificate or key, a busy port).
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen_address,
        options.credentials ? ": the address is in use or invalid, or the TLS certificate and "
                              "key were refused (is --tls_cert the certificate and --tls_key its "
                              "key?)"
                            : ": the address is in use or invalid"));
  }
  server->study_service_->Start(std::move(user_calls));
  grpc::HealthCheckServiceInterface* health = server->server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(v1::StudyService::service_full_name(), true);
  health->SetServingStatus(v1::WorkerService::service_full_name(), true);
  server->lease_thread_ = std::thread([s = server.get()] { s->ExpireLeasesUntilShutdown(); });
  return server;
}

void SchedulerServer::ExpireLeasesUntilShutdown() {
  const absl::Duration tick = core_->heartbeat_interval() / 2;
  while (!stopping_.WaitForNotificationWithTimeout(tick)) {
    core_->ExpireLeases();
    core_->ExpireTrials();
    core_->TrimFreedReplyMemory();
    worker_service_->CloseSilentSince(absl::Now() - core_->lease());
  }
}

void SchedulerServer::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;  // Never started: nothing to stop.
  shut_down_ = true;
  stopping_.Notify();
  if (lease_thread_.joinable()) lease_thread_.join();
  // One grace for the whole stop: the calls in flight end and the callers are answered first,
  // then gRPC's Shutdown cancels what is left at the same deadline.
  const absl::Time deadline = absl::Now() + grace;
  server_->GetHealthCheckService()->Shutdown();
  core_->Shutdown("the scheduler is shutting down");
  worker_service_->CloseUnintroduced();
  study_service_->Refuse(deadline);
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
  core_->LogWorkersNotLogged();  // The workers' streams have all ended, with their lines.
  study_service_->Stop();  // Its queue may end only after the server's Shutdown.
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

}  // namespace dhpt::scheduler
