// Ask and tell on the real core and a real SQLite store: leases, results from the right client
// only and once, lease expiry, early stopping on reported values, and a restart.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/text_format.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::StudySpec ExternalStudy(const std::string& name, int max_trials, int parallel,
                            const std::string& extra = "") {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        model { kind: EXTERNAL }
        objective { metric: "loss" goal: MINIMIZE }
        algorithm { name: RANDOM seed: 3 }
        parameters { name: "lr" double_range { min: 0.001 max: 0.1 log: true } }
        parameters { name: "layers" int_range { min: 1 max: 4 } })pb" + extra,
      &spec));
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  spec.set_parallel_trials(parallel);
  return spec;
}

class ClientTrialsTest : public ::testing::Test {
 protected:
  ClientTrialsTest() { Start(); }
  void Start() {
    SchedulerOptions options;
    options.heartbeat_interval = absl::Seconds(1);
    options.client_lease = absl::Minutes(5);
    options.clock = [this] { return now_; };
    core_ = std::make_unique<SchedulerCore>(db_.get(), options);
    ASSERT_TRUE(core_->Recover().ok());
  }
  void Restart() {
    core_.reset();
    db_.Reopen();
    Start();
  }
  std::vector<int64_t> Ask(const std::string& study, int count, const std::string& client,
                           const std::string& request_id = "") {
    absl::StatusOr<v1::SuggestTrialsResponse> response =
        core_->SuggestTrials(study, count, client, request_id);
    EXPECT_TRUE(response.ok()) << response.status();
    std::vector<int64_t> numbers;
    if (response.ok()) {
      for (const v1::Trial& trial : response->trials()) numbers.push_back(trial.number());
    }
    return numbers;
  }
  absl::StatusOr<v1::Trial> Tell(const std::string& study, int64_t trial,
                                 const std::string& client, double loss) {
    v1::CompleteTrialRequest request;
    request.set_study(study);
    request.set_trial(trial);
    request.set_client_id(client);
    (*request.mutable_metrics())["loss"] = loss;
    return core_->CompleteTrial(request);
  }
  absl::StatusOr<v1::ReportProgressResponse> Report(const std::string& study, int64_t trial,
                                                    const std::string& client,
                                                    std::optional<int64_t> step = {},
                                                    double value = 0) {
    v1::ReportProgressRequest request;
    request.set_study(study);
    request.set_trial(trial);
    request.set_client_id(client);
    if (step) {
      request.set_step(*step);
      request.set_value(value);
    }
    return core_->ReportClientProgress(request);
  }

  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(ClientTrialsTest, OnlyExternalStudiesAreAskedAndNoWorkerEverGetsTheirTrials) {
  v1::StudySpec function;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(name: "f" max_trials: 3 model { kind: FUNCTION function: "branin" }
           parameters { name: "x1" double_range { min: -5 max: 10 } }
           parameters { name: "x2" double_range { min: 0 max: 15 } })pb", &function));
  ASSERT_TRUE(core_->CreateStudy(function).ok());
  EXPECT_EQ(core_->SuggestTrials("f", 1, "me").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 4, 0)).ok());
  EXPECT_THAT(core_->GetStudy("ext")->state_reason(), HasSubstr("waiting for a client"));
  // A worker that claims it runs EXTERNAL models is given none of them.
  RecordingChannel channel;
  const absl::StatusOr<uint64_t> session = core_->ConnectWorker(
      Hello("liar", 4, {v1::Model::EXTERNAL, v1::Model::FUNCTION}), {}, &channel);
  ASSERT_TRUE(session.ok());
  for (const v1::Assign& assign : channel.Assigns()) EXPECT_EQ(assign.study(), "f");
  EXPECT_EQ(core_->GetStudy("ext")->trials_running(), 0);
  core_->DisconnectWorker(*session, "done");  // Before `channel` goes: nothing more is sent to it.
}

