// Ended studies leave memory (ended_studies.cc) on the real core and a real SQLite file: every
// call answers an evicted study as it did before, a restart loads the studies in progress and
// only the summaries of the ended ones, and extending an evicted study reads it back first.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/casts.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/trial_sample.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

v1::StudySpec ExternalStudy(const std::string& name, int max_trials, const std::string& extra) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        model { kind: EXTERNAL }
        algorithm { name: RANDOM seed: 5 }
        parameters { name: "lr" double_range { min: 0.001 max: 0.1 log: true } }
        parameters { name: "layers" int_range { min: 1 max: 4 } }
        parameters { name: "act" categorical { values: "relu" values: "tanh" } })pb" + extra,
      &spec));
  spec.set_name(name);
  spec.set_max_trials(max_trials);
  spec.set_parallel_trials(max_trials);
  return spec;
}

// One objective with early stopping (curves, pruned trials within reach of the best).
v1::StudySpec SingleObjective(const std::string& name, int max_trials) {
  return ExternalStudy(name, max_trials, R"pb(
    objective { metric: "loss" goal: MINIMIZE }
    early_stopping { median { n_startup_trials: 2 } })pb");
}

v1::StudySpec TwoObjectives(const std::string& name, int max_trials) {
  return ExternalStudy(name, max_trials, R"pb(
    objectives { metric: "loss" goal: MINIMIZE }
    objectives { metric: "latency" goal: MINIMIZE })pb");
}

