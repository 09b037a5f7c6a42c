#pragma once

// StudyService: translates the user-facing RPCs into SchedulerCore calls.

#include <grpcpp/grpcpp.h>

#include "dhpt/v1/study_service.grpc.pb.h"
#include "services/rpc/stream_outbox.h"
#include "services/scheduler/scheduler_core.h"

namespace dhpt::scheduler {

class StudyServiceImpl : public v1::StudyService::CallbackService {
 public:
  // `watch_limits` bounds what waits for each WatchStudy reader.
  StudyServiceImpl(SchedulerCore* core, rpc::OutboxLimits watch_limits)
      : core_(core), watch_limits_(watch_limits) {}

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
  grpc::ServerWriteReactor<v1::StudyEvent>* WatchStudy(
      grpc::CallbackServerContext* context, const v1::WatchStudyRequest* request) override;

 private:
  SchedulerCore* const core_;
  const rpc::OutboxLimits watch_limits_;
};

}  // namespace dhpt::scheduler