TEST_F(ClientTrialsTest, AClientGetsItsLeasedTrialsBackAndTheCapHolds) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 3, 2)).ok());
  EXPECT_THAT(Ask("ext", 5, "a"), ElementsAre(0, 1));  // parallel_trials is 2.
  EXPECT_THAT(Ask("ext", 5, "a"), ElementsAre(0, 1));  // The same ones, not new ones.
  EXPECT_TRUE(Ask("ext", 1, "b").empty());
  ASSERT_TRUE(Tell("ext", 0, "a", 0.5).ok());
  EXPECT_THAT(Ask("ext", 1, "b"), ElementsAre(2));
  ASSERT_TRUE(Tell("ext", 1, "a", 0.25).ok());
  ASSERT_TRUE(Tell("ext", 2, "b", 0.75).ok());
  const v1::Study study = *core_->GetStudy("ext");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 3);
  EXPECT_EQ(study.best_trial().number(), 1);
  EXPECT_EQ(study.best_trial().client_id(), "a");
  absl::StatusOr<v1::SuggestTrialsResponse> after = core_->SuggestTrials("ext", 1, "a");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->trials_size(), 0);
  EXPECT_EQ(after->study_state(), v1::Study::COMPLETED);
}

TEST_F(ClientTrialsTest, ResultsCountOnceAndOnlyFromTheClientGivenTheTrial) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 0)).ok());
  ASSERT_THAT(Ask("ext", 2, "a"), ElementsAre(0, 1));
  EXPECT_EQ(Tell("ext", 0, "mallory", 0.1).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Tell("ext", 7, "a", 0.1).status().code(), absl::StatusCode::kNotFound);
  // A missing objective changes nothing: the client may tell again.
  v1::CompleteTrialRequest wrong;
  wrong.set_study("ext");
  wrong.set_trial(0);
  wrong.set_client_id("a");
  (*wrong.mutable_metrics())["accuracy"] = 0.9;
  absl::StatusOr<v1::Trial> refused = core_->CompleteTrial(wrong);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("\"loss\""));
  EXPECT_EQ(AllTrials(*core_, "ext")[0].state(), v1::Trial::RUNNING);

  ASSERT_TRUE(Tell("ext", 0, "a", 0.5).ok());
  absl::StatusOr<v1::Trial> again = Tell("ext", 0, "a", 0.5);  // A retry after a lost answer.
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->metrics().at("loss"), 0.5);
  // Another value is refused, saying what the trial holds.
  absl::StatusOr<v1::Trial> other = Tell("ext", 0, "a", 0.7);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.status().message(), HasSubstr("loss=0.5"));
  EXPECT_EQ(core_->GetStudy("ext")->trials_completed(), 1);

  v1::CompleteTrialRequest infeasible;
  infeasible.set_study("ext");
  infeasible.set_trial(1);
  infeasible.set_client_id("a");
  infeasible.set_infeasible_reason("diverged: NaN loss");
  absl::StatusOr<v1::Trial> failed = core_->CompleteTrial(infeasible);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::Trial::FAILED);
  EXPECT_THAT(failed->error(), HasSubstr("diverged: NaN loss"));
}

// A whole traceback as the reason fails the trial with it cut, as a worker's error is (found
// by a hostile review: it was refused, and the trial stayed RUNNING until its lease ran out),
// and never inside a UTF-8 character (a reader's parse of the trial would fail).
TEST_F(ClientTrialsTest, ALongReasonFailsTheTrialCutWithinACharacter) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 0)).ok());
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  v1::CompleteTrialRequest infeasible;
  infeasible.set_study("ext");
  infeasible.set_client_id("a");
  std::string reason = "Traceback (most recent call last):\n";
  while (reason.size() < 3 * kMaxWorkerErrorBytes) reason += "\u20ac";  // 3 bytes each.
  infeasible.set_infeasible_reason(reason);
  absl::StatusOr<v1::Trial> failed = core_->CompleteTrial(infeasible);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->state(), v1::Trial::FAILED);
  const std::string& error = failed->error();
  ASSERT_TRUE(absl::StartsWith(error, "infeasible: Traceback (most recent call last): "));
  ASSERT_TRUE(absl::EndsWith(error, "\u20ac..."));
  EXPECT_LE(error.size(), kMaxWorkerErrorBytes + 20);
  const size_t euros = error.size() - strlen("infeasible: Traceback (most recent call last): ") -
                       strlen("...");
  EXPECT_EQ(euros % 3, 0u) << error.size();
}

