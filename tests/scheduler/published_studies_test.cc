// GetStudy and GetBestTrial off the core's lock (issue 34, published_studies.h): they answer
// while a stream thread holds the lock, and their published answers are, at every step of a
// study's life, the ones built under the lock (read-your-writes: a result accepted is in the
// next GetStudy and GetBestTrial).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dhpt/v1/study_service.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

v1::TrialResult Result(const v1::Assign& assign, v1::Trial::State state, double value) {
  v1::TrialResult result;
  result.set_trial_id(assign.trial_id());
  result.set_attempt(assign.attempt());
  result.set_epoch(assign.epoch());
  result.set_state(state);
  if (state == v1::Trial::COMPLETED) (*result.mutable_metrics())["value"] = value;
  if (state == v1::Trial::FAILED) result.set_error("the trainer failed");
  return result;
}

class PublishedStudiesTest : public ::testing::Test {
 protected:
  PublishedStudiesTest() : core_(std::make_unique<SchedulerCore>(db_.get(), SchedulerOptions())) {}

  uint64_t Connect(RecordingChannel& channel, const std::string& id, int slots) {
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(Hello(id, slots), {}, &channel);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // GetStudy's answer is the one built under the lock now; with `published`, it was read
  // off the lock (the study reads nothing but itself).
  void ExpectAsUnderLock(const std::string& name, bool published, const std::string& step) {
    SCOPED_TRACE(step);
    absl::StatusOr<v1::Study> under_lock = core_->GetStudyUnderLockForTest(name);
    ASSERT_TRUE(under_lock.ok()) << under_lock.status();
    absl::StatusOr<v1::Study> answer = core_->GetStudy(name);
    ASSERT_TRUE(answer.ok()) << answer.status();
    std::string differences;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&differences);
    EXPECT_TRUE(differ.Compare(*under_lock, *answer)) << differences;
    std::optional<v1::Study> off_lock = core_->PublishedStudyForTest(name);
    EXPECT_EQ(off_lock.has_value(), published);
    if (off_lock) {
      differences.clear();
      EXPECT_TRUE(differ.Compare(*under_lock, *off_lock)) << differences;
    }
    // GetBestTrial first: built under the lock it reads an evicted study back.
    absl::StatusOr<v1::Trial> best = core_->GetBestTrial(name);
    absl::StatusOr<v1::Trial> best_under_lock = core_->GetBestTrialUnderLockForTest(name);
    ASSERT_EQ(best.status(), best_under_lock.status());
    if (best.ok()) {
      differences.clear();
      EXPECT_TRUE(differ.Compare(*best_under_lock, *best)) << differences;
    }
  }

  // Every page of ListStudies (`page_size` studies a page) is the one built under the lock
  // now; `published`: whether each was read off the lock.
  void ExpectPagesAsUnderLock(int page_size, bool published, const std::string& step) {
    SCOPED_TRACE(step);
    std::string token;
    google::protobuf::util::MessageDifferencer differ;
    std::string differences;
    differ.ReportDifferencesToString(&differences);
    do {
      absl::StatusOr<ListPage<v1::Study>> under_lock =
          core_->ListStudiesUnderLockForTest(page_size, token);
      ASSERT_TRUE(under_lock.ok()) << under_lock.status();
      absl::StatusOr<std::optional<ListPage<v1::Study>>> off_lock =
          core_->PublishedStudyPageForTest(page_size, token);
      ASSERT_TRUE(off_lock.ok()) << off_lock.status();
      EXPECT_EQ(off_lock->has_value(), published) << "page after \"" << token << "\"";
      absl::StatusOr<ListPage<v1::Study>> answer = core_->ListStudies(page_size, token);
      ASSERT_TRUE(answer.ok()) << answer.status();
      for (const ListPage<v1::Study>* page :
           {&*answer, off_lock->has_value() ? &**off_lock : &*answer}) {
        EXPECT_EQ(page->next_page_token, under_lock->next_page_token);
        ASSERT_EQ(page->items.size(), under_lock->items.size());
        for (size_t i = 0; i < page->items.size(); ++i) {
          differences.clear();
          EXPECT_TRUE(differ.Compare(under_lock->items[i], page->items[i])) << differences;
        }
      }
      token = under_lock->next_page_token;
    } while (!token.empty());
  }

