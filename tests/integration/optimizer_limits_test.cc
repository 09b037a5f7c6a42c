// The suggestion memory budget against a real dhpt-scheduler process under a memory cap
// (RLIMIT_AS, as `prlimit --as=BYTES --pid PID` sets it): a spec whose suggestions would not
// fit is refused at submit, a suggestion that runs out of memory anyway fails its own study
// with a reason, and neither takes the scheduler or the other studies down.

#include <sys/resource.h>


#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "services/cli/study_client.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

// The address space the process has mapped now, which RLIMIT_AS caps.
int64_t MappedBytes(pid_t pid) { return ProcStatusBytes(pid, "VmSize"); }

// Caps the process at what it maps now plus `headroom`.
void CapMemory(pid_t pid, int64_t headroom) {
  const rlimit limit{.rlim_cur = static_cast<rlim_t>(MappedBytes(pid) + headroom),
                     .rlim_max = static_cast<rlim_t>(MappedBytes(pid) + headroom)};
  ASSERT_EQ(prlimit(pid, RLIMIT_AS, &limit, nullptr), 0);
}

// An ask-and-tell study (no worker needed): `parameters` as YAML list items.
v1::StudySpec External(const std::string& name, const std::string& algorithm,
                       const std::string& parameters) {
  return Spec(absl::StrCat("name: ", name, "\nmodel: {kind: EXTERNAL}\n",
                           "objective: {metric: loss, goal: MINIMIZE}\nalgorithm: ", algorithm,
                           "\nparameters:\n", parameters, "max_trials: 100000\n"));
}

absl::StatusOr<v1::SuggestTrialsResponse> Ask(cli::StudyClient& client, const std::string& study) {
  v1::SuggestTrialsRequest request;
  request.set_study(study);
  request.set_client_id("tester");
  return client.SuggestTrials(request);
}

// `count` results of random points (params p0.. from `value_of(parameter, trial)`).
absl::Status Add(cli::StudyClient& client, const std::string& study, int parameters, int count,
                 const std::function<void(google::protobuf::Value&, int, int)>& value_of) {
  for (int first = 0; first < count; first += 10000) {
    v1::AddTrialsRequest request;
    request.set_study(study);
    for (int t = first; t < std::min(count, first + 10000); ++t) {
      v1::AddedTrial& trial = *request.add_trials();
      for (int p = 0; p < parameters; ++p) value_of((*trial.mutable_params())[absl::StrCat("p", p)], p, t);
      (*trial.mutable_metrics())["loss"] = std::sin(0.37 * t) + 0.001 * t;
    }
    absl::StatusOr<v1::AddTrialsResponse> added = client.AddTrials(request);
    if (!added.ok()) return added.status();
  }
  return absl::OkStatus();
}

// Another study still works: a RANDOM study gets a trial.
void ServesAnotherStudy(SchedulerProcess& scheduler, cli::StudyClient& client, const std::string& name) {
  ASSERT_TRUE(scheduler.alive());
  ASSERT_TRUE(client.CreateStudy(External(name, "{name: RANDOM}", "  - {name: p0, double_range: {min: 0, max: 1}}\n")).ok());
  absl::StatusOr<v1::SuggestTrialsResponse> asked = Ask(client, name);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->trials_size(), 1);
  EXPECT_TRUE(scheduler.alive());
}

