#include "services/cli/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace dhpt::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::StudySpec XgboostStudy() {
  v1::StudySpec spec;
  spec.mutable_model()->set_kind(v1::Model::XGBOOST);
  return spec;
}

// Workers read CSV files only under their --data_root: a local cluster's get the directory the
// user runs dhpt in, unless told otherwise.
TEST(LocalClusterTest, WorkersGetTheCurrentDirectoryAsDataRoot) {
  absl::StatusOr<LocalClusterOptions> options = ResolveLocalCluster(XgboostStudy(), {});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->data_roots, ElementsAre(std::filesystem::current_path().string()));
  EXPECT_THAT(DataRootFlags(options->data_roots),
              ElementsAre("--data_root=" + std::filesystem::current_path().string()));
}

TEST(LocalClusterTest, DataRootsAsGivenMadeAbsolute) {
  LocalClusterRequest request;
  request.data_roots = {"/srv/data", "relative", ""};
  absl::StatusOr<LocalClusterOptions> options = ResolveLocalCluster(XgboostStudy(), request);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->data_roots,
              ElementsAre("/srv/data", (std::filesystem::current_path() / "relative").string()));
  EXPECT_EQ(LocalDataRoots(request), options->data_roots);
}

TEST(LocalClusterTest, CommandsAndLabelsReachTheOptions) {
  LocalClusterRequest request;
  request.commands = {"gbr=/usr/bin/python3 /opt/train/gbr.py", "quad=/bin/sh q.sh"};
  request.labels = "board=pi4";
  absl::StatusOr<LocalClusterOptions> options = ResolveLocalCluster(XgboostStudy(), request);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->commands, request.commands);
  EXPECT_EQ(options->labels, "board=pi4");
}

v1::WorkerCapabilities CpuWorker() {
  v1::WorkerCapabilities worker;
  worker.set_device_kind(v1::WorkerCapabilities::CPU);
  worker.add_models(v1::Model::XGBOOST);
  worker.add_models(v1::Model::COMMAND);
  worker.add_models(v1::Model::AUTOENCODER);
  return worker;
}

TEST(LocalClusterTest, AStudyNoLocalWorkerCanRunIsRefusedWithTheFix) {
  v1::StudySpec spec;
  spec.set_name("mine");
  spec.mutable_model()->set_kind(v1::Model::COMMAND);
  spec.mutable_model()->set_command("gbr");
  (*spec.mutable_worker_selector())["board"] = "pi4";
  v1::WorkerCapabilities worker = CpuWorker();
  absl::Status status = CheckLocalWorkersCanRun(spec, {worker});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("give dhpt local --command=gbr=PATH"));
  EXPECT_THAT(status.message(), HasSubstr("--command='gbr=/usr/bin/python3 train.py'"));
  EXPECT_THAT(status.message(), HasSubstr("give dhpt local --labels=board=pi4"));
  worker.add_commands("gbr");
  (*worker.mutable_labels())["board"] = "pi4";
  EXPECT_TRUE(CheckLocalWorkersCanRun(spec, {worker}).ok());

  v1::StudySpec autoencoder;
  autoencoder.mutable_model()->set_kind(v1::Model::AUTOENCODER);
  status = CheckLocalWorkersCanRun(autoencoder, {CpuWorker()});
  EXPECT_THAT(status.message(), HasSubstr("this machine has no CUDA device"));
  autoencoder.set_allow_cpu_fallback(true);
  EXPECT_TRUE(CheckLocalWorkersCanRun(autoencoder, {CpuWorker()}).ok());
  // EXTERNAL studies are for the user's own client, never the workers.
  v1::StudySpec external;
  external.mutable_model()->set_kind(v1::Model::EXTERNAL);
  EXPECT_TRUE(CheckLocalWorkersCanRun(external, {CpuWorker()}).ok());
}

}  // namespace
}  // namespace dhpt::cli
