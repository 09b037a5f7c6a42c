#pragma once

// The CLI's StudyService client: every unary call has a deadline; WatchStudy streams events
// to a callback until the study ends or Cancel is called.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "services/common/transport_security.h"

namespace dhpt::cli {

class StudyClient {
 public:
  explicit StudyClient(const std::string& address, const ChannelSecurity& security = {},
                       absl::Duration deadline = absl::Seconds(10));

  absl::StatusOr<v1::Study> CreateStudy(const v1::StudySpec& spec);
  absl::StatusOr<v1::Study> GetStudy(const std::string& name);
  // Every study (all pages).
  absl::StatusOr<std::vector<v1::Study>> ListStudies();
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers();
  absl::StatusOr<v1::Study> StopStudy(const std::string& name);
  absl::StatusOr<v1::Study> UpdateStudy(const v1::UpdateStudyRequest& request);
  absl::Status DeleteStudy(const std::string& name, bool force);
  // Every trial of the study in number order (all pages).
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(const std::string& study);
  // The request's trials page by page, each page to `on_page` until it returns false or the
  // last page has come: for callers that must not hold a whole large study (the dashboard).
  absl::Status EachTrialPage(v1::ListTrialsRequest request,
                             const std::function<bool(v1::ListTrialsResponse&)>& on_page);
  // Backups: the study, every trial and every intermediate value (dhpt export), and its
  // restore (dhpt import), which waits longer: a large study takes a while to store.
  absl::StatusOr<v1::StudyExport> ExportStudy(const std::string& study);
  absl::StatusOr<v1::Study> ImportStudy(const v1::StudyExport& exported);
  // A scheduler busy sending other callers' pages answers RESOURCE_EXHAUSTED: a page is asked
  // for again, with growing pauses (100 ms up to 2 s), for this long.
  static constexpr absl::Duration kPageRetryWindow = absl::Seconds(60);
  // How often a read (Get*, List*, ExportStudy) is sent when a stopping scheduler answers it
  // CANCELLED (study_client.cc, Read); a write is never sent twice for it.
  static constexpr int kCancelledReadTries = 5;
  absl::StatusOr<v1::Trial> GetBestTrial(const std::string& study);
  // The whole front (all pages), with its hypervolume as of the last page.
  absl::StatusOr<v1::GetParetoFrontResponse> GetParetoFront(const std::string& study);
  absl::StatusOr<v1::GetParamImportancesResponse> GetParamImportances(
      const v1::GetParamImportancesRequest& request);
  // Ask and tell. SuggestTrials may wait for a model-based suggestion: its deadline is longer.
  absl::StatusOr<v1::SuggestTrialsResponse> SuggestTrials(const v1::SuggestTrialsRequest& request);
  absl::StatusOr<v1::ReportProgressResponse> ReportProgress(
      const v1::ReportProgressRequest& request);
  absl::StatusOr<v1::Trial> CompleteTrial(const v1::CompleteTrialRequest& request);
  // Warm starts.
  absl::StatusOr<v1::Trial> EnqueueTrial(const v1::EnqueueTrialRequest& request);
  absl::StatusOr<v1::AddTrialsResponse> AddTrials(const v1::AddTrialsRequest& request);
  // Calls `on_event` for each of the study's events (only its summaries when
  // `summaries_only`) until the study ends (OK), Cancel() is called (CANCELLED) or the stream
  // fails. A stream that drops (UNAVAILABLE: the scheduler restarted, the network blinked) is
  // watched again after the last event's position, so no change is lost or repeated, with
  // growing pauses (1 s up to 8 s); once kWatchRetryWindow has passed without an answer, the
  // error is returned.
  // `after_position` resumes an earlier watch after the last event it handled (0: from now).
  // `on_retry`, when given, hears of each drop before the pause that follows it: why, and how
  // much longer the watch goes on trying without an event (so a user is not left wondering).
  // `on_answered`, when given, hears of each stream's first answer, before its events: the
  // scheduler answers a resumed watch at once, with no events when nothing changed, so this is
  // when a dropped watch is up again.
  absl::Status Watch(
      const std::string& name, const std::function<void(const v1::StudyEvent&)>& on_event,
      bool summaries_only = false, uint64_t after_position = 0,
      const std::function<void(const absl::Status& why, absl::Duration trying_for)>& on_retry = {},
      const std::function<void()>& on_answered = {});
  // Long enough for a scheduler to restart (a pod rescheduled, a database recovered).
  static constexpr absl::Duration kWatchRetryWindow = absl::Seconds(60);
  // Ends a Watch in progress; callable from any thread.
  void Cancel();

 private:
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration deadline = absl::ZeroDuration()) const;

  std::unique_ptr<v1::StudyService::Stub> stub_;
  const absl::Duration deadline_;
  absl::Mutex mutex_;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mutex_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace dhpt::cli
