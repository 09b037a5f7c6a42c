#include "services/scheduler/study_service.h"

#include <pthread.h>

#include <functional>

#include <grpcpp/alarm.h>

#include "absl/strings/str_cat.h"
#include "services/common/enum_values.h"
#include "services/common/grpc_status.h"
#include "services/common/status_macros.h"
#include "services/common/transport_security.h"
#include "services/scheduler/watch_study_reactor.h"

namespace dhpt::scheduler {
namespace {

using AsyncStudyService = v1::StudyService::AsyncService;

// The trailing metadata key on every error this service answers (clients/python reads it).
constexpr char kRefusedByKey[] = "dhpt-refused-by";

// One unary call of one method on the user calls' queue: it waits for the call, then (on a
// user call thread) starts waiting for the next one of its method, runs the handler and
// answers; it deletes itself when gRPC is done with the answer. The reply budget's lease (for a
// page) is held until then too, as is the response.
template <typename Request, typename Response>
class UnaryCall final : public StudyServiceImpl::Call {
 public:
  using RequestMethod = void (AsyncStudyService::*)(grpc::ServerContext*, Request*,
                                          grpc::ServerAsyncResponseWriter<Response>*,
                                          grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                          void*);
  using Handler = std::function<void(UnaryCall&)>;

  static void Listen(StudyServiceImpl* service, grpc::ServerCompletionQueue* queue, RequestMethod method,
                     Handler handler) {
    auto* call = new UnaryCall(service, queue, method, std::move(handler));
    (service->*method)(&call->context_, &call->request_, &call->responder_, queue, queue, call);
  }

  ~UnaryCall() override {
    if (admitted_) service_->Release();
  }

  void Proceed(bool ok) override {
    // Answered (or the answer failed: the client went away), or no call came because the
    // server is shutting down.
    if (answering_ || !ok) {
      delete this;
      return;
    }
    Listen(service_, queue_, method_, handler_);
    answering_ = true;  // Before the handler: its answer may complete on another thread.
    admitted_ = service_->Admit();
    if (!admitted_) {
      return Finish(absl::UnavailableError("the scheduler is shutting down; retry"));
    }
    handler_(*this);
  }

  // Exactly once per call, from any thread.
  void Finish(absl::StatusOr<Response> result, ReplyBudget::Lease lease = {}) {
    lease_ = std::move(lease);
    if (result.ok()) response_ = *std::move(result);
    // A refusal the scheduler itself made: a client can tell "the scheduler said UNAVAILABLE
    // (the database refuses writes)" from "no scheduler answered", which gRPC codes alike.
    if (!result.ok()) context_.AddTrailingMetadata(kRefusedByKey, "scheduler");
    responder_.Finish(response_, ToGrpcStatus(result.status()), this);
  }

  grpc::ServerContext& context() { return context_; }
  const Request& request() const { return request_; }

 private:
  UnaryCall(StudyServiceImpl* service, grpc::ServerCompletionQueue* queue, RequestMethod method,
            Handler handler)
      : service_(service), queue_(queue), method_(method), handler_(std::move(handler)),
        responder_(&context_) {}

