#include "services/scheduler/study_service.h"

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/status_macros.h"
#include "services/common/transport_security.h"
#include "services/scheduler/watch_study_reactor.h"

namespace dhpt::scheduler {
namespace {

// Copies an OK result into the response and finishes the call with the status.
template <typename T>
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                absl::StatusOr<T> result, T* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

// Every StudyService call runs only for a user's token (when tokens are in use); `compute`
// runs after the check, so a worker's token reads nothing.
template <typename T, typename Compute>
grpc::ServerUnaryReactor* Authorized(grpc::CallbackServerContext* context, T* response,
                                     Compute compute) {
  const absl::Status allowed = CheckRole(context->auth_context().get(), kUserRole);
  return Reply(context, allowed.ok() ? absl::StatusOr<T>(compute()) : absl::StatusOr<T>(allowed),
               response);
}

// A reply that holds its page's share of the reply budget until gRPC is done with it; the
// response's messages are freed then too, not whenever the call object goes.
template <typename Response>
class LeasedReplyReactor : public grpc::ServerUnaryReactor {
 public:
  LeasedReplyReactor(Response* response, ReplyBudget::Lease lease)
      : response_(response), lease_(std::move(lease)) {}
  void OnDone() override {
    Response().Swap(response_);  // The temporary frees the page's messages.
    delete this;                 // And the lease goes back to the budget.
  }