TEST_F(ClientTrialsTest, BadRequestsAreInvalidArguments) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 0)).ok());
  for (const std::string& client : {std::string(""), std::string("a b"), std::string(200, 'c'),
                                    std::string("x\ny")}) {
    EXPECT_EQ(core_->SuggestTrials("ext", 1, client).status().code(),
              absl::StatusCode::kInvalidArgument)
        << client;
  }
  EXPECT_EQ(core_->SuggestTrials("ext", kMaxSuggestCount + 1, "a").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->SuggestTrials("ext", -1, "a").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  EXPECT_EQ(Tell("ext", 0, "a", std::numeric_limits<double>::quiet_NaN()).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::CompleteTrialRequest both;
  both.set_study("ext");
  both.set_client_id("a");
  (*both.mutable_metrics())["loss"] = 1;
  both.set_infeasible_reason("and also this");
  EXPECT_EQ(core_->CompleteTrial(both).status().code(), absl::StatusCode::kInvalidArgument);
  v1::ReportProgressRequest half;
  half.set_study("ext");
  half.set_client_id("a");
  half.set_step(3);
  EXPECT_EQ(core_->ReportClientProgress(half).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Never given to b: the same answer as its CompleteTrial's.
  EXPECT_EQ(Report("ext", 0, "b").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(Report("ext", 0, "b").status().message()),
              HasSubstr("was never given to client \"b\""));
}

TEST_F(ClientTrialsTest, AnExpiredLeaseGoesToAnotherClientAndTheFirstResultWins) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 1)).ok());
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  // Reports renew the lease.
  now_ += absl::Minutes(4);
  ASSERT_TRUE(Report("ext", 0, "a").ok());
  now_ += absl::Minutes(4);
  EXPECT_EQ(core_->ExpireLeases(), 0);
  now_ += absl::Minutes(2);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  v1::Trial lost = AllTrials(*core_, "ext")[0];
  EXPECT_EQ(lost.state(), v1::Trial::PENDING);
  EXPECT_EQ(lost.lost_attempts(), 1);
  EXPECT_THAT(lost.error(), HasSubstr("client \"a\" did not report within its lease"));
  ASSERT_THAT(Ask("ext", 1, "b"), ElementsAre(0));
  // The slow first client finishes after all, but the trial is b's now: only its holder may
  // complete it.
  absl::StatusOr<v1::Trial> late = Tell("ext", 0, "a", 0.3);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("leased to client \"b\" now"));
  // Its report, likewise: given to it once, so not PERMISSION_DENIED.
  EXPECT_EQ(Report("ext", 0, "a").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Report("ext", 0, "b", 1, 0.25).ok());
  ASSERT_TRUE(Tell("ext", 0, "b", 0.2).ok());
  EXPECT_EQ(Tell("ext", 0, "a", 0.3).status().code(), absl::StatusCode::kFailedPrecondition);
  const v1::Study study = *core_->GetStudy("ext");
  EXPECT_EQ(study.trials_completed(), 1);
  EXPECT_EQ(study.trials_running(), 0);
  EXPECT_EQ(AllTrials(*core_, "ext")[0].metrics().at("loss"), 0.2);
}