class EndedStudiesTest : public ::testing::Test {
 protected:
  EndedStudiesTest() { Start(); }
  void Start() {
    SchedulerOptions options;
    options.clock = [] { return absl::FromUnixSeconds(1'800'000'000); };
    options.ended_study_cache_bytes = ended_study_cache_bytes_;
    options.max_reply_bytes_in_flight = max_reply_bytes_;
    if (max_memory_bytes_ > 0) {
      options.max_memory_bytes = max_memory_bytes_;
      options.resident_bytes = [this] { return Resident(); };
      options.memory_check_interval = memory_check_interval_;
    }
    core_ = std::make_unique<SchedulerCore>(db_.get(), options);
    ASSERT_TRUE(core_->Recover().ok());
  }
  void Restart() {
    core_.reset();
    db_.Reopen();
    Start();
  }
  // Every write committed and the core told: an ended study may then be evicted.
  void Committed() { ASSERT_TRUE(db_.store().Sync(db_.store().last_sequence()).ok()); }

  std::vector<int64_t> Ask(const std::string& study, int count) {
    absl::StatusOr<v1::SuggestTrialsResponse> response = core_->SuggestTrials(study, count, "c");
    EXPECT_TRUE(response.ok()) << response.status();
    std::vector<int64_t> numbers;
    if (response.ok()) {
      for (const v1::Trial& trial : response->trials()) numbers.push_back(trial.number());
    }
    return numbers;
  }
  // Whether the study's rule stopped the trial.
  bool Report(const std::string& study, int64_t trial, int64_t step, double value) {
    v1::ReportProgressRequest request;
    request.set_study(study);
    request.set_trial(trial);
    request.set_client_id("c");
    request.set_step(step);
    request.set_value(value);
    absl::StatusOr<v1::ReportProgressResponse> response = core_->ReportClientProgress(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() && response->should_stop();
  }
  void Tell(const std::string& study, int64_t trial, std::map<std::string, double> metrics,
            const std::string& infeasible = "", bool pruned = false) {
    v1::CompleteTrialRequest request;
    request.set_study(study);
    request.set_trial(trial);
    request.set_client_id("c");
    for (const auto& [name, value] : metrics) (*request.mutable_metrics())[name] = value;
    request.set_infeasible_reason(infeasible);
    request.set_pruned(pruned);
    absl::StatusOr<v1::Trial> told = core_->CompleteTrial(request);
    ASSERT_TRUE(told.ok()) << told.status();
  }

  // "so": 12 trials with curves, one failed, some pruned by the rule or the client; ends
  // COMPLETED. "mo": 8 trials of two objectives, a front; ends COMPLETED. "active": 3 of 10.
  void RunStudies() {
    ASSERT_TRUE(core_->CreateStudy(SingleObjective("so", 12)).ok());
    ASSERT_TRUE(core_->CreateStudy(TwoObjectives("mo", 8)).ok());
    ASSERT_TRUE(core_->CreateStudy(SingleObjective("active", 10)).ok());
    for (int64_t n : Ask("so", 12)) {
      bool stopped = false;
      for (int step = 1; step <= 3 && !stopped; ++step) {
        // Trial 7 leads, then its client stops it: pruned within reach of the best.
        stopped = Report("so", n, step, n == 7 ? 1.0 / step : 10.0 - n % 5 + 1.0 / step);
      }
      if (stopped) {
        continue;
      } else if (n == 3) {
        Tell("so", n, {}, "diverged");
      } else if (n == 7) {
        Tell("so", n, {}, "", /*pruned=*/true);
      } else {
        Tell("so", n, {{"loss", 10.0 - n % 5}, {"accuracy", n / 12.0}});
      }
    }
    for (int64_t n : Ask("mo", 8)) {
      Tell("mo", n, {{"loss", 1.0 + n % 4}, {"latency", 8.0 - n}});
    }
    for (int64_t n : Ask("active", 3)) Tell("active", n, {{"loss", 1.0 * n}});
    ASSERT_EQ(core_->GetStudy("so")->state(), v1::Study::COMPLETED);
    ASSERT_GE(core_->GetStudy("so")->trials_pruned_within_reach(), 1);  // Read from curves.
    ASSERT_EQ(core_->GetStudy("mo")->state(), v1::Study::COMPLETED);
    ASSERT_EQ(core_->GetStudy("active")->state(), v1::Study::RUNNING);
  }

  // What every call that reads a study answers, as text: the study, its trial pages (all and
  // by state, small pages so the tokens show), the best trial, the front's pages, the
  // importances, the curves an export reads, and the first page of studies.
  std::string Answers(const std::string& name) {
    std::string out;
    auto add = [&](absl::string_view what, const auto& reply) {
      if (reply.ok()) {
        absl::StrAppend(&out, what, ": ", reply->DebugString(), "\n");
      } else {
        absl::StrAppend(&out, what, ": ", reply.status().ToString(), "\n");
      }
    };
    add("GetStudy", core_->GetStudy(name));
    std::vector<v1::Trial> trials;
    for (v1::Trial::State only : {v1::Trial::STATE_UNSPECIFIED, v1::Trial::COMPLETED,
                                  v1::Trial::PRUNED, v1::Trial::FAILED}) {
      std::string token;
      do {
        absl::StatusOr<ListPage<v1::Trial>> page = core_->ListTrials(name, only, 3, token);
        if (!page.ok()) {
          absl::StrAppend(&out, "ListTrials: ", page.status().ToString(), "\n");
          break;
        }
        for (const v1::Trial& trial : page->items) {
          absl::StrAppend(&out, "ListTrials ", only, ": ", trial.DebugString(), "\n");
          if (only == v1::Trial::STATE_UNSPECIFIED) trials.push_back(trial);
        }
        token = page->next_page_token;
        absl::StrAppend(&out, "token: ", token, "\n");
      } while (!token.empty());
    }
    add("GetBestTrial", core_->GetBestTrial(name));
    std::string token;
    do {
      absl::StatusOr<v1::GetParetoFrontResponse> front = core_->GetParetoFront(name, 2, token);
      add("GetParetoFront", front);
      token = front.ok() ? front->next_page_token() : "";
    } while (!token.empty());
    v1::GetParamImportancesRequest importances;
    importances.set_study(name);
    add("GetParamImportances", core_->GetParamImportances(importances));
    ReplyBudget::Lease lease;
    absl::StatusOr<std::vector<v1::TrialCurve>> curves = core_->TrialCurves(trials, lease);
    EXPECT_TRUE(curves.ok()) << curves.status();
    if (curves.ok()) {
      for (const v1::TrialCurve& curve : *curves) absl::StrAppend(&out, "curve: ", curve.DebugString());
    }
    absl::StatusOr<ListPage<v1::Study>> studies = core_->ListStudies(0, "");
    if (studies.ok()) {
      for (const v1::Study& study : studies->items) absl::StrAppend(&out, "ListStudies: ", study.DebugString());
    }
    return out;
  }

  // The memory cap and what the process is said to hold (a fault stood in): the next reads
  // from `script_`, then `resident_`.
  int64_t Resident() {
    absl::MutexLock lock(&memory_mutex_);
    if (script_.empty()) return resident_;
    const int64_t next = script_.front();
    script_.erase(script_.begin());
    return next;
  }
  void SetResident(int64_t bytes, std::vector<int64_t> script = {}) {
    absl::MutexLock lock(&memory_mutex_);
    resident_ = bytes;
    script_ = std::move(script);
  }
  int64_t max_memory_bytes_ = 0;
  size_t ended_study_cache_bytes_ = kDefaultEndedStudyCacheBytes;
  size_t max_reply_bytes_ = kDefaultMaxReplyBytesInFlight;
  absl::Duration memory_check_interval_ = absl::ZeroDuration();  // Every call reads it.
  absl::Mutex memory_mutex_;
  int64_t resident_ ABSL_GUARDED_BY(memory_mutex_) = 0;
  std::vector<int64_t> script_ ABSL_GUARDED_BY(memory_mutex_);

  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(EndedStudiesTest, EveryCallAnswersAnEvictedStudyAsBefore) {
  RunStudies();
  Committed();
  const std::string so = Answers("so");
  const std::string mo = Answers("mo");
  ASSERT_EQ(core_->ended_studies_in_memory().studies, 2);
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
  EXPECT_EQ(core_->ended_studies_in_memory().bytes, 0u);
  // The summary alone answers these: nothing is read back.
  ASSERT_TRUE(core_->GetStudy("so").ok());
  ASSERT_TRUE(core_->ListStudies(0, "").ok());
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);

  EXPECT_EQ(Answers("so"), so);
  EXPECT_EQ(Answers("mo"), mo);
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 2);  // Read back, kept while recent.
  // The answers name what the studies hold (the comparison is not of two empty answers).
  EXPECT_NE(so.find("PRUNED"), std::string::npos);
  EXPECT_NE(so.find("diverged"), std::string::npos);
  EXPECT_NE(so.find("curve: "), std::string::npos);
  EXPECT_NE(mo.find("hypervolume"), std::string::npos);

  // And after a restart, which starts from the summaries.
  Committed();
  Restart();
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
  EXPECT_EQ(Answers("so"), so);
  EXPECT_EQ(Answers("mo"), mo);
}

// A study in progress keeps of a pruned or failed trial's curve only the values its rule reads
// (ASHA: the first at or past each rung, and the last); users read whole curves from the store.
// Rungs at 4 and 8 (min_resource 4, halving): trial 2 reaches both alone and fails at step 9;
// trial 0 completes; trial 1 is pruned at 8. Trials 3 and 4 go on at rung 8 only because trials
// 1 and 2 count there with their values at 8 (3.0): had trial 2 kept its last value (0.5) in
// place of its value at 8, or trials 1 and 2 not counted, both would be stopped. Trial 4 is
// judged after a restart, which read the whole curves back.
TEST_F(EndedStudiesTest, PrunedAndFailedTrialsKeepOnlyTheValuesTheirRuleReads) {
  ASSERT_TRUE(core_->CreateStudy(ExternalStudy("asha", 10, R"pb(
    objective { metric: "loss" goal: MINIMIZE }
    early_stopping { asha { min_resource: 4 reduction_factor: 2 } })pb")).ok());
  ASSERT_EQ(Ask("asha", 4), (std::vector<int64_t>{0, 1, 2, 3}));
  for (int step = 1; step <= 9; ++step) {
    ASSERT_FALSE(Report("asha", 2, step, step == 8 ? 3.0 : step == 9 ? 0.5 : 1.0)) << step;
  }
  Tell("asha", 2, {}, "diverged");
  for (int step = 1; step <= 12; ++step) ASSERT_FALSE(Report("asha", 0, step, 1.0)) << step;
  Tell("asha", 0, {{"loss", 1.0}});
  for (int step = 1; step <= 7; ++step) ASSERT_FALSE(Report("asha", 1, step, 1.0)) << step;
  ASSERT_TRUE(Report("asha", 1, 8, 3.0));
  for (int step = 1; step <= 7; ++step) ASSERT_FALSE(Report("asha", 3, step, 1.0)) << step;
  EXPECT_FALSE(Report("asha", 3, 8, 2.0)) << "judged against trials 0 and 3 alone";
  Tell("asha", 3, {{"loss", 2.0}});
  absl::StatusOr<v1::Study> study = core_->GetStudy("asha");
  ASSERT_TRUE(study.ok());
  ASSERT_EQ(study->trials_pruned(), 1);
  ASSERT_EQ(study->trials_failed(), 1);
  ASSERT_EQ(study->trials_completed(), 2);

  auto in_memory = [&](int64_t trial) {
    absl::StatusOr<std::vector<int64_t>> steps = core_->CurveInMemoryForTest("asha", trial);
    EXPECT_TRUE(steps.ok()) << steps.status();
    return steps.ok() ? *steps : std::vector<int64_t>{-1};
  };
  const std::vector<int64_t> whole = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(in_memory(1), (std::vector<int64_t>{4, 8}));     // Pruned at rung 8.
  EXPECT_EQ(in_memory(2), (std::vector<int64_t>{4, 8, 9}));  // Failed after it.
  EXPECT_EQ(in_memory(0), whole);                            // Completed: kept whole.
  const std::string answers = Answers("asha");
  // The export's curves are whole, from the store.
  EXPECT_NE(answers.find("curve: number: 1\nattempt: 1\nsteps: 1\nsteps: 2\nsteps: 3\nsteps: 4"
                         "\nsteps: 5\nsteps: 6\nsteps: 7\nsteps: 8\n"),
            std::string::npos)
      << answers;

  // A restart reads the whole curves back and keeps the same few values.
  Committed();
  Restart();
  EXPECT_EQ(Answers("asha"), answers);
  EXPECT_EQ(in_memory(1), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(in_memory(2), (std::vector<int64_t>{4, 8, 9}));
  EXPECT_EQ(in_memory(0), whole);
  ASSERT_EQ(Ask("asha", 1), (std::vector<int64_t>{4}));
  for (int step = 1; step <= 7; ++step) ASSERT_FALSE(Report("asha", 4, step, 1.0)) << step;
  EXPECT_FALSE(Report("asha", 4, 8, 2.0)) << "judged without trial 1's or 2's value at 8";
}

// ListTrials' plot view (the dashboard's plots): each trial is its full listing less what no
// plot draws (other metrics, the error, attempts, node, device), for trials in progress, finished
// ones held as bytes, and a study evicted and read back from the store.
TEST_F(EndedStudiesTest, ThePlotViewIsTheFullTrialLessWhatPlotsDoNotDraw) {
  RunStudies();
  Committed();
  int pruned_with_value = 0, with_other_metrics = 0;
  for (const bool evicted : {false, true}) {
    if (evicted) ASSERT_EQ(core_->ShedEndedStudies(), 2);
    for (const std::string name : {"so", "mo", "active"}) {
      absl::StatusOr<ListPage<v1::Trial>> full =
          core_->ListTrials(name, v1::Trial::STATE_UNSPECIFIED, 1000, "");
      absl::StatusOr<ListPage<v1::Trial>> plot = core_->ListTrials(
          name, v1::Trial::STATE_UNSPECIFIED, 1000, "", SchedulerCore::TrialView::kPlot);
      ASSERT_TRUE(full.ok() && plot.ok());
      ASSERT_EQ(plot->items.size(), full->items.size());
      ASSERT_GE(full->items.size(), 3u);  // "active" holds 3.
      for (size_t i = 0; i < full->items.size(); ++i) {
        const v1::Trial& whole = full->items[i];
        v1::Trial expected = whole;
        for (int field : {v1::Trial::kStudyFieldNumber, v1::Trial::kAttemptFieldNumber,
                          v1::Trial::kMetricsFieldNumber, v1::Trial::kNodeNameFieldNumber,
                          v1::Trial::kDeviceFieldNumber, v1::Trial::kErrorFieldNumber,
                          v1::Trial::kLostAttemptsFieldNumber, v1::Trial::kAttemptsFieldNumber,
                          v1::Trial::kConstraintViolationFieldNumber,
                          v1::Trial::kOriginFieldNumber}) {
          expected.GetReflection()->ClearField(
              &expected, v1::Trial::descriptor()->FindFieldByNumber(field));
        }
        // A pruned trial of one objective is drawn at its objective metric when stopped.
        if (whole.state() == v1::Trial::PRUNED && name != "mo" && whole.metrics().count("loss")) {
          (*expected.mutable_metrics())["loss"] = whole.metrics().at("loss");
          ++pruned_with_value;
        }
        with_other_metrics += whole.metrics().count("accuracy") + whole.metrics().count("latency");
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(plot->items[i], expected))
            << name << (evicted ? " evicted" : "") << "\nplot view: " << plot->items[i].DebugString()
            << "expected: " << expected.DebugString();
        EXPECT_LT(plot->items[i].ByteSizeLong(), whole.ByteSizeLong());
      }
    }
  }
  // The comparison covers what it should drop and keep.
  EXPECT_GT(pruned_with_value, 0);
  EXPECT_GT(with_other_metrics, 0);
}

TEST_F(EndedStudiesTest, RestartLoadsTheActiveStudiesAndSummariesOnly) {
  RunStudies();
  Committed();
  const v1::Study so = *core_->GetStudy("so");
  Restart();
  // Nothing of the ended studies' trials is in memory, yet their summaries answer.
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
  absl::StatusOr<v1::Study> after = core_->GetStudy("so");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->DebugString(), so.DebugString());
  // The study in progress goes on from its trials.
  EXPECT_EQ(AllTrials(*core_, "active").size(), 3u);
  EXPECT_EQ(Ask("active", 2), (std::vector<int64_t>{3, 4}));
  // The store read only the active study's trials, and ids still never repeat.
  absl::StatusOr<StoredState> loaded = db_.store().LoadActive();
  ASSERT_TRUE(loaded.ok());
  for (const v1::Trial& trial : loaded->trials) EXPECT_EQ(trial.study(), "active");
  EXPECT_EQ(loaded->trials.size(), 5u);
  absl::StatusOr<StoredState> all = db_.store().Load();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(loaded->next_trial_id, all->next_trial_id);
  EXPECT_EQ(all->trials.size(), 12u + 8u + 5u);
}

TEST_F(EndedStudiesTest, ExtendingAnEvictedStudyReadsItBack) {
  RunStudies();
  Committed();
  const int completed = core_->GetStudy("so")->trials_completed();
  ASSERT_GT(completed, 0);
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  v1::UpdateStudyRequest update;
  update.set_name("so");
  update.mutable_spec()->set_max_trials(14);
  update.mutable_update_mask()->add_paths("max_trials");
  absl::StatusOr<v1::Study> extended = core_->UpdateStudy(update);
  ASSERT_TRUE(extended.ok()) << extended.status();
  EXPECT_EQ(extended->state(), v1::Study::RUNNING);
  EXPECT_EQ(extended->trials_completed(), completed);
  EXPECT_EQ(extended->trials_pending(), 2);
  // Numbers go on from the stored trials; the rule judges against their curves.
  EXPECT_EQ(Ask("so", 2), (std::vector<int64_t>{12, 13}));
  Tell("so", 12, {{"loss", 1}});
  Tell("so", 13, {{"loss", 2}});
  absl::StatusOr<v1::Study> ended = core_->GetStudy("so");
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->state(), v1::Study::COMPLETED);
  EXPECT_EQ(ended->trials_completed(), completed + 2);
  EXPECT_EQ(ended->best_trial().number(), 12);
  EXPECT_EQ(AllTrials(*core_, "so").size(), 14u);
  // Evicted again, and read back again, with the two new trials.
  Committed();
  EXPECT_GE(core_->ShedEndedStudies(), 1);
  EXPECT_EQ(AllTrials(*core_, "so").size(), 14u);
}

TEST_F(EndedStudiesTest, AWatchedStudyStaysInMemory) {
  RunStudies();
  Committed();
  class Silent : public StudyWatcher {
    void OnEventsReady() override {}
    void OnEnd(const absl::Status&) override {}
  } watcher;
  absl::StatusOr<uint64_t> watch = core_->Watch("so", {}, &watcher);
  ASSERT_TRUE(watch.ok());
  EXPECT_EQ(core_->ShedEndedStudies(), 1);  // "mo" only.
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 1);
  core_->Unwatch(*watch);
  EXPECT_EQ(core_->ShedEndedStudies(), 1);
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
}

TEST_F(EndedStudiesTest, DeletingAnEvictedStudyForgetsIt) {
  RunStudies();
  Committed();
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  ASSERT_TRUE(core_->DeleteStudy("so", false).ok());
  EXPECT_TRUE(absl::IsNotFound(core_->ListTrials("so", v1::Trial::STATE_UNSPECIFIED, 0, "").status()));
  Restart();
  EXPECT_TRUE(absl::IsNotFound(core_->GetStudy("so").status()));
  EXPECT_EQ(AllTrials(*core_, "mo").size(), 8u);
}

TEST_F(EndedStudiesTest, NearTheMemoryCapEndedStudiesGoFirstThenNewWorkIsRefused) {
  max_memory_bytes_ = 1000;  // Pressure past 900.
  Restart();
  RunStudies();
  Committed();
  ASSERT_EQ(core_->ended_studies_in_memory().studies, 2);

  // Over, and under once the ended studies are shed: the study is created.
  SetResident(100, {950});
  ASSERT_TRUE(core_->CreateStudy(SingleObjective("after-shedding", 5)).ok());
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);

