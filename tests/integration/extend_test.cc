// `dhpt extend` with real processes: a finished TPE study given 20 more trials runs them with
// its optimiser going on from its history, through a SIGKILL of the scheduler mid-way.

#include <signal.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// Slow enough (0.1 s a trial) for the scheduler to be killed while the extension runs.
constexpr char kStudy[] = R"(
model: {kind: FUNCTION, function: branin, fixed: {seconds: 0.1}}
algorithm: {name: TPE, seed: 11}
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)";

v1::StudySpec TpeStudy(const std::string& name, int max_trials) {
  v1::StudySpec spec = Spec(kStudy);
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  return spec;
}

absl::StatusOr<v1::Study> GetStudy(const std::string& address, const std::string& name) {
  return cli::StudyClient(address).GetStudy(name);
}

TEST(ExtendTest, AFinishedStudyExtendedByTwentyTrialsGoesOnThroughASchedulerKill) {
  TempDirectory directory;
  const std::string db = absl::StrCat("--db=", directory.path(), "/scheduler.db");
  auto scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
  const std::string address = scheduler->address();
  const std::string flags = absl::StrCat(" --scheduler=", address);
  ASSERT_TRUE(cli::StudyClient(address).CreateStudy(TpeStudy("tpe", 20)).ok());
  // One slot: each suggestion is made from every trial before it, so two runs that suggest
  // the same points are the same optimiser on the same history.
  const std::unique_ptr<cli::ChildProcess> worker = StartWorkerProcess(address, "w", 1);
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> study = GetStudy(address, "tpe");
    return study.ok() && study->state() == v1::Study::COMPLETED;
  }));

  auto [code, output] = RunBinary("dhpt", absl::StrCat("extend tpe --max_trials=40", flags));
  ASSERT_EQ(code, 0) << output;
  EXPECT_THAT(output, HasSubstr("tpe RUNNING  20/40 done"));

  // Killed (SIGKILL) mid-way, started again on the same database and address.
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> study = GetStudy(address, "tpe");
    return study.ok() && study->trials_completed() >= 22;
  }));
  ASSERT_LT(GetStudy(address, "tpe")->trials_completed(), 40) << "too fast to kill mid-way";
  scheduler->Kill();
  scheduler = std::make_unique<SchedulerProcess>(
      std::vector<std::string>{db, absl::StrCat("--listen=", address)});
  ASSERT_EQ(scheduler->address(), address);
  absl::StatusOr<v1::Study> study;
  ASSERT_TRUE(WaitFor([&] {
    study = GetStudy(address, "tpe");
    return study.ok() && study->state() == v1::Study::COMPLETED;
  })) << study.status();
  EXPECT_EQ(study->spec().max_trials(), 40);
  EXPECT_EQ(study->trials_completed(), 40);
  EXPECT_EQ(study->trials_failed(), 0);

  // The same study of 40 trials at once suggests the same 40 points: TPE went on from its 20
  // trials, across the kill, rather than starting again.
  ASSERT_TRUE(cli::StudyClient(address).CreateStudy(TpeStudy("reference", 40)).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> reference = GetStudy(address, "reference");
    return reference.ok() && reference->state() == v1::Study::COMPLETED;
  }));
  absl::StatusOr<std::vector<v1::Trial>> extended = cli::StudyClient(address).ListTrials("tpe");
  absl::StatusOr<std::vector<v1::Trial>> reference =
      cli::StudyClient(address).ListTrials("reference");
  ASSERT_TRUE(extended.ok() && reference.ok());
  ASSERT_EQ(extended->size(), 40u);
  ASSERT_EQ(reference->size(), 40u);
  for (size_t n = 20; n < 40; ++n) {
    EXPECT_EQ(extended->at(n).params().at("x1").double_value(),
              reference->at(n).params().at("x1").double_value())
        << "trial " << n;
  }

  // Finished again and without room: the CLI says how to get more.
  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("extend tpe --max_trials=40", flags));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("raise max_trials above 40"));
  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("extend tpe", flags));
  EXPECT_EQ(code, 2);  // A usage error.
  EXPECT_THAT(output, HasSubstr("nothing to change"));
}

// A usage of two lines (extend, importance, plot) was printed with its line break escaped,
// as "\x0a", in every refusal of the words given.
TEST(ExtendTest, UsageErrorsPrintTheUsageOnItsOwnLines) {
  for (const char* args : {"extend", "extend s --scheduler=127.0.0.1:1", "importance", "plot"}) {
    SCOPED_TRACE(args);
    auto [code, output] = RunBinary("dhpt", args);
    EXPECT_EQ(code, 2);  // A usage error (docs/cli.md, "Exit status").
    EXPECT_THAT(output, HasSubstr("[INVALID_ARGUMENT]\nusage: dhpt "));
    EXPECT_THAT(output, ContainsRegex("\n +\\[--"));  // the usage's second line
    EXPECT_THAT(output, Not(HasSubstr("\\x0a")));
  }
}

}  // namespace
}  // namespace dhpt::testing