// The first client completes the trial after its lease and then another client's ran out:
// the trial is recorded as its own attempt (number and start), not the other client's.
TEST_F(ClientTrialsTest, ALateClientsResultIsRecordedAsItsOwnAttempt) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 1)).ok());
  const absl::Time first_start = now_;
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  now_ += absl::Minutes(11);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  ASSERT_THAT(Ask("ext", 1, "b"), ElementsAre(0));
  now_ += absl::Minutes(11);
  EXPECT_EQ(core_->ExpireLeases(), 1);
  absl::StatusOr<v1::Trial> told = Tell("ext", 0, "a", 0.3);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->attempt(), 1);
  EXPECT_EQ(told->attempts_size(), 2);
  EXPECT_EQ(told->client_id(), "a");
  EXPECT_EQ(told->start_time().seconds(), absl::ToUnixSeconds(first_start));
  EXPECT_EQ(told->end_time().seconds() - told->start_time().seconds(), 22 * 60);
  // a's result came after all, so only b's attempt stays lost.
  EXPECT_EQ(told->lost_attempts(), 1);
  EXPECT_FALSE(told->attempts(0).lost());
  EXPECT_TRUE(told->attempts(1).lost());
}

TEST_F(ClientTrialsTest, AHandedBackTrialIsPendingAgainAndCostsNoAttempt) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 2, 1)).ok());
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  v1::ReportProgressRequest back;
  back.set_study("ext");
  back.set_trial(0);
  back.set_client_id("a");
  back.set_hand_back(true);
  back.set_step(1);
  back.set_value(0.5);
  EXPECT_EQ(core_->ReportClientProgress(back).status().code(),
            absl::StatusCode::kInvalidArgument);
  back.clear_step();
  back.clear_value();
  back.set_client_id("b");  // Never given to b: refused, changes nothing.
  EXPECT_EQ(core_->ReportClientProgress(back).status().code(),
            absl::StatusCode::kPermissionDenied);
  back.set_client_id("a");
  ASSERT_TRUE(core_->ReportClientProgress(back).ok());
  EXPECT_EQ(core_->GetStudy("ext")->trials_running(), 0);
  // Another client gets the same point at once (parallel_trials is 1, and a new point would be
  // trial 1), uncharged.
  ASSERT_THAT(Ask("ext", 1, "b"), ElementsAre(0));
  absl::StatusOr<v1::Trial> told = Tell("ext", 0, "b", 0.25);
  ASSERT_TRUE(told.ok()) << told.status();
  EXPECT_EQ(told->lost_attempts(), 0);
  EXPECT_EQ(told->client_id(), "b");
}

TEST_F(ClientTrialsTest, AClientMayPruneItsTrialOnceAndItCountsAsPruned) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 2, 0)).ok());
  ASSERT_THAT(Ask("ext", 2, "a"), ElementsAre(0, 1));
  v1::CompleteTrialRequest prune;
  prune.set_study("ext");
  prune.set_trial(0);
  prune.set_client_id("a");
  prune.set_pruned(true);
  (*prune.mutable_metrics())["loss"] = 1.0;
  EXPECT_EQ(core_->CompleteTrial(prune).status().code(), absl::StatusCode::kInvalidArgument);
  prune.clear_metrics();
  absl::StatusOr<v1::Trial> pruned = core_->CompleteTrial(prune);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(pruned->state(), v1::Trial::PRUNED);
  EXPECT_THAT(pruned->error(), HasSubstr("pruned by client \"a\""));
  ASSERT_TRUE(core_->CompleteTrial(prune).ok());  // The same call again: answered alike.
  EXPECT_EQ(Tell("ext", 0, "a", 0.5).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Tell("ext", 1, "a", 0.5).ok());
  const v1::Study study = *core_->GetStudy("ext");
  EXPECT_EQ(study.trials_pruned(), 1);
  EXPECT_EQ(study.trials_completed(), 1);
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
}