  // Still over after shedding: no new study, trial or lease, and nothing breaks.
  SetResident(950);
  absl::StatusOr<v1::Study> refused = core_->CreateStudy(SingleObjective("refused", 5));
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("--max_memory_bytes"), std::string::npos);
  EXPECT_NE(refused.status().message().find("dhpt delete"), std::string::npos);
  EXPECT_TRUE(absl::IsResourceExhausted(core_->SuggestTrials("active", 1, "c").status()));
  v1::AddTrialsRequest add;
  add.set_study("active");
  v1::AddedTrial& added = *add.add_trials();
  (*added.mutable_params())["lr"].set_number_value(0.01);
  (*added.mutable_params())["layers"].set_number_value(2);
  (*added.mutable_params())["act"].set_string_value("relu");
  (*added.mutable_metrics())["loss"] = 1;
  EXPECT_TRUE(absl::IsResourceExhausted(core_->AddTrials(add).status()));
  // Reads answer, the ended studies' from the store.
  EXPECT_TRUE(core_->GetStudy("active").ok());
  EXPECT_EQ(AllTrials(*core_, "so").size(), 12u);
  EXPECT_EQ(AllTrials(*core_, "active").size(), 3u);

  // Back under: work goes on.
  SetResident(100);
  EXPECT_TRUE(core_->CreateStudy(SingleObjective("refused", 5)).ok());
  EXPECT_EQ(Ask("active", 1), std::vector<int64_t>{3});
  EXPECT_TRUE(core_->AddTrials(add).ok());
}