  StudyServiceImpl* const service_;
  grpc::ServerCompletionQueue* const queue_;
  const RequestMethod method_;
  const Handler handler_;
  // Before the response: members are destroyed in reverse, and the lease's release may hand
  // free memory back to the system (reply_budget.h), which it can only do once the page is gone.
  ReplyBudget::Lease lease_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> responder_;
  bool answering_ = false;
  bool admitted_ = false;
};

// A call is computed only for a user's token (when tokens are in use) and a request whose enums
// are all defined: protobuf keeps an unknown number (ListTrials state 99, an evaluator 99), which
// would otherwise read as "no trials" or as the default.
template <typename Request, typename Response>
absl::Status Admissible(const StudyServiceImpl& service, UnaryCall<Request, Response>& call) {
  RETURN_IF_ERROR(service.CheckUser(call.context()));
  return CheckEnumValues(call.request(), "");
}

// Every StudyService call runs only for a user's token (when tokens are in use); `compute`
// runs after the check, so a worker's token reads nothing.
template <typename Request, typename Response, typename Compute>
void Serve(StudyServiceImpl* service, grpc::ServerCompletionQueue* queue,
           typename UnaryCall<Request, Response>::RequestMethod method, Compute compute) {
  UnaryCall<Request, Response>::Listen(
      service, queue, method, [service, compute](UnaryCall<Request, Response>& call) {
        const absl::Status allowed = Admissible(*service, call);
        call.Finish(allowed.ok() ? absl::StatusOr<Response>(compute(call.request()))
                                 : absl::StatusOr<Response>(allowed));
      });
}

// Like Serve, for a page: `compute` also sets the page's lease on the reply budget, held until
// gRPC is done with the reply.
template <typename Request, typename Response, typename Compute>
void ServePage(StudyServiceImpl* service, grpc::ServerCompletionQueue* queue,
               typename UnaryCall<Request, Response>::RequestMethod method, Compute compute) {
  UnaryCall<Request, Response>::Listen(
      service, queue, method, [service, compute](UnaryCall<Request, Response>& call) {
        const absl::Status allowed = Admissible(*service, call);
        if (!allowed.ok()) return call.Finish(allowed);
        ReplyBudget::Lease lease;
        absl::StatusOr<Response> result = compute(call.request(), lease);
        call.Finish(std::move(result), std::move(lease));
      });
}

}  // namespace

StudyServiceImpl::~StudyServiceImpl() { Stop(); }

void StudyServiceImpl::Start(std::unique_ptr<grpc::ServerCompletionQueue> queue) {
  queue_ = std::move(queue);
  ListenForEveryMethod();
  for (int i = 0; i < kUserCallThreads; ++i) {
    threads_.emplace_back([queue = queue_.get()] {
      // Named for `top -H` and for scale_bench, which reads each thread's run-queue wait.
      pthread_setname_np(pthread_self(), "dhpt-user-call");
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
    });
  }
}

bool StudyServiceImpl::Admit() {
  absl::MutexLock lock(&mutex_);
  if (refusing_) {
    last_call_ = absl::Now();
    return false;
  }
  ++handling_;
  return true;
}

void StudyServiceImpl::Release() {
  absl::MutexLock lock(&mutex_);
  --handling_;
}

namespace {

// kUserCallThreads of these go through the queue at once, and each holds its thread until all
// are taken: the queue hands out events in order, so then every call it held before them has
// been through Admit (a thread takes its next event only once its previous call's Proceed is
// done).
class QueueBarrier final : public StudyServiceImpl::Call {
 public:
  struct State {
    absl::Mutex mutex;
    int left ABSL_GUARDED_BY(mutex) = kUserCallThreads;  // Barriers not yet taken.
    absl::Time deadline;
    grpc::Alarm alarms[kUserCallThreads];

    bool AllTaken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) { return left == 0; }
  };

  explicit QueueBarrier(std::shared_ptr<State> state) : state_(std::move(state)) {}

  void Proceed(bool) override {
    {
      absl::MutexLock lock(&state_->mutex);
      --state_->left;
      state_->mutex.AwaitWithDeadline(absl::Condition(state_.get(), &State::AllTaken),
                                      state_->deadline);
    }
    delete this;
  }

 private:
  const std::shared_ptr<State> state_;
};

}  // namespace

bool StudyServiceImpl::QueueFlushed(absl::Time deadline) {
  auto state = std::make_shared<QueueBarrier::State>();
  state->deadline = deadline;
  for (grpc::Alarm& alarm : state->alarms) {
    alarm.Set(queue_.get(), gpr_now(GPR_CLOCK_MONOTONIC), new QueueBarrier(state));
  }
  absl::MutexLock lock(&state->mutex);
  const bool flushed = state->mutex.AwaitWithDeadline(
      absl::Condition(state.get(), &QueueBarrier::State::AllTaken), deadline);
  // The barriers still hold the state, and their threads, until the deadline at most.
  return flushed;
}