TEST_F(ClientTrialsTest, AClientWhoseLeaseRanOutMayCompleteATrialNobodyHolds) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 1)).ok());
  ASSERT_THAT(Ask("ext", 1, "a"), ElementsAre(0));
  now_ += absl::Minutes(11);
  EXPECT_EQ(core_->ExpireLeases(), 1);  // Back to pending, held by no one.
  ASSERT_TRUE(Tell("ext", 0, "a", 0.3).ok());  // The first result wins.
  EXPECT_EQ(AllTrials(*core_, "ext")[0].metrics().at("loss"), 0.3);
  EXPECT_EQ(core_->GetStudy("ext")->trials_completed(), 1);
}

TEST_F(ClientTrialsTest, ReportedValuesDriveEarlyStopping) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy(
      "ext", 5, 0, "early_stopping { median { n_startup_trials: 1 } }")).ok());
  ASSERT_THAT(Ask("ext", 2, "a"), ElementsAre(0, 1));
  for (int step = 1; step <= 3; ++step) {
    absl::StatusOr<v1::ReportProgressResponse> going = Report("ext", 0, "a", step, 1.0 / step);
    ASSERT_TRUE(going.ok()) << going.status();
    EXPECT_FALSE(going->should_stop());
  }
  ASSERT_TRUE(Tell("ext", 0, "a", 0.3).ok());
  absl::StatusOr<v1::ReportProgressResponse> behind = Report("ext", 1, "a", 2, 10.0);
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_TRUE(behind->should_stop());
  EXPECT_THAT(behind->reason(), HasSubstr("pruned at step 2"));
  EXPECT_EQ(AllTrials(*core_, "ext")[1].state(), v1::Trial::PRUNED);
  // Asked again, it stays stopped; its lease is gone.
  EXPECT_TRUE(Report("ext", 1, "a")->should_stop());
  EXPECT_EQ(core_->GetStudy("ext")->trials_running(), 0);
}

// Found by a hostile review: one process asking twice before telling (Optuna's ask(), trials
// evaluated in parallel) got the same trial twice. Each request id gets trials of its own, and
// a retry of it (its answer lost) the same ones, after a restart too; without a request id
// the client's held trials come first, as before.
TEST_F(ClientTrialsTest, EachRequestIdGetsItsOwnTrialsAndItsRetryTheSame) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 20, 0)).ok());
  EXPECT_THAT(Ask("ext", 1, "a", "ask-1"), ElementsAre(0));
  EXPECT_THAT(Ask("ext", 1, "a", "ask-2"), ElementsAre(1));
  EXPECT_THAT(Ask("ext", 1, "a", "ask-1"), ElementsAre(0));  // A retry: not a third trial.
  EXPECT_THAT(Ask("ext", 2, "a", "ask-3"), ElementsAre(2, 3));
  EXPECT_THAT(Ask("ext", 2, "a", "ask-3"), ElementsAre(2, 3));
  EXPECT_THAT(Ask("ext", 1, "b", "ask-1"), ElementsAre(4));  // Ids are per client.
  EXPECT_THAT(Ask("ext", 5, "a"), ElementsAre(0, 1, 2, 3, 5));
  EXPECT_EQ(core_->GetStudy("ext")->trials_running(), 6);
  Restart();
  EXPECT_THAT(Ask("ext", 1, "a", "ask-2"), ElementsAre(1));
  EXPECT_THAT(Ask("ext", 1, "a", "ask-4"), ElementsAre(6));
  ASSERT_TRUE(Tell("ext", 1, "a", 0.5).ok());
  EXPECT_THAT(Ask("ext", 1, "a", "ask-2"), ElementsAre(7));  // Told: a retry gets a new one.
  for (const std::string& bad :
       std::vector<std::string>{"two words", std::string(kMaxClientIdBytes + 1, 'r')}) {
    absl::StatusOr<v1::SuggestTrialsResponse> refused = core_->SuggestTrials("ext", 1, "a", bad);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("request_id"));
  }
}