// Calls that add megabytes each can come faster than the check interval: past half the cap
// every call reads the resident size, so the cap is not overshot between two readings (the
// MemoryCapTest process overshot its cap when a reading was kept for 100 ms).
TEST_F(EndedStudiesTest, PastHalfTheCapEveryCallReadsTheResidentSize) {
  max_memory_bytes_ = 1000;
  memory_check_interval_ = absl::Hours(1);
  Restart();
  SetResident(600);
  ASSERT_TRUE(core_->CreateStudy(SingleObjective("first", 5)).ok());
  SetResident(950);
  absl::StatusOr<v1::Study> refused = core_->CreateStudy(SingleObjective("second", 5));
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
}

// Under half the cap a reading is kept for the interval (reads cost time at dispatch rates).
TEST_F(EndedStudiesTest, UnderHalfTheCapAReadingIsKeptForTheInterval) {
  max_memory_bytes_ = 1000;
  memory_check_interval_ = absl::Hours(1);
  Restart();
  SetResident(100);
  ASSERT_TRUE(core_->CreateStudy(SingleObjective("first", 5)).ok());
  SetResident(950);
  EXPECT_TRUE(core_->CreateStudy(SingleObjective("second", 5)).ok());
}

// Reading an evicted study's page from the store happens off the core's lock: while one user's
// ListTrials of an old study waits on the disk (a fault holds the read), a worker's result is
// taken and the worker given its next trial; then the page answers as before. Held under the
// lock, the result waited for the whole read.
TEST_F(EndedStudiesTest, AReadBackDoesNotHoldUpAWorkersResult) {
  absl::Notification reading;
  absl::Notification release;
  db_.options().after_read_back = [&](const std::string& study) {
    if (study != "so") return;
    reading.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  Restart();
  RunStudies();
  Committed();
  const std::vector<v1::Trial> before = AllTrials(*core_, "so");
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("busy", 3)).ok());
  RecordingChannel channel;
  absl::StatusOr<uint64_t> session = core_->ConnectWorker(Hello("w", 1), {}, &channel);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_EQ(channel.Assigns().size(), 1u);

  std::thread user([&] {
    absl::StatusOr<ListPage<v1::Trial>> page =
        core_->ListTrials("so", v1::Trial::STATE_UNSPECIFIED, 100, "");
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->items.size(), before.size());
    for (size_t i = 0; i < before.size(); ++i) {
      EXPECT_EQ(page->items[i].DebugString(), before[i].DebugString());
    }
  });
  ASSERT_TRUE(reading.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::Notification handled;
  std::thread worker([&] {
    const v1::Assign assign = channel.Assigns().back();
    v1::TrialResult result;
    result.set_trial_id(assign.trial_id());
    result.set_attempt(assign.attempt());
    result.set_epoch(assign.epoch());
    result.set_state(v1::Trial::COMPLETED);
    (*result.mutable_metrics())["value"] = 1.5;
    core_->HandleResult(*session, result);
    handled.Notify();
  });
  // The read is still held: the result must not wait for it.
  const bool in_time = handled.WaitForNotificationWithTimeout(absl::Seconds(10));
  const size_t assigns = channel.Assigns().size();
  release.Notify();
  worker.join();
  user.join();
  EXPECT_TRUE(in_time) << "the worker's result waited for the read back";
  EXPECT_EQ(assigns, 2u) << "the worker was not given its next trial during the read back";
  // The page came from the store's rows: "so" was not read back.
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
  // Before `channel` goes: the result's acknowledgement, sent once it is stored, goes nowhere.
  core_->DisconnectWorker(*session, "done");
}