  // Runs `call` on a thread while another thread holds the core's lock, as a stream thread
  // would; whether it answered within a bound generous for a loaded machine (a call that
  // waits for the lock never answers while it is held).
  template <typename Call>
  bool AnswersWhileTheLockIsHeld(Call call) {
    absl::Notification held, release;
    std::thread holder([&] {
      core_->RunUnderLockForTest([&] {
        held.Notify();
        release.WaitForNotification();
      });
    });
    held.WaitForNotification();
    absl::Notification answered;
    std::thread user([&] {
      call();
      answered.Notify();
    });
    const bool in_time = answered.WaitForNotificationWithTimeout(absl::Seconds(10));
    release.Notify();
    holder.join();
    user.join();
    return in_time;
  }

  static v1::StudySpec TwoAtATime(const std::string& name) {
    v1::StudySpec spec = FunctionStudy(name, 6);
    spec.set_parallel_trials(2);
    return spec;
  }

  std::deque<RecordingChannel> channels_;  // Declared first: destroyed after core_.
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(PublishedStudiesTest, GetStudyAnswersWhileAStreamThreadHoldsTheCoresLock) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel, "w", 2);
  core_->HandleResult(session, Result(channel.Assigns().at(0), v1::Trial::COMPLETED, 3.0));
  ASSERT_TRUE(core_->GetStudy("s").ok());  // A user reads it: from now on it is published.

  absl::StatusOr<v1::Study> study;
  EXPECT_TRUE(AnswersWhileTheLockIsHeld([&] { study = core_->GetStudy("s"); }))
      << "GetStudy waited for the core's lock";
  ASSERT_TRUE(study.ok()) << study.status();
  EXPECT_EQ(study->trials_completed(), 1);
  EXPECT_EQ(study->trials_running(), 2);
}

TEST_F(PublishedStudiesTest, GetBestTrialAnswersWhileAStreamThreadHoldsTheCoresLock) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel, "w", 2);
  core_->HandleResult(session, Result(channel.Assigns().at(0), v1::Trial::COMPLETED, 3.0));
  ASSERT_TRUE(core_->GetBestTrial("s").ok());  // A user reads it: from now on it is published.
  core_->HandleResult(session, Result(channel.Assigns().at(1), v1::Trial::COMPLETED, 1.0));

  absl::StatusOr<v1::Trial> best;
  EXPECT_TRUE(AnswersWhileTheLockIsHeld([&] { best = core_->GetBestTrial("s"); }))
      << "GetBestTrial waited for the core's lock";
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->objective_value(), 1.0);  // The result accepted before the call.
  EXPECT_EQ(best->id(), channel.Assigns().at(1).trial_id());
}

TEST_F(PublishedStudiesTest, ListStudiesAnswersWhileAStreamThreadHoldsTheCoresLock) {
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(core_->CreateStudy(TwoAtATime(name)).ok());
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel, "w", 6);  // Two trials of each study run.
  ASSERT_TRUE(core_->ListStudies(0, "").ok());  // A user lists them: from now on published.
  const v1::Assign& first = channel.Assigns().at(0);
  core_->HandleResult(session, Result(first, v1::Trial::COMPLETED, 3.0));

  absl::StatusOr<ListPage<v1::Study>> page;
  EXPECT_TRUE(AnswersWhileTheLockIsHeld([&] { page = core_->ListStudies(0, ""); }))
      << "ListStudies waited for the core's lock";
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->items.size(), 3u);
  int completed = 0;
  for (const v1::Study& study : page->items) completed += study.trials_completed();
  EXPECT_EQ(completed, 1);  // The result accepted before the call.
  EXPECT_TRUE(page->next_page_token.empty());
}