// A retry that arrives while its first try still waits for a model-based suggestion takes the
// first's place: the one ask is given one trial, whichever call answers.
TEST_F(ClientTrialsTest, ARetryOfAWaitingAskIsGivenItsTrialOnce) {
  v1::StudySpec bayes = ExternalStudy("bo", 8, 0);
  bayes.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
  bayes.mutable_algorithm()->mutable_bayesian()->set_n_startup_trials(2);
  ASSERT_TRUE(core_->CreateStudy(bayes).ok());
  ASSERT_THAT(Ask("bo", 2, "a", "first"), ElementsAre(0, 1));
  ASSERT_TRUE(Tell("bo", 0, "a", 0.5).ok());
  ASSERT_TRUE(Tell("bo", 1, "a", 0.25).ok());
  absl::Notification first_done;
  absl::StatusOr<v1::SuggestTrialsResponse> first;
  core_->SuggestTrials("bo", 1, "a", "second", [&](absl::StatusOr<v1::SuggestTrialsResponse> r) {
    first = std::move(r);
    first_done.Notify();
  });
  const std::vector<int64_t> retried = Ask("bo", 1, "a", "second");
  first_done.WaitForNotification();
  ASSERT_EQ(retried.size(), 1u);
  if (first.ok()) {  // Answered before the retry came.
    ASSERT_EQ(first->trials_size(), 1);
    EXPECT_EQ(first->trials(0).number(), retried[0]);
  } else {
    EXPECT_EQ(first.status().code(), absl::StatusCode::kAborted) << first.status();
  }
  EXPECT_EQ(core_->GetStudy("bo")->trials_running(), 1);
}

TEST_F(ClientTrialsTest, LeasesOutliveARestartForTheSameClient) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 5, 2)).ok());
  ASSERT_THAT(Ask("ext", 2, "a"), ElementsAre(0, 1));
  ASSERT_TRUE(Tell("ext", 0, "a", 0.5).ok());
  Restart();
  // The lease outlives the restart: another client asking first gets a new trial, not it.
  EXPECT_THAT(Ask("ext", 2, "b"), ElementsAre(2));
  absl::StatusOr<v1::SuggestTrialsResponse> back = core_->SuggestTrials("ext", 2, "a");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->trials_size(), 1);
  EXPECT_EQ(back->trials(0).number(), 1);
  EXPECT_EQ(back->trials(0).attempt(), 1);
  ASSERT_TRUE(Tell("ext", 1, "a", 0.25).ok());
  EXPECT_EQ(core_->GetStudy("ext")->trials_completed(), 2);
  EXPECT_EQ(core_->GetStudy("ext")->best_trial().number(), 1);
}

// Found by a hostile review: asking once an EXTERNAL grid was used up ended the study from
// inside the loop that answers waiting calls, which then used a freed entry.
TEST_F(ClientTrialsTest, AnExhaustedGridEndsTheStudyAndAnswersTheAsk) {
  v1::StudySpec grid = ExternalStudy("grid", 10, 0);  // More than the grid holds.
  grid.mutable_algorithm()->set_name(v1::Algorithm::GRID);
  grid.mutable_algorithm()->set_grid_points(2);
  grid.clear_parameters();
  v1::Parameter& d = *grid.add_parameters();
  d.set_name("d");
  d.mutable_double_range()->set_max(1);
  ASSERT_TRUE(core_->CreateStudy(grid).ok());
  ASSERT_THAT(Ask("grid", 2, "a"), ElementsAre(0, 1));
  ASSERT_TRUE(Tell("grid", 0, "a", 1).ok());
  ASSERT_TRUE(Tell("grid", 1, "a", 2).ok());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::SuggestTrialsResponse> none = core_->SuggestTrials("grid", 1, "a");
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_EQ(none->trials_size(), 0);
    EXPECT_EQ(none->study_state(), v1::Study::COMPLETED);
  }
  Restart();
  EXPECT_EQ(core_->SuggestTrials("grid", 1, "a")->study_state(), v1::Study::COMPLETED);
}