// A study deleted while its read back is under way is not brought back by it.
TEST_F(EndedStudiesTest, AStudyDeletedDuringItsReadBackStaysDeleted) {
  absl::Notification reading;
  absl::Notification release;
  db_.options().after_read_back = [&](const std::string& study) {
    if (study != "so" || reading.HasBeenNotified()) return;
    reading.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(20));  // Held under the lock, the delete would wait for it.
  };
  Restart();
  RunStudies();
  Committed();
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  absl::StatusOr<ListPage<v1::Trial>> page;
  std::thread user([&] { page = core_->ListTrials("so", v1::Trial::STATE_UNSPECIFIED, 0, ""); });
  ASSERT_TRUE(reading.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const absl::Status deleted = core_->DeleteStudy("so", /*force=*/true);
  release.Notify();
  user.join();
  ASSERT_TRUE(deleted.ok()) << deleted;
  EXPECT_TRUE(absl::IsNotFound(page.status())) << page.status();
  EXPECT_TRUE(absl::IsNotFound(core_->GetStudy("so").status()));
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
}

// A read back overtaken by another (the study read back, extended, ended with a new trial and
// evicted again while the first read waited) is dropped: the page shows the 13 trials, not the
// 12 the first read found.
TEST_F(EndedStudiesTest, AReadBackOvertakenByAnotherEvictionIsDropped) {
  absl::Notification reading;
  absl::Notification release;
  db_.options().after_read_back = [&](const std::string& study) {
    if (study != "so" || reading.HasBeenNotified()) return;
    reading.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  Restart();
  RunStudies();
  Committed();
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  absl::StatusOr<ListPage<v1::Trial>> page;
  std::thread user([&] { page = core_->ListTrials("so", v1::Trial::STATE_UNSPECIFIED, 100, ""); });
  ASSERT_TRUE(reading.WaitForNotificationWithTimeout(absl::Seconds(30)));
  v1::UpdateStudyRequest update;
  update.set_name("so");
  update.mutable_spec()->set_max_trials(13);
  update.mutable_update_mask()->add_paths("max_trials");
  absl::StatusOr<v1::Study> extended = core_->UpdateStudy(update);
  std::vector<int64_t> asked;
  if (extended.ok()) {
    asked = Ask("so", 1);
    if (asked.size() == 1) Tell("so", asked[0], {{"loss", 1}});
    Committed();
  }
  const int shed = core_->ShedEndedStudies();
  release.Notify();
  user.join();
  ASSERT_TRUE(extended.ok()) << extended.status();
  ASSERT_EQ(asked, std::vector<int64_t>{12});
  ASSERT_GE(shed, 1);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->items.size(), 13u);
  EXPECT_EQ(AllTrials(*core_, "so").size(), 13u);
}

// A study larger than the whole ended-study cache, read back for a reader that pages through
// it (GetParetoFront; before issue 31's store pages, the dashboard's ListTrials of a study of
// 100,000 trials in ten pages), stays for its next page when a commit comes between (here
// another study's result): it was evicted at that commit and read back again, under the lock,
// for every page, which at 100,000 trials on a loaded machine kept a page from opening for a
// minute.
TEST_F(EndedStudiesTest, AStudyLargerThanTheCacheIsReadBackOnceForAPagedReader) {
  std::atomic<int> read_backs = 0;
  db_.options().after_read_back = [&](const std::string& study) {
    if (study == "mo") ++read_backs;
  };
  ended_study_cache_bytes_ = 1;  // Every ended study is larger than the cache.
  Restart();
  RunStudies();
  Committed();
  core_->ShedEndedStudies();
  ASSERT_EQ(core_->ended_studies_in_memory().studies, 0);
  absl::StatusOr<v1::GetParetoFrontResponse> first = core_->GetParetoFront("mo", 1, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(read_backs, 1);
  ASSERT_FALSE(first->next_page_token().empty());
  int pages = 1;
  std::string token = first->next_page_token();
  while (!token.empty()) {
    // A write of another study, committed, between two pages.
    const std::vector<int64_t> asked = Ask("active", 1);
    ASSERT_EQ(asked.size(), 1u);
    Tell("active", asked[0], {{"loss", 2.0}});
    Committed();
    absl::StatusOr<v1::GetParetoFrontResponse> page = core_->GetParetoFront("mo", 1, token);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    token = page->next_page_token();
  }
  EXPECT_EQ(read_backs, 1) << "the study was read back again between its pages";
  EXPECT_EQ(pages, 4);  // (1, 4), (2, 3), (3, 2) and (4, 1).
  // Still bounded: once another ended study is used, the first goes.
  ASSERT_TRUE(core_->GetParetoFront("so", 1, "").ok());
  Committed();
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 1);
}