TEST(OptimizerLimitsTest, TheCategoricalBombIsRefusedAndTheCappedSchedulerServesOn) {
  SchedulerProcess scheduler;
  CapMemory(scheduler.pid(), int64_t{1} << 30);
  cli::StudyClient client(scheduler.address());
  // 100 categorical parameters of 1,000 values each: within every per-parameter limit, but
  // 100,000 one-hot columns (1.69 GB for one suggestion before the budget).
  std::string parameters;
  for (int p = 0; p < 100; ++p) {
    parameters += absl::StrCat("  - {name: p", p, ", categorical: {values: [");
    for (int v = 0; v < 1000; ++v) parameters += absl::StrCat(v ? ", " : "", "v", v);
    parameters += "]}}\n";
  }
  absl::StatusOr<v1::Study> bomb = client.CreateStudy(
      External("bomb", "{name: BAYESIAN, bayesian: {n_startup_trials: 2}}", parameters));
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bomb.status().message(), HasSubstr("MiB per suggestion, more than the budget of 256 MiB"));
  if (bomb.ok()) {
    // Accepted: its first model-based suggestion is what used to end the scheduler.
    ASSERT_TRUE(Add(client, "bomb", 100, 2, [](google::protobuf::Value& v, int p, int t) {
                  v.set_string_value(absl::StrCat("v", (p + t * 7) % 1000));
                }).ok());
    (void)Ask(client, "bomb");
  }
  ServesAnotherStudy(scheduler, client, "after-bomb");
}

TEST(OptimizerLimitsTest, ASuggestionOutOfMemoryFailsItsStudyNotTheScheduler) {
  SchedulerProcess scheduler;
  cli::StudyClient client(scheduler.address());
  // Within the budget (6 categoricals of 1,000 values: 6,000 columns), but its model over
  // 1,000 added trials takes a 48 MB matrix, and the scheduler is capped 32 MB above what it
  // maps once the trials are in.
  std::string parameters;
  for (int p = 0; p < 6; ++p) {
    parameters += absl::StrCat("  - {name: p", p, ", categorical: {values: [");
    for (int v = 0; v < 1000; ++v) parameters += absl::StrCat(v ? ", " : "", "v", v);
    parameters += "]}}\n";
  }
  ASSERT_TRUE(client.CreateStudy(External("tight", "{name: BAYESIAN}", parameters)).ok());
  ASSERT_TRUE(Add(client, "tight", 6, 1000, [](google::protobuf::Value& v, int p, int t) {
                v.set_string_value(absl::StrCat("v", (t * (p + 3) + p) % 1000));
              }).ok());
  CapMemory(scheduler.pid(), int64_t{32} << 20);
  absl::StatusOr<v1::SuggestTrialsResponse> asked = Ask(client, "tight");
  ASSERT_TRUE(scheduler.alive()) << "the scheduler died of its study's suggestion";
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->trials_size(), 0);
  absl::StatusOr<v1::Study> study = client.GetStudy("tight");
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_THAT(study->state_reason(), HasSubstr("ran out of memory"));
  // Asked again, it answers with the same reason rather than trying (and failing) again.
  ASSERT_TRUE(Ask(client, "tight").ok());
  ServesAnotherStudy(scheduler, client, "after-tight");
}

TEST(OptimizerLimitsTest, ABayesianSuggestionOver20000AddedTrialsStaysWithinItsBounds) {
  SchedulerProcess scheduler;
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(External("warm", "{name: BAYESIAN}",
                                          "  - {name: p0, double_range: {min: 0, max: 1}}\n"
                                          "  - {name: p1, double_range: {min: 0, max: 1}}\n")).ok());
  ASSERT_TRUE(Add(client, "warm", 2, 20000, [](google::protobuf::Value& v, int p, int t) {
                v.set_number_value(std::fmod(0.618034 * (t + 1) * (p + 1), 1.0));
              }).ok());
  // The suggestion must fit in the budget: the scheduler may map only that much more. Before
  // max_model_points it took 6.4 GB and 146 s.
  CapMemory(scheduler.pid(), optimizer::kSuggestionMemoryBudgetBytes);
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::SuggestTrialsResponse> asked = Ask(client, "warm");
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->trials_size(), 1) << client.GetStudy("warm")->state_reason();
  // docs/optimizers.md#memory: about 0.3 s here; 10 s leaves room for a loaded machine.
  EXPECT_LT(took, absl::Seconds(10));
  EXPECT_TRUE(scheduler.alive());
}

}  // namespace
}  // namespace dhpt::testing
