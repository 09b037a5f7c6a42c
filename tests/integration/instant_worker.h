#ifndef DHPT_TESTS_INTEGRATION_INSTANT_WORKER_H_
#define DHPT_TESTS_INTEGRATION_INSTANT_WORKER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dhpt/v1/study_service.pb.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "services/rpc/stream_outbox.h"

namespace dhpt::testing {

// A study of no-op trials for the instant workers to settle: Styblinski-Tang in two
// dimensions, as fast to compute as a trial can be.
inline v1::StudySpec InstantStudySpec(const std::string& name, int max_trials) {
  v1::StudySpec spec;
  spec.set_name(name);
  spec.mutable_model()->set_kind(v1::Model::FUNCTION);
  spec.mutable_model()->set_function("styblinski_tang");
  for (const char* p : {"x1", "x2"}) {
    v1::Parameter* parameter = spec.add_parameters();
    parameter->set_name(p);
    parameter->mutable_double_range()->set_min(-5);
    parameter->mutable_double_range()->set_max(5);
  }
  spec.set_max_trials(max_trials);
  return spec;
}

// A worker stream that answers every assignment at once with a result: what it costs the
// scheduler to hand out and settle a trial, without any training (bench/scale_bench's fleet,
// and the flood of worker messages in tests/integration/user_calls_test.cc).
class InstantWorker : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::SchedulerMessage> {
 public:
  InstantWorker(v1::WorkerService::Stub* stub, int index, std::atomic<int64_t>* results)
      : results_(results) {
    stub->async()->Connect(&context_, this);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(absl::StrCat("instant-", index));
    hello.mutable_hello()->mutable_capabilities()->set_slots(1);
    hello.mutable_hello()->mutable_capabilities()->add_models(v1::Model::FUNCTION);
    Send(std::move(hello));
    StartRead(&in_);
    StartCall();
  }
  void Heartbeat() {
    v1::WorkerMessage beat;
    beat.mutable_heartbeat();
    Send(std::move(beat));
  }
  void Stop() { context_.TryCancel(); }
  void WaitDone() { done_.WaitForNotification(); }
  bool welcomed() const { return welcomed_.load(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (in_.has_welcome()) welcomed_ = true;
    if (in_.has_assign()) {
      const v1::Assign& assign = in_.assign();
      v1::WorkerMessage out;
      v1::TrialResult& result = *out.mutable_result();
      result.set_trial_id(assign.trial_id());
      result.set_attempt(assign.attempt());
      result.set_epoch(assign.epoch());
      result.set_state(v1::Trial::COMPLETED);
      result.set_device("cpu");
      (*result.mutable_metrics())[assign.objective_metric()] = 1.0;
      Send(std::move(out));
      results_->fetch_add(1);
    }
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    if (!ok) {
      outbox_.Abort();
      return;
    }
    if (const v1::WorkerMessage* next = outbox_.OnWriteDone()) StartWrite(next);
  }
  void OnDone(const grpc::Status&) override { done_.Notify(); }

 private:
  void Send(v1::WorkerMessage message) {
    absl::MutexLock lock(&mutex_);
    absl::StatusOr<const v1::WorkerMessage*> next = outbox_.Push(std::move(message));
    if (next.ok() && *next != nullptr) StartWrite(*next);
  }

  grpc::ClientContext context_;
  v1::SchedulerMessage in_;
  absl::Mutex mutex_;
  rpc::StreamOutbox<v1::WorkerMessage> outbox_ ABSL_GUARDED_BY(mutex_);
  std::atomic<int64_t>* results_;
  std::atomic<bool> welcomed_{false};
  absl::Notification done_;
};

}  // namespace dhpt::testing

#endif  // DHPT_TESTS_INTEGRATION_INSTANT_WORKER_H_
