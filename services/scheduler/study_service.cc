#include "services/scheduler/study_service.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "services/common/grpc_status.h"
#include "services/common/status_macros.h"
#include "services/common/transport_security.h"

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

// One WatchStudy stream.
//
// Invariants: writes go through the bounded `outbox_` (at most one in flight); a watcher that
// falls further behind than the outbox holds is ended with RESOURCE_EXHAUSTED, so a frozen
// client costs bounded memory (it may watch again and gets a fresh snapshot first). Finish is
// called once, with no write in flight. The core forgets the watcher (Unwatch, or before
// OnEnd) before OnDone deletes it, so the core never calls a dead watcher.
class WatchStudyReactor : public grpc::ServerWriteReactor<v1::StudyEvent>, public StudyWatcher {
 public:
  // `allowed`: whether the caller may watch (CheckRole); if not, the stream ends with it.
  WatchStudyReactor(SchedulerCore* core, const std::string& name, rpc::OutboxLimits limits,
                    const absl::Status& allowed)
      : core_(core), outbox_(limits) {
    absl::StatusOr<uint64_t> id = allowed.ok() ? core_->Watch(name, this) : allowed;
    absl::MutexLock lock(&mutex_);
    if (!id.ok()) {
      EndLocked(id.status());
    } else {
      // Even when already ending (it fell behind during the snapshot): the core holds us until
      // Unwatch, which OnDone's Forget calls.
      watch_id_ = *id;
    }
  }

  void OnEvent(const v1::StudyEvent& event) override {
    absl::MutexLock lock(&mutex_);
    if (ending_) return;
    absl::StatusOr<const v1::StudyEvent*> next = outbox_.Push(event);
    if (!next.ok()) {
      // Called under the core's lock: the core is told to forget us by OnDone, not here.
      outbox_.DropPending();
      EndLocked(absl::ResourceExhaustedError(absl::StrCat(
          "this watcher fell too far behind the study (", next.status().message(),
          "); watch again for a fresh snapshot")));
    } else if (*next != nullptr) {
      StartWrite(*next);
    }
  }

  void OnEnd(const absl::Status& status) override {
    absl::MutexLock lock(&mutex_);
    watch_id_ = 0;  // The core has forgotten us already.
    EndLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    if (!ok) {
      outbox_.Abort();
      EndLocked(absl::UnavailableError("writing to the watcher failed"));
      return;
    }
    const v1::StudyEvent* next = outbox_.OnWriteDone();
    if (next != nullptr && !finished_) {
      StartWrite(next);
      return;
    }
    MaybeFinishLocked();
  }

  void OnCancel() override {
    Forget();
    absl::MutexLock lock(&mutex_);
    outbox_.DropPending();  // Never the event being written: gRPC still reads it.
    EndLocked(absl::CancelledError("the watcher went away"));
  }

  void OnDone() override {
    Forget();
    delete this;
  }

 private:
  void Forget() {
    uint64_t id;
    {
      absl::MutexLock lock(&mutex_);
      id = watch_id_;
      watch_id_ = 0;
    }
    if (id != 0) core_->Unwatch(id);
  }

  void EndLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!ending_) {  // The first reason stands.
      ending_ = true;
      status_ = ToGrpcStatus(status);
    }
    // Also when ending already: a write that failed after the end was asked for leaves the
    // outbox idle, and nothing else would finish the call.
    MaybeFinishLocked();
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (ending_ && outbox_.idle() && !finished_) {
      finished_ = true;
      Finish(status_);
    }
  }

  SchedulerCore* const core_;
  absl::Mutex mutex_;
  uint64_t watch_id_ ABSL_GUARDED_BY(mutex_) = 0;
  rpc::StreamOutbox<v1::StudyEvent> outbox_ ABSL_GUARDED_BY(mutex_);
  bool ending_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mutex_);
};

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
  return Authorized(context, response, [&]() -> absl::StatusOr<v1::ListStudiesResponse> {
    ASSIGN_OR_RETURN(ListPage<v1::Study> page,
                     core_->ListStudies(request->page_size(), request->page_token()));
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

grpc::ServerUnaryReactor* StudyServiceImpl::ListTrials(grpc::CallbackServerContext* context,
                                                       const v1::ListTrialsRequest* request,
                                                       v1::ListTrialsResponse* response) {
  return Authorized(context, response, [&]() -> absl::StatusOr<v1::ListTrialsResponse> {
    ASSIGN_OR_RETURN(ListPage<v1::Trial> page,
                     core_->ListTrials(request->study(), request->state(), request->page_size(),
                                       request->page_token()));
    v1::ListTrialsResponse out;
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

grpc::ServerWriteReactor<v1::StudyEvent>* StudyServiceImpl::WatchStudy(
    grpc::CallbackServerContext* context, const v1::WatchStudyRequest* request) {
  return new WatchStudyReactor(core_, request->name(), watch_limits_,
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

grpc::ServerUnaryReactor* StudyServiceImpl::AddTrials(grpc::CallbackServerContext* context,
                                                      const v1::AddTrialsRequest* request,
                                                      v1::AddTrialsResponse* response) {
  return Authorized(context, response, [&] { return core_->AddTrials(*request); });
}

}  // namespace dhpt::scheduler