void StudyServiceImpl::Refuse(absl::Time deadline) {
  absl::MutexLock lock(&mutex_);
  refusing_ = true;
  last_call_ = absl::Now();
  const auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return handling_ == 0; };
  for (;;) {
    if (!mutex_.AwaitWithDeadline(absl::Condition(&idle), deadline)) return;
    const absl::Time seen = last_call_;
    const auto called = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return last_call_ != seen; };
    // A call came, or quiet (none came), or the deadline.
    if (mutex_.AwaitWithDeadline(absl::Condition(&called),
                                 std::min(seen + kShutdownQuiet, deadline))) {
      continue;
    }
    if (absl::Now() >= deadline) return;
    // Quiet for Admit, but a loaded machine may leave calls gRPC matched waiting in the queue
    // for a thread (while the next of their method waits in gRPC, which its Shutdown
    // cancels): the queue goes through Admit first.
    mutex_.Unlock();
    const bool flushed = QueueFlushed(deadline);
    mutex_.Lock();
    if (!flushed || (last_call_ == seen && handling_ == 0)) return;
  }
}

void StudyServiceImpl::Stop() {
  if (queue_ == nullptr) return;
  queue_->Shutdown();  // Next returns what is left (each call's ok false), then false.
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
  queue_.reset();
}