// One listing, a page at a time, while studies are deleted and created again between its pages
// (hostile 05): a name shows once, and every study that exists all through it is shown. A study
// created during the listing, under an old name too, is left for the next listing. Off the lock
// (after a first listing, with a worker) and under it, as each page is built either way.
TEST_F(PublishedStudiesTest, AListingShowsANameOnceWhenItsStudyIsCreatedAgainMidListing) {
  for (bool published : {false, true}) {
    SCOPED_TRACE(published ? "off the lock" : "under the lock");
    for (const char* name : {"a", "b", "c", "d"}) {
      ASSERT_TRUE(core_->CreateStudy(TwoAtATime(name)).ok());
    }
    if (published) {
      RecordingChannel& channel = channels_.emplace_back();
      Connect(channel, "w", 8);  // Summaries that do not read the workers: published.
      ASSERT_TRUE(core_->ListStudies(0, "").ok());
    }
    auto page_after = [&](const std::string& token) {
      absl::StatusOr<ListPage<v1::Study>> page = core_->ListStudies(1, token);
      EXPECT_TRUE(page.ok()) << page.status();
      if (published) {
        absl::StatusOr<std::optional<ListPage<v1::Study>>> off_lock =
            core_->PublishedStudyPageForTest(1, token);
        EXPECT_TRUE(off_lock.ok() && off_lock->has_value()) << "page after \"" << token << "\"";
      }
      return page.ok() ? *std::move(page) : ListPage<v1::Study>{};
    };
    std::vector<std::string> listed;
    ListPage<v1::Study> page = page_after("");
    for (const v1::Study& study : page.items) listed.push_back(study.spec().name());
    // "a" listed, then created again: a new study, after "d" in creation order. "c", not
    // listed yet, likewise; "e" is new.
    ASSERT_TRUE(core_->DeleteStudy("a", /*force=*/true).ok());
    ASSERT_TRUE(core_->CreateStudy(TwoAtATime("a")).ok());
    ASSERT_TRUE(core_->DeleteStudy("c", /*force=*/true).ok());
    ASSERT_TRUE(core_->CreateStudy(TwoAtATime("c")).ok());
    ASSERT_TRUE(core_->CreateStudy(TwoAtATime("e")).ok());
    if (published) ASSERT_TRUE(core_->ListStudies(0, "").ok());  // The new ones published too.
    while (!page.next_page_token.empty()) {
      page = page_after(page.next_page_token);
      for (const v1::Study& study : page.items) listed.push_back(study.spec().name());
    }
    EXPECT_THAT(listed, ::testing::ElementsAre("a", "b", "d"));
    // The next listing shows them all, the ones created again at their new place.
    absl::StatusOr<ListPage<v1::Study>> fresh = core_->ListStudies(0, "");
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    std::vector<std::string> all;
    for (const v1::Study& study : fresh->items) all.push_back(study.spec().name());
    EXPECT_THAT(all, ::testing::ElementsAre("b", "d", "a", "c", "e"));
    for (const std::string& name : all) ASSERT_TRUE(core_->DeleteStudy(name, true).ok());
  }
}

TEST_F(PublishedStudiesTest, ThePublishedStudyPagesAreTheOnesBuiltUnderTheLockAtEveryStep) {
  for (const char* name : {"a", "b"}) ASSERT_TRUE(core_->CreateStudy(TwoAtATime(name)).ok());
  // Nothing listed yet; then studies waiting for a worker (their summaries read the workers).
  ExpectPagesAsUnderLock(1, /*published=*/false, "never listed");
  ExpectPagesAsUnderLock(1, false, "waiting for a worker");

  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel, "w", 6);  // Two trials of each study run.
  ExpectPagesAsUnderLock(1, true, "a worker came: pages of one");
  ExpectPagesAsUnderLock(0, true, "one page");
  core_->HandleResult(session, Result(channel.Assigns().at(0), v1::Trial::COMPLETED, 2.0));
  ExpectPagesAsUnderLock(1, true, "a result");

  // A new study is listed under the lock until it is read once (then published too).
  ASSERT_TRUE(core_->CreateStudy(TwoAtATime("c")).ok());
  ExpectPagesAsUnderLock(0, false, "a study created");
  ExpectPagesAsUnderLock(0, true, "the new study listed");
  ExpectPagesAsUnderLock(2, true, "pages of two");

  ASSERT_TRUE(core_->StopStudy("a").ok());
  ExpectPagesAsUnderLock(2, true, "a study stopped");
  EXPECT_EQ(core_->ShedEndedStudies(), 1);
  ExpectPagesAsUnderLock(2, true, "an ended study evicted");
  ASSERT_TRUE(core_->DeleteStudy("b", /*force=*/true).ok());
  ExpectPagesAsUnderLock(1, true, "a study deleted");
  ExpectPagesAsUnderLock(0, true, "a study deleted, one page");
}

