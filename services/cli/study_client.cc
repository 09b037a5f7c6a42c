#include "services/cli/study_client.h"

#include <algorithm>
#include <functional>

#include "absl/time/clock.h"
#include "services/common/channel_options.h"
#include "services/common/grpc_status.h"

namespace dhpt::cli {

namespace {
grpc::ChannelArguments Arguments(const ChannelSecurity& security) {
  grpc::ChannelArguments arguments = ClientChannelArguments(KeepaliveOptions{});
  security.ApplyTo(arguments);
  return arguments;
}
}  // namespace

StudyClient::StudyClient(const std::string& address, const ChannelSecurity& security,
                         absl::Duration deadline)
    : stub_(v1::StudyService::NewStub(
          grpc::CreateCustomChannel(address, security.credentials, Arguments(security)))),
      deadline_(deadline) {}

std::unique_ptr<grpc::ClientContext> StudyClient::NewContext(absl::Duration deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(
      absl::ToChronoTime(absl::Now() + std::max(deadline, deadline_)));
  return context;
}

namespace {
template <typename Response, typename Call>
absl::StatusOr<Response> Unary(std::unique_ptr<grpc::ClientContext> context, Call call) {
  Response response;
  grpc::Status status = call(context.get(), &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

// A read: a CANCELLED answer, which this client never asks for on a unary call, came from a
// scheduler that is stopping (gRPC's Shutdown cancels the calls that reach it between the start
// of its Shutdown and the GOAWAY it then sends; docs/deployment.md). A read is safe to repeat,
// so it is asked again, StudyClient::kCancelledReadTries times at most, 50 ms apart and
// doubling: by then the stopping scheduler refuses it UNAVAILABLE or its port is closed, or a
// restarted one answers.
template <typename Response, typename Call>
absl::StatusOr<Response> Read(
    const std::function<std::unique_ptr<grpc::ClientContext>()>& new_context, Call call) {
  absl::Duration pause = absl::Milliseconds(50);
  for (int tries = 1;; ++tries) {
    absl::StatusOr<Response> response = Unary<Response>(new_context(), call);
    if (!absl::IsCancelled(response.status()) || tries == StudyClient::kCancelledReadTries) {
      return response;
    }
    absl::SleepFor(pause);
    pause *= 2;
  }
}

// One page (a read); asked for again while the scheduler's reply budget is spent
// (RESOURCE_EXHAUSTED: other callers' pages are being sent), for up to
// StudyClient::kPageRetryWindow.
template <typename Response, typename Request, typename Call>
absl::StatusOr<Response> Page(
    const std::function<std::unique_ptr<grpc::ClientContext>()>& new_context,
    const Request& request, Call call) {
  const absl::Time give_up = absl::Now() + StudyClient::kPageRetryWindow;
  absl::Duration pause = absl::Milliseconds(100);
  while (true) {
    auto response = Read<Response>(new_context, [&](grpc::ClientContext* c, Response* r) {
      return call(c, request, r);
    });
    if (response.ok() || !absl::IsResourceExhausted(response.status()) ||
        absl::Now() + pause > give_up) {
      return response;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Seconds(2));
  }
}

// Calls a paginated List RPC page after page (AIP-158), handing each response to `take`.
template <typename Response, typename Request, typename Call, typename Take>
absl::Status EachPage(const std::function<std::unique_ptr<grpc::ClientContext>()>& new_context,
                      Request request, Call call, Take take) {
  do {
    absl::StatusOr<Response> response = Page<Response>(new_context, request, call);
    if (!response.ok()) return response.status();
    take(*response);
    request.set_page_token(response->next_page_token());
  } while (!request.page_token().empty());
  return absl::OkStatus();
}

// Every page's items, as `items` picks them from each response.
template <typename Item, typename Response, typename Request, typename Call, typename Items>
absl::StatusOr<std::vector<Item>> AllPages(
    const std::function<std::unique_ptr<grpc::ClientContext>()>& new_context, Request request,
    Call call, Items items) {
  std::vector<Item> all;
  absl::Status status = EachPage<Response>(new_context, std::move(request), call,
                                           [&](const Response& response) {
                                             const auto& page = items(response);
                                             all.insert(all.end(), page.begin(), page.end());
                                           });
  if (!status.ok()) return status;
  return all;
}
}  // namespace

absl::StatusOr<v1::Study> StudyClient::CreateStudy(const v1::StudySpec& spec) {
  return Unary<v1::Study>(NewContext(), [&](grpc::ClientContext* c, v1::Study* r) {
    return stub_->CreateStudy(c, spec, r);
  });
}

absl::StatusOr<v1::Study> StudyClient::GetStudy(const std::string& name) {
  v1::GetStudyRequest request;
  request.set_name(name);
  return Read<v1::Study>([this] { return NewContext(); },
                         [&](grpc::ClientContext* c, v1::Study* r) {
                           return stub_->GetStudy(c, request, r);
                         });
}

absl::StatusOr<std::vector<v1::Study>> StudyClient::ListStudies() {
  return AllPages<v1::Study, v1::ListStudiesResponse>(
      [this] { return NewContext(); }, v1::ListStudiesRequest(),
      [this](grpc::ClientContext* c, const v1::ListStudiesRequest& request,
             v1::ListStudiesResponse* r) { return stub_->ListStudies(c, request, r); },
      [](const v1::ListStudiesResponse& r) -> const auto& { return r.studies(); });
}

absl::Status StudyClient::DeleteStudy(const std::string& name, bool force) {
  v1::DeleteStudyRequest request;
  request.set_name(name);
  request.set_force(force);
  return Unary<google::protobuf::Empty>(
             NewContext(),
             [&](grpc::ClientContext* c, google::protobuf::Empty* r) {
               return stub_->DeleteStudy(c, request, r);
             })
      .status();
}

absl::StatusOr<std::vector<v1::Worker>> StudyClient::ListWorkers() {
  auto response = Read<v1::ListWorkersResponse>(
      [this] { return NewContext(); }, [&](grpc::ClientContext* c, v1::ListWorkersResponse* r) {
        return stub_->ListWorkers(c, v1::ListWorkersRequest(), r);
      });
  if (!response.ok()) return response.status();
  return std::vector<v1::Worker>(response->workers().begin(), response->workers().end());
}

absl::StatusOr<v1::Study> StudyClient::StopStudy(const std::string& name) {
  v1::StopStudyRequest request;
  request.set_name(name);
  return Unary<v1::Study>(NewContext(), [&](grpc::ClientContext* c, v1::Study* r) {
    return stub_->StopStudy(c, request, r);
  });
}

absl::StatusOr<v1::Study> StudyClient::UpdateStudy(const v1::UpdateStudyRequest& request) {
  return Unary<v1::Study>(NewContext(), [&](grpc::ClientContext* c, v1::Study* r) {
    return stub_->UpdateStudy(c, request, r);
  });
}

absl::StatusOr<std::vector<v1::Trial>> StudyClient::ListTrials(const std::string& study) {
  v1::ListTrialsRequest request;
  request.set_study(study);
  return AllPages<v1::Trial, v1::ListTrialsResponse>(
      [this] { return NewContext(); }, std::move(request),
      [this](grpc::ClientContext* c, const v1::ListTrialsRequest& request,
             v1::ListTrialsResponse* r) { return stub_->ListTrials(c, request, r); },
      [](const v1::ListTrialsResponse& r) -> const auto& { return r.trials(); });
}

absl::Status StudyClient::EachTrialPage(
    v1::ListTrialsRequest request, const std::function<bool(v1::ListTrialsResponse&)>& on_page) {
  do {
    absl::StatusOr<v1::ListTrialsResponse> page = Page<v1::ListTrialsResponse>(
        [this] { return NewContext(); }, request,
        [this](grpc::ClientContext* c, const v1::ListTrialsRequest& request,
               v1::ListTrialsResponse* r) { return stub_->ListTrials(c, request, r); });
    if (!page.ok()) return page.status();
    if (!on_page(*page)) return absl::OkStatus();
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return absl::OkStatus();
}

absl::StatusOr<v1::StudyExport> StudyClient::ExportStudy(const std::string& study) {
  v1::StudyExport exported;
  absl::StatusOr<v1::Study> found = GetStudy(study);
  if (!found.ok()) return found.status();
  *exported.mutable_study() = *std::move(found);
  v1::ListTrialsRequest request;
  request.set_study(study);
  request.set_intermediate_values(true);
  absl::Status status = EachPage<v1::ListTrialsResponse>(
      [this] { return NewContext(); }, std::move(request),
      [this](grpc::ClientContext* c, const v1::ListTrialsRequest& request,
             v1::ListTrialsResponse* r) { return stub_->ListTrials(c, request, r); },
      [&](v1::ListTrialsResponse& page) {
        for (v1::Trial& trial : *page.mutable_trials()) *exported.add_trials() = std::move(trial);
        for (v1::TrialCurve& curve : *page.mutable_curves()) {
          *exported.add_curves() = std::move(curve);
        }
      });
  if (!status.ok()) return status;
  return exported;
}

absl::StatusOr<v1::Study> StudyClient::ImportStudy(const v1::StudyExport& exported) {
  return Unary<v1::Study>(NewContext(absl::Minutes(2)), [&](grpc::ClientContext* c, v1::Study* r) {
    return stub_->ImportStudy(c, exported, r);
  });
}

absl::StatusOr<v1::Trial> StudyClient::GetBestTrial(const std::string& study) {
  v1::GetBestTrialRequest request;
  request.set_study(study);
  return Read<v1::Trial>([this] { return NewContext(); },
                         [&](grpc::ClientContext* c, v1::Trial* r) {
                           return stub_->GetBestTrial(c, request, r);
                         });
}

absl::StatusOr<v1::GetParetoFrontResponse> StudyClient::GetParetoFront(const std::string& study) {
  v1::GetParetoFrontRequest request;
  request.set_study(study);
  v1::GetParetoFrontResponse front;
  do {
    absl::StatusOr<v1::GetParetoFrontResponse> page = Read<v1::GetParetoFrontResponse>(
        [this] { return NewContext(); },
        [&](grpc::ClientContext* c, v1::GetParetoFrontResponse* r) {
          return stub_->GetParetoFront(c, request, r);
        });
    if (!page.ok()) return page.status();
    for (v1::Trial& trial : *page->mutable_trials()) *front.add_trials() = std::move(trial);
    front.set_hypervolume(page->hypervolume());
    front.set_hypervolume_estimated(page->hypervolume_estimated());
    *front.mutable_reference_point() = page->reference_point();
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return front;
}

absl::StatusOr<v1::GetParamImportancesResponse> StudyClient::GetParamImportances(
    const v1::GetParamImportancesRequest& request) {
  return Read<v1::GetParamImportancesResponse>(
      [this] { return NewContext(); },
      [&](grpc::ClientContext* c, v1::GetParamImportancesResponse* r) {
        return stub_->GetParamImportances(c, request, r);
      });
}

absl::StatusOr<v1::SuggestTrialsResponse> StudyClient::SuggestTrials(
    const v1::SuggestTrialsRequest& request) {
  // A Bayesian suggestion for a long history takes a while on a small board.
  return Unary<v1::SuggestTrialsResponse>(
      NewContext(absl::Minutes(2)), [&](grpc::ClientContext* c, v1::SuggestTrialsResponse* r) {
        return stub_->SuggestTrials(c, request, r);
      });
}

absl::StatusOr<v1::ReportProgressResponse> StudyClient::ReportProgress(
    const v1::ReportProgressRequest& request) {
  return Unary<v1::ReportProgressResponse>(
      NewContext(), [&](grpc::ClientContext* c, v1::ReportProgressResponse* r) {
        return stub_->ReportProgress(c, request, r);
      });
}

absl::StatusOr<v1::Trial> StudyClient::CompleteTrial(const v1::CompleteTrialRequest& request) {
  return Unary<v1::Trial>(NewContext(), [&](grpc::ClientContext* c, v1::Trial* r) {
    return stub_->CompleteTrial(c, request, r);
  });
}

absl::StatusOr<v1::Trial> StudyClient::EnqueueTrial(const v1::EnqueueTrialRequest& request) {
  return Unary<v1::Trial>(NewContext(), [&](grpc::ClientContext* c, v1::Trial* r) {
    return stub_->EnqueueTrial(c, request, r);
  });
}

absl::StatusOr<v1::AddTrialsResponse> StudyClient::AddTrials(const v1::AddTrialsRequest& request) {
  return Unary<v1::AddTrialsResponse>(
      NewContext(), [&](grpc::ClientContext* c, v1::AddTrialsResponse* r) {
        return stub_->AddTrials(c, request, r);
      });
}

absl::Status StudyClient::Watch(
    const std::string& name, const std::function<void(const v1::StudyEvent&)>& on_event,
    bool summaries_only, uint64_t after_position,
    const std::function<void(const absl::Status& why, absl::Duration trying_for)>& on_retry,
    const std::function<void()>& on_answered) {
  v1::WatchStudyRequest request;
  request.set_name(name);
  request.set_after_position(after_position);
  request.set_summaries_only(summaries_only);
  absl::Time failing_since = absl::InfiniteFuture();
  for (absl::Duration pause = absl::Seconds(1);;) {
    grpc::ClientContext context;  // No deadline: a study may run for days.
    {
      absl::MutexLock lock(&mutex_);
      if (cancelled_) return absl::CancelledError("cancelled");
      watch_context_ = &context;
    }
    std::unique_ptr<grpc::ClientReader<v1::WatchStudyResponse>> reader =
        stub_->WatchStudy(&context, request);
    v1::WatchStudyResponse batch;
    for (bool first = true; reader->Read(&batch); first = false) {
      failing_since = absl::InfiniteFuture();
      pause = absl::Seconds(1);
      if (first && on_answered) on_answered();
      for (const v1::StudyEvent& event : batch.events()) {
        on_event(event);
        request.set_after_position(event.position());
      }
    }
    absl::Status status = FromGrpcStatus(reader->Finish());
    {
      absl::MutexLock lock(&mutex_);
      watch_context_ = nullptr;
      if (cancelled_) return absl::CancelledError("cancelled");
    }
    // A scheduler that stops (SIGTERM) ends watches UNAVAILABLE, or its server cancels the
    // calls still open at its deadline: CANCELLED that this client did not ask for is a
    // dropped stream too.
    if (!absl::IsUnavailable(status) && !absl::IsCancelled(status)) return status;
    failing_since = std::min(failing_since, absl::Now());
    const absl::Duration trying_for = kWatchRetryWindow - (absl::Now() - failing_since);
    if (trying_for < absl::ZeroDuration()) return status;
    if (on_retry) on_retry(status, trying_for);  // Not under mutex_: it may call Cancel().
    // Cancel() cuts the pause short.
    absl::MutexLock lock(&mutex_);
    mutex_.AwaitWithTimeout(absl::Condition(&cancelled_), pause);
    pause = std::min(pause * 2, absl::Seconds(8));
  }
}

void StudyClient::Cancel() {
  absl::MutexLock lock(&mutex_);
  cancelled_ = true;
  if (watch_context_ != nullptr) watch_context_->TryCancel();
}

}  // namespace dhpt::cli