 private:
  Response* const response_;
  ReplyBudget::Lease lease_;
};

// Like Authorized, for a page: `compute` returns the response and its lease.
template <typename Response, typename Compute>
grpc::ServerUnaryReactor* AuthorizedPage(grpc::CallbackServerContext* context,
                                         Response* response, Compute compute) {
  const absl::Status allowed = CheckRole(context->auth_context().get(), kUserRole);
  if (!allowed.ok()) return Reply(context, absl::StatusOr<Response>(allowed), response);
  ReplyBudget::Lease lease;
  absl::StatusOr<Response> result = compute(lease);
  auto* reactor = new LeasedReplyReactor<Response>(response, std::move(lease));
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* StudyServiceImpl::CreateStudy(grpc::CallbackServerContext* context,
                                                        const v1::StudySpec* request,
                                                        v1::Study* response) {
  return Authorized(context, response, [&] { return core_->CreateStudy(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetStudy(grpc::CallbackServerContext* context,
                                                     const v1::GetStudyRequest* request,
                                                     v1::Study* response) {
  return Authorized(context, response, [&] { return core_->GetStudy(request->name()); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListStudies(grpc::CallbackServerContext* context,
                                                        const v1::ListStudiesRequest* request,
                                                        v1::ListStudiesResponse* response) {
  return AuthorizedPage(context, response,
                        [&](ReplyBudget::Lease& lease) -> absl::StatusOr<v1::ListStudiesResponse> {
    ASSIGN_OR_RETURN(ListPage<v1::Study> page,
                     core_->ListStudies(request->page_size(), request->page_token()));
    lease = std::move(page.lease);
    v1::ListStudiesResponse out;
    for (v1::Study& study : page.items) *out.add_studies() = std::move(study);
    out.set_next_page_token(std::move(page.next_page_token));
    return out;
  });
}

grpc::ServerUnaryReactor* StudyServiceImpl::DeleteStudy(grpc::CallbackServerContext* context,
                                                        const v1::DeleteStudyRequest* request,
                                                        google::protobuf::Empty* response) {
  return Authorized(context, response, [&]() -> absl::StatusOr<google::protobuf::Empty> {
    RETURN_IF_ERROR(core_->DeleteStudy(request->name(), request->force()));
    return google::protobuf::Empty();
  });
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                        const v1::ListWorkersRequest* request,
                                                        v1::ListWorkersResponse* response) {
  return Authorized(context, response, [&] {
    v1::ListWorkersResponse out;
    for (v1::Worker& worker : core_->ListWorkers()) *out.add_workers() = std::move(worker);
    return absl::StatusOr<v1::ListWorkersResponse>(std::move(out));
  });
}

grpc::ServerUnaryReactor* StudyServiceImpl::StopStudy(grpc::CallbackServerContext* context,
                                                      const v1::StopStudyRequest* request,
                                                      v1::Study* response) {
  return Authorized(context, response, [&] { return core_->StopStudy(request->name()); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::UpdateStudy(grpc::CallbackServerContext* context,
                                                        const v1::UpdateStudyRequest* request,
                                                        v1::Study* response) {
  return Authorized(context, response, [&] { return core_->UpdateStudy(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetParamImportances(
    grpc::CallbackServerContext* context, const v1::GetParamImportancesRequest* request,
    v1::GetParamImportancesResponse* response) {
  return Authorized(context, response, [&] { return core_->GetParamImportances(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListTrials(grpc::CallbackServerContext* context,
                                                       const v1::ListTrialsRequest* request,
                                                       v1::ListTrialsResponse* response) {
  return AuthorizedPage(context, response,
                        [&](ReplyBudget::Lease& lease) -> absl::StatusOr<v1::ListTrialsResponse> {
    // With curves a page is short: each trial may carry thousands of values.
    const int page_size = request->intermediate_values()
                              ? (request->page_size() == 0
                                     ? kMaxCurvePageSize
                                     : std::min(request->page_size(), kMaxCurvePageSize))
                              : request->page_size();
    if (request->values_only() && request->intermediate_values()) {
      return absl::InvalidArgumentError(
          "values_only lists no more than each trial's values; ask for intermediate_values without it");
    }
    ASSIGN_OR_RETURN(ListPage<v1::Trial> page,
                     core_->ListTrials(request->study(), request->state(), page_size,
                                       request->page_token(), request->values_only()));
    lease = std::move(page.lease);
    v1::ListTrialsResponse out;
    if (request->intermediate_values() && !page.items.empty()) {
      ASSIGN_OR_RETURN(std::vector<v1::TrialCurve> curves, core_->TrialCurves(page.items, lease));
      for (v1::TrialCurve& curve : curves) *out.add_curves() = std::move(curve);
    }
    for (v1::Trial& trial : page.items) *out.add_trials() = std::move(trial);
    out.set_next_page_token(std::move(page.next_page_token));
    return out;
  });
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetBestTrial(grpc::CallbackServerContext* context,
                                                         const v1::GetBestTrialRequest* request,
                                                         v1::Trial* response) {
  return Authorized(context, response, [&] { return core_->GetBestTrial(request->study()); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetParetoFront(
    grpc::CallbackServerContext* context, const v1::GetParetoFrontRequest* request,
    v1::GetParetoFrontResponse* response) {
  return Authorized(context, response, [&] {
    return core_->GetParetoFront(request->study(), request->page_size(), request->page_token());
  });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StudyServiceImpl::WatchStudy(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new WatchStudyReactor(core_, &watch_timers_, *request,
                               CheckRole(context->auth_context().get(), kUserRole));
}

grpc::ServerUnaryReactor* StudyServiceImpl::SuggestTrials(grpc::CallbackServerContext* context,
                                                          const v1::SuggestTrialsRequest* request,
                                                          v1::SuggestTrialsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = CheckRole(context->auth_context().get(), kUserRole); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  // Answered when the trials are there: a model-based suggestion may take a while, and no
  // gRPC thread waits for it.
  core_->SuggestTrials(request->study(), request->count(), request->client_id(),
                       [reactor, response](absl::StatusOr<v1::SuggestTrialsResponse> result) {
                         if (result.ok()) *response = *std::move(result);
                         reactor->Finish(ToGrpcStatus(result.status()));
                       });
  return reactor;
}

grpc::ServerUnaryReactor* StudyServiceImpl::ReportProgress(
    grpc::CallbackServerContext* context, const v1::ReportProgressRequest* request,
    v1::ReportProgressResponse* response) {
  return Authorized(context, response, [&] { return core_->ReportClientProgress(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::CompleteTrial(grpc::CallbackServerContext* context,
                                                          const v1::CompleteTrialRequest* request,
                                                          v1::Trial* response) {
  return Authorized(context, response, [&] { return core_->CompleteTrial(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::EnqueueTrial(grpc::CallbackServerContext* context,
                                                         const v1::EnqueueTrialRequest* request,
                                                         v1::Trial* response) {
  return Authorized(context, response, [&] { return core_->EnqueueTrial(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::ImportStudy(grpc::CallbackServerContext* context,
                                                        const v1::StudyExport* request,
                                                        v1::Study* response) {
  return Authorized(context, response, [&] { return core_->ImportStudy(*request); });
}

grpc::ServerUnaryReactor* StudyServiceImpl::AddTrials(grpc::CallbackServerContext* context,
                                                      const v1::AddTrialsRequest* request,
                                                      v1::AddTrialsResponse* response) {
  return Authorized(context, response, [&] { return core_->AddTrials(*request); });
}

}  // namespace dhpt::scheduler