// An ask-and-tell study whose one categorical parameter has `parameters` x 1,000 values of
// about 1 KB: a spec of about `parameters` MB.
v1::StudySpec LargeStudy(const std::string& name, int parameters) {
  v1::StudySpec spec;
  spec.set_name(name);
  spec.mutable_model()->set_kind(v1::Model::EXTERNAL);
  spec.mutable_objective()->set_metric("loss");
  spec.set_max_trials(10);
  for (int p = 0; p < parameters; ++p) {
    v1::Parameter& choice = *spec.add_parameters();
    choice.set_name(absl::StrCat("choice", p));
    for (int v = 0; v < 1000; ++v) {
      choice.mutable_categorical()->add_values(absl::StrCat(v, std::string(1000, 'v')));
    }
  }
  return spec;
}

TEST_F(PublishedStudiesTest, EveryStudyPageFitsADefaultClientsReceiveLimit) {
  // Hostile review: five studies of 1 MB specs made a default page of 5 MB, which grpcurl and
  // any stub with gRPC's default 4 MiB receive limit could not read. (Stopped, so that once
  // listed they are published and the pages read off the lock are checked too.)
  for (int i = 0; i < 5; ++i) {
    const std::string name = absl::StrCat("big", i);
    absl::StatusOr<v1::Study> created = core_->CreateStudy(LargeStudy(name, 1));
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_TRUE(core_->StopStudy(name).ok());
  }
  for (const bool published : {false, true}) {  // Listed once: then off the lock.
    SCOPED_TRACE(published ? "published" : "under the lock");
    EXPECT_EQ(core_->PublishedStudyPageForTest(0, "")->has_value(), published);
    std::vector<std::string> names;
    std::vector<size_t> sizes;
    std::string token;
    do {
      absl::StatusOr<ListPage<v1::Study>> page = core_->ListStudies(0, token);
      ASSERT_TRUE(page.ok()) << page.status();
      v1::ListStudiesResponse response;
      for (const v1::Study& study : page->items) {
        *response.add_studies() = study;
        names.push_back(study.spec().name());
      }
      response.set_next_page_token(page->next_page_token);
      EXPECT_LE(response.ByteSizeLong(), size_t{4} << 20);
      sizes.push_back(page->items.size());
      token = page->next_page_token;
    } while (!token.empty());
    EXPECT_THAT(names, ::testing::ElementsAre("big0", "big1", "big2", "big3", "big4"));
    EXPECT_THAT(sizes, ::testing::ElementsAre(4, 1));  // As many as fit (about 1 MB each).
  }
  ExpectPagesAsUnderLock(0, true, "pages cut by size");
  // A study whose own answer could pass the limit is refused: a default client could neither
  // read it nor list past it (second hostile review: a 4,190,090-byte spec was accepted).
  v1::StudySpec over = LargeStudy("over", 4);  // 4.02 MB, and 170 KB more: 4.19 MB.
  v1::Parameter& extra = *over.add_parameters();
  extra.set_name("extra");
  for (int v = 0; v < 170; ++v) {
    extra.mutable_categorical()->add_values(absl::StrCat(v, std::string(1000, 'x')));
  }
  for (const v1::StudySpec& spec : {over, LargeStudy("huge", 5)}) {
    absl::StatusOr<v1::Study> refused = core_->CreateStudy(spec);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << spec.name();
    EXPECT_THAT(std::string(refused.status().message()),
                ::testing::HasSubstr("that gRPC clients such as grpcurl read by default"));
  }
  absl::StatusOr<v1::Study> created = core_->CreateStudy(LargeStudy("near", 4));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_LE(created->ByteSizeLong(), kMaxStudyAnswerBytes);
}

