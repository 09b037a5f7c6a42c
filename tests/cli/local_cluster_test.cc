#include "services/cli/local_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace dhpt::cli {
namespace {

using ::testing::ElementsAre;

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

}  // namespace
}  // namespace dhpt::cli