TEST_F(ClientTrialsTest, ModelBasedSuggestionsAreWaitedFor) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("ext", 8, 0, "")).ok());
  v1::StudySpec bayes = ExternalStudy("bo", 8, 0);
  bayes.mutable_algorithm()->set_name(v1::Algorithm::BAYESIAN);
  bayes.mutable_algorithm()->mutable_bayesian()->set_n_startup_trials(2);
  ASSERT_TRUE(core_->CreateStudy(bayes).ok());
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> given = Ask("bo", 2, "a");
    ASSERT_EQ(given.size(), 2u) << "round " << round;
    for (int64_t number : given) ASSERT_TRUE(Tell("bo", number, "a", 1.0 / (number + 1)).ok());
  }
  EXPECT_EQ(core_->GetStudy("bo")->trials_completed(), 6);
}

}  // namespace
}  // namespace dhpt::scheduler

namespace dhpt::scheduler {
namespace {

// A full disk (here the store's size cap, filled with another study's rows): no result is
// acknowledged and no lease starts until the store takes writes again, a retry included; then
// the retry is acknowledged and survives a restart.
TEST(ClientTrialsStorageTest, NothingIsAcknowledgedOrLeasedWhileTheStoreRefusesWrites) {
  testing::TempDatabase db({.max_bytes = 256 << 10,
                            .retry_delay = absl::Milliseconds(5),
                            .max_retry_delay = absl::Milliseconds(20)});
  auto core = std::make_unique<SchedulerCore>(db.get(), SchedulerOptions());
  ASSERT_TRUE(core->Recover().ok());
  ASSERT_TRUE(core->CreateStudy(ExternalStudy("ext", 10, 0)).ok());
  absl::StatusOr<v1::SuggestTrialsResponse> asked = core->SuggestTrials("ext", 1, "a");
  ASSERT_TRUE(asked.ok() && asked->trials_size() == 1) << asked.status();
  v1::Study padding;
  padding.mutable_spec()->set_name("padding");
  db.store().PutStudy(padding);
  absl::Status filled;
  for (uint64_t id = 1'000'000; id < 1'001'000 && filled.ok(); ++id) {
    v1::Trial trial;
    trial.set_id(id);
    trial.set_study("padding");
    trial.set_number(static_cast<int64_t>(id - 1'000'000));
    trial.set_error(std::string(4096, 'p'));
    filled = db.store().Sync(db.store().PutTrial(trial));
  }
  ASSERT_FALSE(filled.ok()) << "the cap was never reached";

  v1::CompleteTrialRequest tell;
  tell.set_study("ext");
  tell.set_trial(0);
  tell.set_client_id("a");
  (*tell.mutable_metrics())["loss"] = 0.5;
  for (int attempt = 0; attempt < 2; ++attempt) {  // The call, then the retry it recommends.
    absl::StatusOr<v1::Trial> told = core->CompleteTrial(tell);
    EXPECT_EQ(told.status().code(), absl::StatusCode::kUnavailable) << attempt;
    EXPECT_THAT(std::string(told.status().message()), HasSubstr("not stored yet")) << attempt;
  }
  absl::StatusOr<v1::SuggestTrialsResponse> refused = core->SuggestTrials("ext", 1, "b");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("no trial is leased"));

  db.store().DeleteStudy("padding");  // Room again: deletions commit first.
  ASSERT_TRUE(testing_util::WaitUntil([&] { return core->store_health().ok(); }));
  absl::StatusOr<v1::Trial> told = core->CompleteTrial(tell);
  ASSERT_TRUE(told.ok()) << told.status();
  core.reset();
  db.Reopen();
  core = std::make_unique<SchedulerCore>(db.get(), SchedulerOptions());
  ASSERT_TRUE(core->Recover().ok());
  const v1::Trial stored = AllTrials(*core, "ext")[0];
  EXPECT_EQ(stored.state(), v1::Trial::COMPLETED);
  EXPECT_EQ(stored.metrics().at("loss"), 0.5);
}

}  // namespace
}  // namespace dhpt::scheduler