TEST_F(PublishedStudiesTest, ThePublishedSummaryIsTheOneBuiltUnderTheLockAtEveryStep) {
  v1::StudySpec spec = FunctionStudy("s", 6);
  spec.set_parallel_trials(2);
  spec.set_max_failed_trials(3);
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  // No worker: the study says why it waits, which reads the connected workers (under the lock).
  ExpectAsUnderLock("s", /*published=*/false, "created, waiting for a worker");

  RecordingChannel& first = channels_.emplace_back();
  const uint64_t s1 = Connect(first, "a", 2);
  ExpectAsUnderLock("s", true, "two trials running");
  core_->HandleStarted(s1, Attempt(first.Assigns().at(0)));
  ExpectAsUnderLock("s", true, "started");

  // Read-your-writes: the result is in the next GetStudy, best trial and all.
  core_->HandleResult(s1, Result(first.Assigns().at(0), v1::Trial::COMPLETED, 5.0));
  EXPECT_EQ(core_->GetStudy("s")->trials_completed(), 1);
  EXPECT_EQ(core_->GetStudy("s")->best_trial().objective_value(), 5.0);
  ExpectAsUnderLock("s", true, "one completed");
  core_->HandleResult(s1, Result(first.Assigns().at(1), v1::Trial::FAILED, 0));
  EXPECT_EQ(core_->GetStudy("s")->trials_failed(), 1);
  ExpectAsUnderLock("s", true, "one failed");
  core_->HandleResult(s1, Result(first.Assigns().at(2), v1::Trial::COMPLETED, 2.0));
  EXPECT_EQ(core_->GetStudy("s")->best_trial().objective_value(), 2.0);
  ExpectAsUnderLock("s", true, "a better trial");

  // The worker goes: its trial is pending again and the study waits for a worker.
  core_->DisconnectWorker(s1, "gone");
  ExpectAsUnderLock("s", false, "worker lost");
  RecordingChannel& second = channels_.emplace_back();
  const uint64_t s2 = Connect(second, "b", 2);
  ExpectAsUnderLock("s", true, "another worker");

  v1::UpdateStudyRequest update;
  update.set_name("s");
  update.mutable_spec()->set_parallel_trials(1);
  update.mutable_update_mask()->add_paths("parallel_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  EXPECT_EQ(core_->GetStudy("s")->spec().parallel_trials(), 1);
  ExpectAsUnderLock("s", true, "updated");

  ASSERT_TRUE(core_->StopStudy("s").ok());
  EXPECT_EQ(core_->GetStudy("s")->state(), v1::Study::STOPPED);
  ExpectAsUnderLock("s", true, "stopped");
  EXPECT_EQ(core_->ShedEndedStudies(), 1);  // Its summary only, now.
  ExpectAsUnderLock("s", true, "evicted");  // GetBestTrial's off the lock from the summary.

  update.mutable_spec()->set_max_trials(8);
  update.mutable_update_mask()->add_paths("max_trials");
  ASSERT_TRUE(core_->UpdateStudy(update).ok());
  EXPECT_NE(core_->GetStudy("s")->state(), v1::Study::STOPPED);
  ExpectAsUnderLock("s", true, "reopened");
  for (const v1::Assign& assign : second.Assigns()) {
    core_->HandleResult(s2, Result(assign, v1::Trial::COMPLETED, 1.0));
  }
  ExpectAsUnderLock("s", true, "results after the reopening");

  ASSERT_TRUE(core_->DeleteStudy("s", /*force=*/true).ok());
  EXPECT_EQ(core_->GetStudy("s").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(core_->PublishedStudyForTest("s").has_value());
}

}  // namespace
}  // namespace dhpt::scheduler
