#pragma once

// StudyService: translates the user-facing RPCs into SchedulerCore calls. WatchStudy is served
// raw: its batches are written from events serialised once (watch_study_reactor.h).

#include <grpcpp/grpcpp.h>

#include "dhpt/v1/study_service.grpc.pb.h"
#include "services/common/timer_queue.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

class StudyServiceImpl
    : public v1::StudyService::WithRawCallbackMethod_WatchStudy<v1::StudyService::CallbackService> {
 public:
  explicit StudyServiceImpl(SchedulerCore* core) : core_(core) {}

  grpc::ServerUnaryReactor* CreateStudy(grpc::CallbackServerContext* context,
                                        const v1::StudySpec* request,
                                        v1::Study* response) override;
  grpc::ServerUnaryReactor* GetStudy(grpc::CallbackServerContext* context,
                                     const v1::GetStudyRequest* request,
                                     v1::Study* response) override;
  grpc::ServerUnaryReactor* ListStudies(grpc::CallbackServerContext* context,
                                        const v1::ListStudiesRequest* request,
                                        v1::ListStudiesResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const v1::ListWorkersRequest* request,
                                        v1::ListWorkersResponse* response) override;
  grpc::ServerUnaryReactor* StopStudy(grpc::CallbackServerContext* context,
                                      const v1::StopStudyRequest* request,
                                      v1::Study* response) override;
  grpc::ServerUnaryReactor* DeleteStudy(grpc::CallbackServerContext* context,
                                        const v1::DeleteStudyRequest* request,
                                        google::protobuf::Empty* response) override;
  grpc::ServerUnaryReactor* GetParamImportances(
      grpc::CallbackServerContext* context, const v1::GetParamImportancesRequest* request,
      v1::GetParamImportancesResponse* response) override;
  grpc::ServerUnaryReactor* UpdateStudy(grpc::CallbackServerContext* context,
                                        const v1::UpdateStudyRequest* request,
                                        v1::Study* response) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* context,
                                       const v1::ListTrialsRequest* request,
                                       v1::ListTrialsResponse* response) override;
  grpc::ServerUnaryReactor* GetParetoFront(grpc::CallbackServerContext* context,
                                           const v1::GetParetoFrontRequest* request,
                                           v1::GetParetoFrontResponse* response) override;
  grpc::ServerUnaryReactor* GetBestTrial(grpc::CallbackServerContext* context,
                                         const v1::GetBestTrialRequest* request,
                                         v1::Trial* response) override;
  grpc::ServerUnaryReactor* SuggestTrials(grpc::CallbackServerContext* context,
                                          const v1::SuggestTrialsRequest* request,
                                          v1::SuggestTrialsResponse* response) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* context,
                                           const v1::ReportProgressRequest* request,
                                           v1::ReportProgressResponse* response) override;
  grpc::ServerUnaryReactor* CompleteTrial(grpc::CallbackServerContext* context,
                                          const v1::CompleteTrialRequest* request,
                                          v1::Trial* response) override;
  grpc::ServerUnaryReactor* EnqueueTrial(grpc::CallbackServerContext* context,
                                         const v1::EnqueueTrialRequest* request,
                                         v1::Trial* response) override;
  grpc::ServerUnaryReactor* AddTrials(grpc::CallbackServerContext* context,
                                      const v1::AddTrialsRequest* request,
                                      v1::AddTrialsResponse* response) override;
  grpc::ServerUnaryReactor* ImportStudy(grpc::CallbackServerContext* context,
                                        const v1::StudyExport* request,
                                        v1::Study* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchStudy(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request) override;

 private:
  SchedulerCore* const core_;
  // Paces the WatchStudy streams' batches.
  TimerQueue watch_timers_;
};

}  // namespace dhpt::scheduler
