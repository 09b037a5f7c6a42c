#include "services/scheduler/study_service.h"

#include <deque>

#include "absl/synchronization/mutex.h"
#include "services/common/grpc_status.h"

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

// One WatchStudy stream.
//
// Invariants: at most one write in flight (`writing_`), events wait in the owned `outbox_`;
// Finish is called once, after the last queued event is written; the core forgets the watcher
// (Unwatch, or before OnEnd) before OnDone deletes it, so the core never calls a dead watcher.
class WatchStudyReactor : public grpc::ServerWriteReactor<v1::StudyEvent>, public StudyWatcher {
 public:
  WatchStudyReactor(SchedulerCore* core, const std::string& name) : core_(core) {
    absl::StatusOr<uint64_t> id = core_->Watch(name, this);
    absl::MutexLock lock(&mutex_);
    if (!id.ok()) {
      EndLocked(ToGrpcStatus(id.status()));
    } else {
      watch_id_ = *id;
    }
  }

  void OnEvent(const v1::StudyEvent& event) override {
    absl::MutexLock lock(&mutex_);
    if (ending_) return;
    outbox_.push_back(event);
    if (!writing_) {
      writing_ = true;
      StartWrite(&outbox_.front());
    }
  }

  void OnEnd(const absl::Status& status) override {
    absl::MutexLock lock(&mutex_);
    watch_id_ = 0;  // The core has forgotten us already.
    EndLocked(ToGrpcStatus(status));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    outbox_.pop_front();
    if (ok && !outbox_.empty()) {
      StartWrite(&outbox_.front());
      return;
    }
    writing_ = false;
    if (!ok) {
      outbox_.clear();
      EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    }
    MaybeFinishLocked();
  }

  void OnCancel() override {
    Forget();
    absl::MutexLock lock(&mutex_);
    outbox_.clear();
    EndLocked(grpc::Status::CANCELLED);
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

  void EndLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (ending_) return;
    ending_ = true;
    status_ = std::move(status);
    MaybeFinishLocked();
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (ending_ && !writing_ && !finished_) {
      finished_ = true;
      Finish(status_);
    }
  }

  SchedulerCore* const core_;
  absl::Mutex mutex_;
  uint64_t watch_id_ ABSL_GUARDED_BY(mutex_) = 0;
  std::deque<v1::StudyEvent> outbox_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool ending_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

grpc::ServerUnaryReactor* StudyServiceImpl::CreateStudy(grpc::CallbackServerContext* context,
                                                        const v1::StudySpec* request,
                                                        v1::Study* response) {
  return Reply(context, core_->CreateStudy(*request), response);
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetStudy(grpc::CallbackServerContext* context,
                                                     const v1::GetStudyRequest* request,
                                                     v1::Study* response) {
  return Reply(context, core_->GetStudy(request->name()), response);
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListStudies(grpc::CallbackServerContext* context,
                                                        const v1::ListStudiesRequest* request,
                                                        v1::ListStudiesResponse* response) {
  for (v1::Study& study : core_->ListStudies()) *response->add_studies() = std::move(study);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                        const v1::ListWorkersRequest* request,
                                                        v1::ListWorkersResponse* response) {
  for (v1::Worker& worker : core_->ListWorkers()) *response->add_workers() = std::move(worker);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* StudyServiceImpl::StopStudy(grpc::CallbackServerContext* context,
                                                      const v1::StopStudyRequest* request,
                                                      v1::Study* response) {
  return Reply(context, core_->StopStudy(request->name()), response);
}

grpc::ServerUnaryReactor* StudyServiceImpl::ListTrials(grpc::CallbackServerContext* context,
                                                       const v1::ListTrialsRequest* request,
                                                       v1::ListTrialsResponse* response) {
  absl::StatusOr<std::vector<v1::Trial>> trials =
      core_->ListTrials(request->study(), request->state());
  if (trials.ok()) {
    for (v1::Trial& trial : *trials) *response->add_trials() = std::move(trial);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(trials.status()));
  return reactor;
}

grpc::ServerUnaryReactor* StudyServiceImpl::GetBestTrial(grpc::CallbackServerContext* context,
                                                         const v1::GetBestTrialRequest* request,
                                                         v1::Trial* response) {
  return Reply(context, core_->GetBestTrial(request->study()), response);
}

grpc::ServerWriteReactor<v1::StudyEvent>* StudyServiceImpl::WatchStudy(
    grpc::CallbackServerContext* context, const v1::WatchStudyRequest* request) {
  return new WatchStudyReactor(core_, request->name());
}

}  // namespace dhpt::scheduler
