// dhpt extend's changes: what each puts in the UpdateStudy request, and what is refused.

#include "services/cli/extend_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "services/cli/study_client.h"

namespace dhpt::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ExtendCommandTest, OnlyTheChangesGivenAreInTheMask) {
  absl::StatusOr<v1::UpdateStudyRequest> request =
      ExtendRequest("s", {.max_trials = 40, .trial_timeout = "1h30m"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->name(), "s");
  EXPECT_THAT(request->update_mask().paths(), ElementsAre("max_trials", "trial_timeout"));
  EXPECT_EQ(request->spec().max_trials(), 40);
  EXPECT_EQ(request->spec().trial_timeout().seconds(), 5400);
}

TEST(ExtendCommandTest, NoneClearsALimit) {
  absl::StatusOr<v1::UpdateStudyRequest> request =
      ExtendRequest("s", {.max_failed_trials = "none", .trial_timeout = "none"});
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_THAT(request->update_mask().paths(), ElementsAre("max_failed_trials", "trial_timeout"));
  EXPECT_FALSE(request->spec().has_max_failed_trials());
  EXPECT_FALSE(request->spec().has_trial_timeout());
}

TEST(ExtendCommandTest, NothingOrNonsenseIsRefused) {
  EXPECT_THAT(ExtendRequest("s", {}).status().message(), HasSubstr("nothing to change"));
  EXPECT_THAT(ExtendRequest("s", {.trial_timeout = "ten minutes"}).status().message(),
              HasSubstr("not a duration such as 600s, 10m or 1h30m"));
  EXPECT_THAT(ExtendRequest("s", {.max_failed_trials = "many"}).status().message(),
              HasSubstr("neither a number nor none"));
}

// The usage's line break reaches the terminal as one: it was printed escaped, as "\x0a".
TEST(ExtendCommandTest, ARefusalShowsTheUsageOnItsOwnLines) {
  StudyClient client("127.0.0.1:1");  // Never called: refused before any call.
  std::ostringstream out, err;
  EXPECT_EQ(RunExtend(client, "s", {}, out, err), 2);  // A usage error.
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), absl::StrCat("dhpt: nothing to change: give at least one of --max_trials, "
                                    "--parallel_trials, --max_failed_trials, --trial_timeout "
                                    "[INVALID_ARGUMENT]\nusage: ",
                                    kExtendUsage, "\n"));
  EXPECT_THAT(err.str(), Not(HasSubstr("\\x0a")));
}

}  // namespace
}  // namespace dhpt::cli