void StudyServiceImpl::ListenForEveryMethod() {
  SchedulerCore* const core = core_;
  grpc::ServerCompletionQueue* const q = queue_.get();
  Serve<v1::StudySpec, v1::Study>(this, q, &AsyncStudyService::RequestCreateStudy,
                                  [core](const v1::StudySpec& r) { return core->CreateStudy(r); });
  Serve<v1::GetStudyRequest, v1::Study>(
      this, q, &AsyncStudyService::RequestGetStudy,
      [core](const v1::GetStudyRequest& r) { return core->GetStudy(r.name()); });
  ServePage<v1::ListStudiesRequest, v1::ListStudiesResponse>(
      this, q, &AsyncStudyService::RequestListStudies,
      [core](const v1::ListStudiesRequest& r,
             ReplyBudget::Lease& lease) -> absl::StatusOr<v1::ListStudiesResponse> {
        ASSIGN_OR_RETURN(ListPage<v1::Study> page,
                         core->ListStudies(r.page_size(), r.page_token()));
        lease = std::move(page.lease);
        v1::ListStudiesResponse out;
        for (v1::Study& study : page.items) *out.add_studies() = std::move(study);
        out.set_next_page_token(std::move(page.next_page_token));
        return out;
      });
  Serve<v1::DeleteStudyRequest, google::protobuf::Empty>(
      this, q, &AsyncStudyService::RequestDeleteStudy,
      [core](const v1::DeleteStudyRequest& r) -> absl::StatusOr<google::protobuf::Empty> {
        RETURN_IF_ERROR(core->DeleteStudy(r.name(), r.force()));
        return google::protobuf::Empty();
      });
  Serve<v1::ListWorkersRequest, v1::ListWorkersResponse>(
      this, q, &AsyncStudyService::RequestListWorkers, [core](const v1::ListWorkersRequest&) {
        v1::ListWorkersResponse out;
        for (v1::Worker& worker : core->ListWorkers()) *out.add_workers() = std::move(worker);
        return absl::StatusOr<v1::ListWorkersResponse>(std::move(out));
      });
  Serve<v1::StopStudyRequest, v1::Study>(
      this, q, &AsyncStudyService::RequestStopStudy,
      [core](const v1::StopStudyRequest& r) { return core->StopStudy(r.name()); });
  Serve<v1::UpdateStudyRequest, v1::Study>(
      this, q, &AsyncStudyService::RequestUpdateStudy,
      [core](const v1::UpdateStudyRequest& r) { return core->UpdateStudy(r); });
  Serve<v1::GetParamImportancesRequest, v1::GetParamImportancesResponse>(
      this, q, &AsyncStudyService::RequestGetParamImportances,
      [core](const v1::GetParamImportancesRequest& r) { return core->GetParamImportances(r); });
  ServePage<v1::ListTrialsRequest, v1::ListTrialsResponse>(
      this, q, &AsyncStudyService::RequestListTrials,
      [core](const v1::ListTrialsRequest& r,
             ReplyBudget::Lease& lease) -> absl::StatusOr<v1::ListTrialsResponse> {
        // With curves a page is short: each trial may carry thousands of values.
        const int page_size =
            r.intermediate_values()
                ? (r.page_size() == 0 ? kMaxCurvePageSize
                                      : std::min(r.page_size(), kMaxCurvePageSize))
                : r.page_size();
        if (r.values_only() && r.intermediate_values()) {
          return absl::InvalidArgumentError(
              "values_only lists no more than each trial's values; ask for intermediate_values "
              "without it");
        }
        if (r.values_only() && r.plot_view()) {
          return absl::InvalidArgumentError(
              "values_only and plot_view are two views of a trial; ask for one");
        }
        if (r.values_only() && r.sample_stride() > 1) {
          return absl::InvalidArgumentError(
              "values_only lists every trial's values; a sample_stride is for the plots' views");
        }
        using View = SchedulerCore::TrialView;
        const View view = r.values_only() ? View::kValuesOnly
                          : r.plot_view() ? View::kPlot
                                          : View::kFull;
        ASSIGN_OR_RETURN(ListPage<v1::Trial> page,
                         core->ListTrials(r.study(), r.state(), page_size, r.page_token(), view,
                                          r.sample_stride()));
        lease = std::move(page.lease);
        v1::ListTrialsResponse out;
        if (r.intermediate_values() && !page.items.empty()) {
          ASSIGN_OR_RETURN(std::vector<v1::TrialCurve> curves,
                           core->TrialCurves(page.items, lease));
          for (v1::TrialCurve& curve : curves) *out.add_curves() = std::move(curve);
        }
        for (v1::Trial& trial : page.items) *out.add_trials() = std::move(trial);
        out.set_next_page_token(std::move(page.next_page_token));
        out.set_trials_covered(page.covered);
        return out;
      });
  Serve<v1::GetBestTrialRequest, v1::Trial>(
      this, q, &AsyncStudyService::RequestGetBestTrial,
      [core](const v1::GetBestTrialRequest& r) { return core->GetBestTrial(r.study()); });
  Serve<v1::GetParetoFrontRequest, v1::GetParetoFrontResponse>(
      this, q, &AsyncStudyService::RequestGetParetoFront, [core](const v1::GetParetoFrontRequest& r) {
        return core->GetParetoFront(r.study(), r.page_size(), r.page_token());
      });
  // Answered when the trials are there: a model-based suggestion may take a while, and no
  // thread waits for it.
  using Suggest = UnaryCall<v1::SuggestTrialsRequest, v1::SuggestTrialsResponse>;
  Suggest::Listen(this, q, &AsyncStudyService::RequestSuggestTrials, [this, core](Suggest& call) {
    if (absl::Status allowed = Admissible(*this, call); !allowed.ok()) return call.Finish(allowed);
    const v1::SuggestTrialsRequest& r = call.request();
    core->SuggestTrials(r.study(), r.count(), r.client_id(), r.request_id(),
                        [&call](absl::StatusOr<v1::SuggestTrialsResponse> result) {
                          call.Finish(std::move(result));
                        });
  });
  Serve<v1::ReportProgressRequest, v1::ReportProgressResponse>(
      this, q, &AsyncStudyService::RequestReportProgress,
      [core](const v1::ReportProgressRequest& r) { return core->ReportClientProgress(r); });
  Serve<v1::CompleteTrialRequest, v1::Trial>(
      this, q, &AsyncStudyService::RequestCompleteTrial,
      [core](const v1::CompleteTrialRequest& r) { return core->CompleteTrial(r); });
  Serve<v1::EnqueueTrialRequest, v1::Trial>(
      this, q, &AsyncStudyService::RequestEnqueueTrial,
      [core](const v1::EnqueueTrialRequest& r) { return core->EnqueueTrial(r); });
  Serve<v1::StudyExport, v1::Study>(this, q, &AsyncStudyService::RequestImportStudy,
                                    [core](const v1::StudyExport& r) { return core->ImportStudy(r); });
  Serve<v1::AddTrialsRequest, v1::AddTrialsResponse>(
      this, q, &AsyncStudyService::RequestAddTrials,
      [core](const v1::AddTrialsRequest& r) { return core->AddTrials(r); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* StudyServiceImpl::WatchStudy(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new WatchStudyReactor(core_, &watch_timers_, *request,
                               CheckUser(*context));
}

}  // namespace dhpt::scheduler
