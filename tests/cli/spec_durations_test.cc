// Durations in study files as people write them, and dhpt validate's list of every error.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "services/cli/study_file.h"
#include "services/cli/validate_command.h"

namespace dhpt::cli::spec_durations_test {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = R"(
name: t
model: {kind: FUNCTION, function: branin}
parameters:
  - {name: x1, double_range: {min: -5, max: 10}}
  - {name: x2, double_range: {min: 0, max: 15}}
max_trials: 5
)";

absl::StatusOr<v1::StudySpec> WithTimeout(const std::string& timeout) {
  return ParseStudySpec(std::string(kSpec) + "trial_timeout: " + timeout + "\n");
}

TEST(SpecDurationsTest, TrialTimeoutTakesMinutesAndHours) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"10m", 600}, {"1h30m", 5400}, {"600s", 600}, {"\"600s\"", 600}, {"1.5h", 5400}, {"90s", 90}};
  for (const auto& [text, seconds] : cases) {
    absl::StatusOr<v1::StudySpec> spec = WithTimeout(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->trial_timeout().seconds(), seconds) << text;
    EXPECT_EQ(spec->trial_timeout().nanos(), 0) << text;
  }
  absl::StatusOr<v1::StudySpec> fraction = WithTimeout("2.5s");
  ASSERT_TRUE(fraction.ok()) << fraction.status();
  EXPECT_EQ(fraction->trial_timeout().seconds(), 2);
  EXPECT_EQ(fraction->trial_timeout().nanos(), 500'000'000);
  for (const char* bad : {"ten minutes", "-5m", "10"}) {
    absl::StatusOr<v1::StudySpec> spec = WithTimeout(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("trial_timeout")) << bad;
  }
  // Only study files: a compare matrix or another message keeps its own fields as they are.
  EXPECT_THAT(*YamlToJson("trial_timeout: 10m"), HasSubstr("\"10m\""));
}

TEST(ValidateCommandTest, ListsEveryErrorAndCreatesNothing) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "validate";
  std::filesystem::create_directories(dir);
  const std::string bad = (dir / "bad.yaml").string();
  std::ofstream(bad) << R"(
name: xgb
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 500, features: 10}}
parameters:
  - {name: colsample_bynode, double_range: {min: 0.5, max: 1.5}}
  - {name: max_depth, int_range: {min: 8, max: 2}}
max_trials: 0
)";
  std::ostringstream out, err;
  EXPECT_EQ(RunValidate(bad, out, err), 1);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(), bad + ": 3 errors\n"
                       "  parameters[1].int_range: min (8) must be less than max (2)\n"
                       "  max_trials: must be between 1 and 1000000\n"
                       "  parameters[0].double_range: colsample_bynode must be in (0, 1], got 1.5\n");

  const std::string good = (dir / "good.yaml").string();
  std::ofstream(good) << kSpec << "trial_timeout: 10m\n";
  std::ostringstream good_out, good_err;
  EXPECT_EQ(RunValidate(good, good_out, good_err), 0) << good_err.str();
  EXPECT_THAT(good_out.str(), HasSubstr(": valid: study t, FUNCTION, RANDOM, 5 trials"));

  std::ostringstream missing_out, missing_err;
  EXPECT_EQ(RunValidate((dir / "none.yaml").string(), missing_out, missing_err), 1);
  EXPECT_THAT(missing_err.str(), HasSubstr("cannot read"));
}

}  // namespace
}  // namespace dhpt::cli::spec_durations_test