// What an evicted study's ListTrials (every view, every state, pages of 3 and of 1,000) and
// GetParamImportances (both evaluators, pruned trials or not) answer from the store's rows,
// with nothing read back: the same as with the study in memory, and after a restart.
std::string StoredAnswers(SchedulerCore& core, const std::string& name) {
  using View = SchedulerCore::TrialView;
  std::string out;
  for (View view : {View::kFull, View::kValuesOnly, View::kPlot}) {
    for (v1::Trial::State only : {v1::Trial::STATE_UNSPECIFIED, v1::Trial::COMPLETED,
                                  v1::Trial::PRUNED, v1::Trial::FAILED}) {
      for (int size : {3, 1000}) {
        // Every trial, and the plots' sample of every third and each that improved.
        for (int stride : {1, 3}) {
          std::string token;
          do {
            absl::StatusOr<ListPage<v1::Trial>> page =
                core.ListTrials(name, only, size, token, view, stride);
            if (!page.ok()) {
              absl::StrAppend(&out, "ListTrials: ", page.status().ToString(), "\n");
              break;
            }
            for (const v1::Trial& trial : page->items) {
              absl::StrAppend(&out, static_cast<int>(view), " ", only, " ", stride, ": ",
                              trial.DebugString());
            }
            token = page->next_page_token;
            absl::StrAppend(&out, "covered ", page->covered, ", token: ", token, "\n");
          } while (!token.empty());
        }
      }
    }
  }
  for (auto evaluator : {v1::GetParamImportancesRequest::PED_ANOVA,
                         v1::GetParamImportancesRequest::FANOVA}) {
    for (bool pruned : {false, true}) {
      v1::GetParamImportancesRequest request;
      request.set_study(name);
      request.set_evaluator(evaluator);
      request.set_include_pruned(pruned);
      absl::StatusOr<v1::GetParamImportancesResponse> importances =
          core.GetParamImportances(request);
      absl::StrAppend(&out, "importances: ",
                      importances.ok() ? importances->DebugString() : importances.status().ToString(),
                      "\n");
    }
  }
  return out;
}

TEST_F(EndedStudiesTest, AnEvictedStudysPagesAndImportancesComeFromTheStoreAsBefore) {
  std::atomic<int> reads = 0;
  db_.options().after_read_back = [&](const std::string&) { ++reads; };
  Restart();
  RunStudies();
  Committed();
  const std::string so = StoredAnswers(*core_, "so");
  const std::string mo = StoredAnswers(*core_, "mo");
  // The comparison covers what it should: each view and state, several pages, importances.
  EXPECT_NE(so.find("PRUNED"), std::string::npos);
  EXPECT_NE(so.find("token: dHJp"), std::string::npos);  // "trials|..." in web-safe base64.
  EXPECT_NE(so.find("token: c2Ft"), std::string::npos);  // "sample|...".
  EXPECT_NE(so.find("objective_value"), std::string::npos);
  EXPECT_NE(mo.find("objective_values"), std::string::npos);
  EXPECT_NE(so.find("importance: "), std::string::npos);
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  ASSERT_EQ(reads, 0);

  EXPECT_EQ(StoredAnswers(*core_, "so"), so);
  EXPECT_EQ(StoredAnswers(*core_, "mo"), mo);
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0) << "a study was read back";
  EXPECT_GT(reads, 0);  // From the store.

  Committed();
  Restart();
  EXPECT_EQ(StoredAnswers(*core_, "so"), so);
  EXPECT_EQ(StoredAnswers(*core_, "mo"), mo);
  EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
}

