#include "services/scheduler/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

v1::StudySpec Study(v1::Model::Kind kind, bool allow_cpu_fallback = false) {
  v1::StudySpec spec;
  spec.mutable_model()->set_kind(kind);
  spec.set_allow_cpu_fallback(allow_cpu_fallback);
  return spec;
}

v1::WorkerCapabilities Worker(v1::WorkerCapabilities::DeviceKind device,
                              std::vector<v1::Model::Kind> models) {
  v1::WorkerCapabilities caps;
  caps.set_device_kind(device);
  for (auto model : models) caps.add_models(model);
  return caps;
}

const v1::WorkerCapabilities kCpuWorker =
    Worker(v1::WorkerCapabilities::CPU, {v1::Model::XGBOOST, v1::Model::RANDOM_FOREST, v1::Model::FUNCTION});
const v1::WorkerCapabilities kCudaWorker = Worker(v1::WorkerCapabilities::CUDA, {v1::Model::AUTOENCODER});
// A GPU worker on a node without a CUDA device (--device=cpu, or no GPU).
const v1::WorkerCapabilities kFallbackWorker = Worker(v1::WorkerCapabilities::CPU, {v1::Model::AUTOENCODER});
const v1::WorkerCapabilities kCudaAllModels = Worker(
    v1::WorkerCapabilities::CUDA, {v1::Model::AUTOENCODER, v1::Model::XGBOOST, v1::Model::RANDOM_FOREST});

TEST(PlacementTest, AutoencodersNeedCudaUnlessTheStudyAllowsTheCpu) {
  const v1::StudySpec strict = Study(v1::Model::AUTOENCODER);
  const v1::StudySpec fallback = Study(v1::Model::AUTOENCODER, true);
  EXPECT_TRUE(NeedsGpu(strict));
  EXPECT_FALSE(NeedsGpu(fallback));
  EXPECT_TRUE(CanRun(strict, kCudaWorker));
  EXPECT_FALSE(CanRun(strict, kFallbackWorker));
  EXPECT_FALSE(CanRun(strict, kCpuWorker));  // Never: the CPU worker has no libtorch.
  EXPECT_TRUE(CanRun(fallback, kCudaWorker));
  EXPECT_TRUE(CanRun(fallback, kFallbackWorker));
  EXPECT_FALSE(CanRun(fallback, kCpuWorker));
}

TEST(PlacementTest, CpuModelsGoToGpuWorkersOnlyWhenTheyAnnounceThem) {
  for (auto kind : {v1::Model::XGBOOST, v1::Model::RANDOM_FOREST}) {
    EXPECT_FALSE(NeedsGpu(Study(kind)));
    EXPECT_TRUE(CanRun(Study(kind), kCpuWorker));
    EXPECT_FALSE(CanRun(Study(kind), kCudaWorker));
    EXPECT_TRUE(CanRun(Study(kind), kCudaAllModels));
  }
}

// Model choice: each trial runs as its own model_kind, so a worker that runs any of the kinds
// runs the study (its trials of that kind: SchedulerCoreTest.AModelChoiceTrialIsAssignedAsItsOwnKind).
TEST(PlacementTest, AModelChoiceStudyGoesToWorkersThatRunAnyKindItChoosesAmong) {
  v1::StudySpec choice = Study(v1::Model::XGBOOST);
  v1::Parameter* kind = choice.add_parameters();
  kind->set_name("model_kind");
  kind->mutable_categorical()->add_values("XGBOOST");
  kind->mutable_categorical()->add_values("RANDOM_FOREST");
  const v1::WorkerCapabilities xgboost_only =
      Worker(v1::WorkerCapabilities::CPU, {v1::Model::XGBOOST});
  EXPECT_TRUE(CanRun(Study(v1::Model::XGBOOST), xgboost_only));
  EXPECT_TRUE(CanRun(choice, xgboost_only));
  EXPECT_FALSE(CanRun(choice, Worker(v1::WorkerCapabilities::CPU, {v1::Model::FUNCTION})));
  EXPECT_TRUE(CanRun(choice, kCpuWorker));
  EXPECT_TRUE(CanRun(choice, kCudaAllModels));
}

TEST(PlacementTest, WaitingReasonsSayWhatIsMissingAndWhatIsThere) {
  EXPECT_EQ(WaitingForWorker(Study(v1::Model::AUTOENCODER), {&kCpuWorker, &kCpuWorker, &kFallbackWorker}),
            "waiting for a CUDA worker that runs AUTOENCODER (connected: 3 CPU workers; set "
            "allow_cpu_fallback to let a GPU worker without a CUDA device run it)");
  EXPECT_EQ(WaitingForWorker(Study(v1::Model::AUTOENCODER, true), {}),
            "waiting for a worker that runs AUTOENCODER (no worker is connected)");
  EXPECT_THAT(WaitingForWorker(Study(v1::Model::XGBOOST), {&kCudaWorker, &kCpuWorker}),
              HasSubstr("(connected: 1 CPU worker, 1 CUDA worker)"));
}

}  // namespace
}  // namespace dhpt::scheduler
