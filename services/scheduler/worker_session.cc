#include "services/scheduler/worker_session.h"

#include "services/common/grpc_status.h"

namespace dhpt::scheduler {

WorkerSession::WorkerSession(SchedulerCore* core) : core_(core) { StartRead(&inbound_); }

void WorkerSession::Send(v1::SchedulerMessage message) {
  absl::MutexLock lock(&mutex_);
  if (closing_) return;
  outbox_.push_back(std::move(message));
  if (!writing_) {
    writing_ = true;
    StartWrite(&outbox_.front());
  }
}

void WorkerSession::Close(const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  if (closing_) return;
  closing_ = true;
  finish_status_ = ToGrpcStatus(status);
  MaybeFinishLocked();
}

void WorkerSession::MaybeFinishLocked() {
  if (closing_ && !writing_ && !finished_) {
    finished_ = true;
    Finish(finish_status_);
  }
}

void WorkerSession::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mutex_);
  outbox_.pop_front();
  if (!ok) {
    // The stream is broken; the read side sees it too and OnDone cleans up.
    outbox_.clear();
    writing_ = false;
    if (!closing_) {
      closing_ = true;
      finish_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
    }
    MaybeFinishLocked();
    return;
  }
  if (!outbox_.empty() && !finished_) {
    StartWrite(&outbox_.front());
  } else {
    writing_ = false;
    MaybeFinishLocked();
  }
}

void WorkerSession::OnReadDone(bool ok) {
  if (!ok) {
    // The worker closed its side or the connection dropped: release its trials now.
    core_->DisconnectWorker(session_, "stream closed by the worker");
    session_ = 0;
    Close(absl::OkStatus());
    return;
  }
  HandleMessage();
  StartRead(&inbound_);
}

void WorkerSession::HandleMessage() {
  if (session_ == 0) {
    if (!inbound_.has_hello()) {
      Close(absl::FailedPreconditionError("the first message on the stream must be hello"));
      return;
    }
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(inbound_.hello(), this);
    if (!session.ok()) {
      Close(session.status());
      return;
    }
    session_ = *session;
    return;
  }
  switch (inbound_.kind_case()) {
    case v1::WorkerMessage::kResult:
      core_->HandleResult(session_, inbound_.result());
      break;
    case v1::WorkerMessage::kProgress:
      core_->HandleProgress(session_, inbound_.progress());
      break;
    case v1::WorkerMessage::kHeartbeat:
      core_->HandleHeartbeat(session_);
      break;
    case v1::WorkerMessage::kHello:
      // A second hello changes nothing; the capabilities of a session are fixed.
      core_->HandleHeartbeat(session_);
      break;
    case v1::WorkerMessage::KIND_NOT_SET:
      break;
  }
}

void WorkerSession::OnCancel() {
  // The worker went away or the server is shutting down; Finish is still ours to call.
  Close(absl::CancelledError("stream cancelled"));
}

void WorkerSession::OnDone() {
  if (session_ != 0) core_->DisconnectWorker(session_, "stream ended");
  delete this;
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  return new WorkerSession(core_);
}

}  // namespace dhpt::scheduler