// The plots' sample of a study (ListTrialsRequest.sample_stride), a trial a page so that the
// best so far goes from token to token: every stride-th trial by number and each completed one
// better than all before it, in memory and from the store's rows alike; a two-objective study's
// sample is the stride's alone. Tokens are good for the listing that made them only.
TEST_F(EndedStudiesTest, ASampleIsEveryStrideThTrialAndEachThatImprovedPageAfterPage) {
  RunStudies();
  Committed();
  const auto sampled = [&](const std::string& name, int stride, int size) {
    std::vector<int64_t> numbers;
    int64_t covered = 0;
    std::string token;
    do {
      absl::StatusOr<ListPage<v1::Trial>> page = core_->ListTrials(
          name, v1::Trial::STATE_UNSPECIFIED, size, token, SchedulerCore::TrialView::kPlot, stride);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const v1::Trial& trial : page->items) numbers.push_back(trial.number());
      covered += page->covered;
      token = page->next_page_token;
    } while (!token.empty());
    EXPECT_EQ(covered, static_cast<int64_t>(AllTrials(*core_, name).size())) << name;
    return numbers;
  };
  // What the rule keeps, from the whole listing.
  const auto expected = [&](const std::string& name, int stride, bool improving) {
    std::vector<int64_t> numbers;
    std::optional<double> best;
    for (const v1::Trial& trial : AllTrials(*core_, name)) {
      bool improves = false;
      if (improving && trial.state() == v1::Trial::COMPLETED && trial.has_objective_value()) {
        improves = !best || trial.objective_value() < *best;
        if (improves) best = trial.objective_value();
      }
      if (improves || trial.number() % stride == 0) numbers.push_back(trial.number());
    }
    return numbers;
  };
  const std::vector<int64_t> so = expected("so", 4, true), mo = expected("mo", 3, false);
  // Some kept for improving alone, or the test shows nothing of the best's carrying.
  ASSERT_GT(so.size(), (12 + 3) / 4);
  for (bool evicted : {false, true}) {
    SCOPED_TRACE(evicted ? "evicted" : "in memory");
    if (evicted) ASSERT_EQ(core_->ShedEndedStudies(), 2);
    for (int size : {1, 2, 1000}) {
      EXPECT_EQ(sampled("so", 4, size), so) << size;
      EXPECT_EQ(sampled("mo", 3, size), mo) << size;
    }
  }
  // Trials not finished are listed too: a reader knows where its sample may still change.
  const std::vector<int64_t> running = Ask("active", 2);
  ASSERT_EQ(running.size(), 2u);
  std::vector<int64_t> active = expected("active", 1000, true);
  active.insert(active.end(), running.begin(), running.end());
  EXPECT_EQ(sampled("active", 1000, 1), active);

  const std::string token = core_->ListTrials("so", {}, 1, "", SchedulerCore::TrialView::kPlot, 4)
                                ->next_page_token;
  ASSERT_FALSE(token.empty());
  for (int other : {1, 2}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        core_->ListTrials("so", {}, 1, token, SchedulerCore::TrialView::kPlot, other).status()))
        << other;
  }
  const std::string plain =
      core_->ListTrials("so", {}, 1, "", SchedulerCore::TrialView::kPlot)->next_page_token;
  EXPECT_TRUE(absl::IsInvalidArgument(
      core_->ListTrials("so", {}, 1, plain, SchedulerCore::TrialView::kPlot, 4).status()));
  for (int stride : {-1, kMaxSampleStride + 1}) {
    const absl::Status status =
        core_->ListTrials("so", {}, 1, "", SchedulerCore::TrialView::kPlot, stride).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << stride;
    EXPECT_NE(status.message().find("sample_stride"), std::string::npos) << status;
  }
  // Tokens a client made: "<kind>|<filter>|<stride>|<best>|<number>", its parts replaced.
  const auto forged = [](const std::string& token, int from_end, const std::string& part) {
    std::string decoded;
    EXPECT_TRUE(absl::WebSafeBase64Unescape(token, &decoded));
    std::vector<std::string> parts = absl::StrSplit(decoded, '|');
    parts[parts.size() - from_end] = part;
    return absl::WebSafeBase64Escape(absl::StrJoin(parts, "|"));
  };
  const std::string nan = absl::StrCat(absl::bit_cast<uint64_t>(std::nan("")));
  EXPECT_TRUE(absl::IsInvalidArgument(core_->ListTrials("so", {}, 1, forged(token, 2, nan),
                                                        SchedulerCore::TrialView::kPlot, 4)
                                          .status()));
  // A position past every trial number is an empty last page, in memory and from the rows
  // alike (from the rows it was read as number 0 and said the store was damaged).
  for (bool evicted : {false, true}) {
    if (evicted) core_->ShedEndedStudies();
    for (const auto& [far, stride] : {std::pair(forged(token, 1, "9223372036854775808"), 4),
                                      std::pair(forged(plain, 1, "18446744073709551615"), 1)}) {
      absl::StatusOr<ListPage<v1::Trial>> page =
          core_->ListTrials("so", {}, 1, far, SchedulerCore::TrialView::kPlot, stride);
      ASSERT_TRUE(page.ok()) << evicted << " " << page.status();
      EXPECT_TRUE(page->items.empty());
      EXPECT_TRUE(page->next_page_token.empty());
    }
  }
}

