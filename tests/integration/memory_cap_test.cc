// The memory cap (--max_memory_bytes) on a real dhpt-scheduler process with a real SQLite
// file: filled with studies in progress past its cap, it refuses new work with
// RESOURCE_EXHAUSTED instead of growing until the kernel kills it, keeps answering reads, and
// takes work again once studies are deleted.

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

TEST(MemoryCapTest, PastItsCapTheSchedulerRefusesNewWorkAndKeepsAnswering) {
  constexpr int64_t kCap = int64_t{96} << 20;  // Idle it holds about 20 MiB.
  TempDirectory directory;
  SchedulerProcess scheduler({absl::StrCat("--db=", directory.path(), "/scheduler.db"),
                              absl::StrCat("--max_memory_bytes=", kCap)});
  ASSERT_FALSE(scheduler.address().empty());
  cli::StudyClient client(scheduler.address());
  auto spec = [](int n) {
    return Spec(absl::StrCat(R"(
name: fill-)", n, R"(
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
max_trials: 100
parameters: [{name: x, double_range: {min: 0, max: 1}}, {name: y, double_range: {min: 0, max: 1}}]
)"));
  };
  // Studies in progress hold their trials in memory: 5,000 added trials a call, about 7 MB,
  // less than the cap's headroom (a tenth of it), checked before each call.
  absl::Status refused;
  int studies = 0;
  for (int call = 0; call < 100 && refused.ok(); ++call) {
    if (call % 4 == 0) {
      absl::StatusOr<v1::Study> created = client.CreateStudy(spec(studies));
      if (!created.ok()) {
        refused = created.status();
        break;
      }
      ++studies;
    }
    v1::AddTrialsRequest add;
    add.set_study(absl::StrCat("fill-", studies - 1));
    for (int t = 0; t < 5'000; ++t) {
      v1::AddedTrial& trial = *add.add_trials();
      (*trial.mutable_params())["x"].set_number_value((t + 0.5) / 5'000);
      (*trial.mutable_params())["y"].set_number_value((call % 4 + 0.5) / 4);
      (*trial.mutable_metrics())["loss"] = t;
    }
    absl::StatusOr<v1::AddTrialsResponse> added = client.AddTrials(add);
    if (!added.ok()) refused = added.status();
  }
  ASSERT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_NE(refused.message().find("--max_memory_bytes"), std::string::npos) << refused;
  std::printf("refused after %d studies at %lld MiB resident: %s\n", studies,
              static_cast<long long>(scheduler.resident_bytes() >> 20),
              std::string(refused.message()).c_str());
  // Alive, under its cap, refusing new studies and still answering.
  ASSERT_TRUE(scheduler.alive());
  EXPECT_LT(scheduler.resident_bytes(), kCap);
  EXPECT_TRUE(absl::IsResourceExhausted(client.CreateStudy(spec(1000)).status()));
  EXPECT_TRUE(client.GetStudy("fill-0").ok());
  absl::StatusOr<std::vector<v1::Study>> listed = client.ListStudies();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(static_cast<int>(listed->size()), studies);

  // Deleting studies frees their memory: new work is taken again.
  for (int n = 0; n < studies; ++n) {
    ASSERT_TRUE(client.DeleteStudy(absl::StrCat("fill-", n), /*force=*/true).ok());
  }
  EXPECT_TRUE(WaitFor([&] { return client.CreateStudy(spec(1000)).ok(); }, absl::Seconds(20)));
  EXPECT_TRUE(scheduler.alive());
}

// A cap below what the scheduler holds at start would refuse every study: it does not start,
// and says how much to give (the hostile review started one with --max_memory_bytes=1000000).
TEST(MemoryCapTest, ACapBelowTheStartingMemoryIsRefusedAtStart) {
  TempDirectory directory;
  const auto [status, output] = RunBinary(
      "dhpt-scheduler", absl::StrCat("--listen=127.0.0.1:0 --db=", directory.path(),
                                     "/scheduler.db --max_memory_bytes=1000000"));
  EXPECT_EQ(status, 2) << output;
  EXPECT_NE(output.find("is below what the scheduler holds at start"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace dhpt::testing
