// dhpt extend's flags: what each puts in the UpdateStudy request, and what is refused.

#include "services/cli/extend_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"

ABSL_DECLARE_FLAG(std::optional<int>, max_trials);
ABSL_DECLARE_FLAG(std::optional<int>, parallel_trials);
ABSL_DECLARE_FLAG(std::optional<std::string>, max_failed_trials);
ABSL_DECLARE_FLAG(std::optional<std::string>, trial_timeout);

namespace dhpt::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ExtendCommandTest : public ::testing::Test {
 protected:
  ~ExtendCommandTest() override {
    absl::SetFlag(&FLAGS_max_trials, std::nullopt);
    absl::SetFlag(&FLAGS_parallel_trials, std::nullopt);
    absl::SetFlag(&FLAGS_max_failed_trials, std::nullopt);
    absl::SetFlag(&FLAGS_trial_timeout, std::nullopt);
  }
};

TEST_F(ExtendCommandTest, OnlyTheFlagsGivenAreInTheMask) {
  absl::SetFlag(&FLAGS_max_trials, 40);
  absl::SetFlag(&FLAGS_trial_timeout, std::string("1h30m"));
  absl::StatusOr<v1::UpdateStudyRequest> request = ExtendRequestFromFlags("s");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->name(), "s");
  EXPECT_THAT(request->update_mask().paths(), ElementsAre("max_trials", "trial_timeout"));
  EXPECT_EQ(request->spec().max_trials(), 40);
  EXPECT_EQ(request->spec().trial_timeout().seconds(), 5400);
}

TEST_F(ExtendCommandTest, NoneClearsALimit) {
  absl::SetFlag(&FLAGS_max_failed_trials, std::string("none"));
  absl::SetFlag(&FLAGS_trial_timeout, std::string("none"));
  absl::StatusOr<v1::UpdateStudyRequest> request = ExtendRequestFromFlags("s");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_THAT(request->update_mask().paths(), ElementsAre("max_failed_trials", "trial_timeout"));
  EXPECT_FALSE(request->spec().has_max_failed_trials());
  EXPECT_FALSE(request->spec().has_trial_timeout());
}

TEST_F(ExtendCommandTest, NothingOrNonsenseIsRefused) {
  EXPECT_THAT(ExtendRequestFromFlags("s").status().message(), HasSubstr("nothing to change"));
  absl::SetFlag(&FLAGS_trial_timeout, std::string("ten minutes"));
  EXPECT_THAT(ExtendRequestFromFlags("s").status().message(),
              HasSubstr("not a duration such as 600s, 10m or 1h30m"));
  absl::SetFlag(&FLAGS_trial_timeout, std::nullopt);
  absl::SetFlag(&FLAGS_max_failed_trials, std::string("many"));
  EXPECT_THAT(ExtendRequestFromFlags("s").status().message(),
              HasSubstr("neither a number nor none"));
}

}  // namespace
}  // namespace dhpt::cli