// An evicted study's pages are built off the core's lock, so they must fit the reply budget
// whole (other pages may take it meanwhile): with a budget of 128 KiB, a 2,000-trial study of
// trials about 300 bytes long comes in pages each within it, and a sample cut by the budget goes
// on from the trial that did not fit as the whole listing does. Every trial here improves on
// the one before, so the sample is every trial, and the trial that did not fit is listed on the
// next page only if the best it starts from is the one before that trial.
TEST_F(EndedStudiesTest, AnEvictedStudysPagesFitTheReplyBudgetAndASampleGoesOnWhereOneWasCut) {
  max_reply_bytes_ = 128 << 10;
  Restart();
  v1::StudyExport exported;
  *exported.mutable_study()->mutable_spec() = SingleObjective("wide", 2'000);
  exported.mutable_study()->set_state(v1::Study::COMPLETED);
  for (int n = 0; n < 2'000; ++n) {
    v1::Trial* trial = exported.add_trials();
    trial->set_number(n);
    trial->set_state(v1::Trial::COMPLETED);
    (*trial->mutable_params())["lr"].set_double_value(0.001 + n * 0.00001);
    (*trial->mutable_params())["layers"].set_int_value(1 + n % 4);
    (*trial->mutable_params())["act"].set_string_value("relu");
    (*trial->mutable_metrics())["loss"] = 1000.0 - n;
    for (int m = 0; m < 12; ++m) (*trial->mutable_metrics())[absl::StrCat("measure_", m)] = n + m;
  }
  ASSERT_TRUE(core_->ImportStudy(exported).ok());
  Committed();
  // In memory a page is built under the lock and may pass the budget by its last trial.
  bool evicted = false;
  const auto listing = [&](int stride) {
    std::vector<int64_t> numbers;
    std::string token;
    int pages = 0;
    do {
      absl::StatusOr<ListPage<v1::Trial>> page =
          core_->ListTrials("wide", {}, 10'000, token, SchedulerCore::TrialView::kFull, stride);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      size_t bytes = 0;
      for (const v1::Trial& trial : page->items) {
        bytes += trial.ByteSizeLong();
        numbers.push_back(trial.number());
      }
      if (evicted) EXPECT_LE(bytes, max_reply_bytes_) << "page " << pages;
      EXPECT_EQ(page->lease.bytes(), bytes);
      token = page->next_page_token;
      ++pages;
    } while (!token.empty());
    EXPECT_GE(pages, 4) << "the budget cut too few pages";
    return numbers;
  };
  const std::vector<int64_t> all = listing(1);
  ASSERT_EQ(all.size(), 2'000u);
  EXPECT_EQ(listing(kMaxSampleStride), all);
  ASSERT_EQ(core_->ShedEndedStudies(), 1);
  evicted = true;
  EXPECT_EQ(listing(1), all);
  EXPECT_EQ(listing(kMaxSampleStride), all);
}

// Past an evaluator's limit (fANOVA: 2,000 trials) the importances of an evicted study are
// computed on the same seeded subsample as in memory: 2,600 imported trials, some pruned and
// failed.
TEST_F(EndedStudiesTest, AnEvictedStudysImportancesSubsampleAsInMemory) {
  v1::StudyExport exported;
  *exported.mutable_study()->mutable_spec() = SingleObjective("big", 2'600);
  exported.mutable_study()->set_state(v1::Study::COMPLETED);
  const char* kinds[] = {"relu", "tanh"};
  for (int n = 0; n < 2'600; ++n) {
    v1::Trial* trial = exported.add_trials();
    trial->set_number(n);
    const double lr = 0.001 + (n * 37 % 1000) * 0.000099;
    (*trial->mutable_params())["lr"].set_double_value(lr);
    (*trial->mutable_params())["layers"].set_int_value(1 + n % 4);
    (*trial->mutable_params())["act"].set_string_value(kinds[n % 2]);
    const double loss = 100 * lr + (n % 4) + (n % 2) * 0.5;
    if (n % 13 == 0) {
      trial->set_state(v1::Trial::FAILED);
      trial->set_error("diverged");
    } else if (n % 7 == 0) {
      trial->set_state(v1::Trial::PRUNED);
      (*trial->mutable_metrics())["loss"] = loss + 1;
      (*trial->mutable_metrics())["pruned_step"] = 3;
    } else {
      trial->set_state(v1::Trial::COMPLETED);
      (*trial->mutable_metrics())["loss"] = loss;
    }
  }
  ASSERT_TRUE(core_->ImportStudy(exported).ok());
  Committed();
  std::vector<std::string> before;
  for (auto evaluator : {v1::GetParamImportancesRequest::PED_ANOVA,
                         v1::GetParamImportancesRequest::FANOVA}) {
    v1::GetParamImportancesRequest request;
    request.set_study("big");
    request.set_evaluator(evaluator);
    request.set_include_pruned(evaluator == v1::GetParamImportancesRequest::FANOVA);
    request.set_seed(11);
    absl::StatusOr<v1::GetParamImportancesResponse> in_memory = core_->GetParamImportances(request);
    ASSERT_TRUE(in_memory.ok()) << in_memory.status();
    // A new process: the answer kept with the study is gone, so this one is read from rows.
    Committed();
    Restart();
    absl::StatusOr<v1::GetParamImportancesResponse> stored = core_->GetParamImportances(request);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(core_->ended_studies_in_memory().studies, 0);
    EXPECT_EQ(stored->DebugString(), in_memory->DebugString());
    before.push_back(in_memory->DebugString());
    // Read back for the next round's in-memory answer.
    ASSERT_TRUE(core_->GetParetoFront("big").ok());
  }
  EXPECT_NE(before[1].find("trials_used: 2000"), std::string::npos) << before[1];
  EXPECT_NE(before[1].find("trials_considered: 2400"), std::string::npos) << before[1];  // 2,600 less 200 failed.
  EXPECT_NE(before[0].find("trials_considered: 2057"), std::string::npos) << before[0];  // And 343 pruned.
}

// An ended study keeps its importances' answer through its eviction: asked again out of memory
// it reads no rows; after a restart it is computed from the rows once and kept again. An extend
// (new trials) makes it stale: the answer then is the one a new process computes.
TEST_F(EndedStudiesTest, AnEndedStudyKeepsItsImportancesUntilItChanges) {
  std::atomic<int> reads = 0;
  db_.options().after_read_back = [&](const std::string&) { ++reads; };
  Restart();
  RunStudies();
  Committed();
  v1::GetParamImportancesRequest request;
  request.set_study("so");
  const auto importances = [&] {
    absl::StatusOr<v1::GetParamImportancesResponse> answer = core_->GetParamImportances(request);
    EXPECT_TRUE(answer.ok()) << answer.status();
    return answer.ok() ? answer->DebugString() : answer.status().ToString();
  };
  const std::string in_memory = importances();
  ASSERT_NE(in_memory.find("importance: "), std::string::npos) << in_memory;
  ASSERT_EQ(core_->ShedEndedStudies(), 2);
  EXPECT_EQ(importances(), in_memory);
  EXPECT_EQ(reads, 0) << "the kept answer was not used";
  request.set_evaluator(v1::GetParamImportancesRequest::PED_ANOVA);  // What unset means.
  EXPECT_EQ(importances(), in_memory);
  EXPECT_EQ(reads, 0) << "PED_ANOVA by name is another question than unset";
  // Another question is not answered with it.
  request.set_evaluator(v1::GetParamImportancesRequest::FANOVA);
  const std::string fanova = importances();
  EXPECT_NE(fanova, in_memory);
  EXPECT_GT(reads, 0);
  request.set_evaluator(v1::GetParamImportancesRequest::PED_ANOVA);

  Restart();
  reads = 0;
  EXPECT_EQ(importances(), in_memory);
  const int read_once = reads;
  EXPECT_GT(read_once, 0) << "nothing is kept across a restart";
  EXPECT_EQ(importances(), in_memory);
  EXPECT_EQ(reads, read_once);

  // Extended by two trials, one a new best: the kept answer is not given again.
  v1::UpdateStudyRequest update;
  update.set_name("so");
  update.mutable_spec()->set_max_trials(14);
  update.mutable_update_mask()->add_paths("max_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  EXPECT_EQ(Ask("so", 2), (std::vector<int64_t>{12, 13}));
  Tell("so", 12, {{"loss", 0.5}});
  Tell("so", 13, {{"loss", 9}});
  ASSERT_EQ(core_->GetStudy("so")->state(), v1::Study::COMPLETED);
  const std::string extended = importances();
  EXPECT_NE(extended, in_memory);
  Committed();
  ASSERT_GE(core_->ShedEndedStudies(), 1);
  EXPECT_EQ(importances(), extended);
  Restart();
  EXPECT_EQ(importances(), extended) << "not what a new process computes from the rows";

  // Deleted and made again under the same name: nothing of the old study answers.
  ASSERT_TRUE(core_->DeleteStudy("so", false).ok());
  ASSERT_TRUE(core_->CreateStudy(SingleObjective("so", 2)).ok());
  for (int64_t n : Ask("so", 2)) Tell("so", n, {{"loss", 1.0 + n}});
  ASSERT_EQ(core_->GetStudy("so")->state(), v1::Study::COMPLETED);
  const std::string again = importances();
  EXPECT_NE(again, extended);
  Committed();
  Restart();
  EXPECT_EQ(importances(), again);
}

}  // namespace
}  // namespace dhpt::scheduler
