#include "services/scheduler/worker_session.h"

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"
#include "services/common/thread_priority.h"
#include "services/common/transport_security.h"

namespace dhpt::scheduler {

bool UnintroducedStreams::Add(WorkerSession* session, absl::Time since) {
  absl::MutexLock lock(&mutex_);
  if (closed_) return false;
  waiting_[session] = since;
  return true;
}

void UnintroducedStreams::Remove(WorkerSession* session) {
  absl::MutexLock lock(&mutex_);
  waiting_.erase(session);
}

void UnintroducedStreams::CloseSilentSince(absl::Time cutoff) {
  // Under the lock: a session leaves the map (Remove, from OnDone) before it is deleted.
  absl::MutexLock lock(&mutex_);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second < cutoff) {
      it->first->Close(absl::DeadlineExceededError("no hello within the lease"));
      waiting_.erase(it++);
    } else {
      ++it;
    }
  }
}

void UnintroducedStreams::CloseAll() {
  absl::MutexLock lock(&mutex_);
  closed_ = true;
  for (auto& [session, since] : waiting_) {
    session->Close(absl::UnavailableError("the scheduler is shutting down"));
  }
  waiting_.clear();
}

WorkerSession::WorkerSession(SchedulerCore* core, std::vector<std::string> peer_names,
                             rpc::OutboxLimits limits, int priority_steps,
                             UnintroducedStreams* unintroduced)
    : core_(core),
      peer_names_(std::move(peer_names)),
      priority_steps_(priority_steps),
      unintroduced_(unintroduced),
      outbox_(limits) {
  if (!unintroduced_->Add(this, absl::Now())) {
    Close(absl::UnavailableError("the scheduler is shutting down"));
    return;
  }
  StartRead(&inbound_);
}

void WorkerSession::Send(v1::SchedulerMessage message) {
  absl::MutexLock lock(&mutex_);
  if (outbox_.ending()) return;
  absl::StatusOr<const v1::SchedulerMessage*> next = outbox_.Push(std::move(message));
  if (!next.ok()) {
    // The worker does not read its stream: cut it off rather than hold unbounded memory. Its
    // trials go back to pending when the stream ends (OnDone).
    outbox_.DropPending();
    CloseLocked(next.status());
  } else if (*next != nullptr) {
    StartWrite(*next);
  }
}

void WorkerSession::Close(const absl::Status& status) {
  absl::MutexLock lock(&mutex_);
  if (!ended_by_scheduler_) ended_by_scheduler_ = status;
  CloseLocked(status);
}

void WorkerSession::CloseLocked(const absl::Status& status) {
  // The first reason stands. Also when closing already: a write that failed after Close
  // leaves the outbox idle now, and nothing else would finish the call (the server's Shutdown
  // would wait for it forever).
  FinishIfDue(outbox_.End(status));
}

void WorkerSession::FinishIfDue(std::optional<absl::Status> status) {
  if (status) Finish(ToGrpcStatus(*status));
}

void WorkerSession::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mutex_);
  if (!ok) {
    // The stream is broken; the read side sees it too and OnDone cleans up.
    outbox_.Abort();
    CloseLocked(absl::UnavailableError("writing to the worker failed"));
    return;
  }
  if (const v1::SchedulerMessage* next = outbox_.OnWriteDone()) {
    StartWrite(next);
  } else {
    FinishIfDue(outbox_.TakeFinish());
  }
}

void WorkerSession::OnReadDone(bool ok) {
  // gRPC runs every callback stream on a few shared threads; the first worker message a thread
  // handles lowers it for good (a later watcher's batches on it are worker-paced too).
  LowerCallingThreadPriority(priority_steps_);
  if (!ok) {
    bool ended_by_scheduler = false;
    {
      absl::MutexLock lock(&mutex_);
      ended_by_scheduler = ended_by_scheduler_.has_value();
    }
    // Not under mutex_: the core calls Close under its own lock.
    if (!ended_by_scheduler) {
      // The worker closed its side or the connection dropped: release its trials now.
      core_->DisconnectWorker(session_, "stream closed by the worker");
      session_ = 0;
    }
    // Else the scheduler ended the stream, and the read ends because the worker closed its side
    // in answer or because the call was cut; only OnDone knows which (OnCancel comes first).
    absl::MutexLock lock(&mutex_);
    CloseLocked(absl::OkStatus());
    return;
  }
  HandleMessage();
  {
    // No read after Finish: the call may already be on its way to OnDone.
    absl::MutexLock lock(&mutex_);
    if (outbox_.ending()) return;
  }
  StartRead(&inbound_);
}

void WorkerSession::HandleMessage() {
  if (session_ == 0) {
    if (!inbound_.has_hello()) {
      Close(absl::FailedPreconditionError("the first message on the stream must be hello"));
      return;
    }
    unintroduced_->Remove(this);  // The core knows it from here on (or it ends now).
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(inbound_.hello(), peer_names_, this);
    if (!session.ok()) {
      Close(session.status());
      return;
    }
    session_ = *session;
    return;
  }
  core_->HandleWorkerMessage(session_, inbound_);
}

void WorkerSession::OnCancel() {
  // The worker went away, or the server cut the call at the end of its shutdown grace; Finish
  // is still ours to call.
  absl::MutexLock lock(&mutex_);
  cut_ = true;
  CloseLocked(absl::CancelledError("stream cancelled"));
}

std::string WorkerSession::EndReasonLocked() const {
  if (!ended_by_scheduler_) return cut_ ? "the stream was cut" : "stream ended";
  // Not cut: the stream ended with the scheduler's status, whether or not the worker (maybe
  // frozen, but idle) read it; gRPC does not tell the two apart.
  return absl::StrCat("the scheduler ended the stream (", ended_by_scheduler_->message(), ")",
                      cut_ ? " and the worker did not answer before its call was cut (a frozen "
                             "or unreachable worker; at a stop, after --shutdown_grace)"
                           : "");
}

void WorkerSession::OnDone() {
  unintroduced_->Remove(this);
  if (session_ != 0) {
    std::string reason;
    {
      absl::MutexLock lock(&mutex_);
      reason = EndReasonLocked();
    }
    core_->DisconnectWorker(session_, reason);
  }
  delete this;
}

namespace {

// A Connect refused before any message: ends at once with the reason.
class RefusedStream : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  explicit RefusedStream(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::SchedulerMessage>* WorkerServiceImpl::Connect(
    grpc::CallbackServerContext* context) {
  if (absl::Status allowed = CheckRole(tokens_.get(), *context, kWorkerRole); !allowed.ok()) {
    return new RefusedStream(allowed);
  }
  // Under mutual TLS the worker's certificate names who it may claim to be.
  std::vector<std::string> peer_names;
  if (std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
      auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const char* property : {"x509_common_name", "x509_subject_alternative_name"}) {
      for (const grpc::string_ref& name : auth->FindPropertyValues(property)) {
        peer_names.emplace_back(name.data(), name.size());
      }
    }
  }
  return new WorkerSession(core_, std::move(peer_names), limits_, priority_steps_,
                           &unintroduced_);
}

}  // namespace dhpt::scheduler
