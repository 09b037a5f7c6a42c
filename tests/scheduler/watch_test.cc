// Watch fan-out in the core: positions, the shared journal, resuming, resynchronising a
// watcher the journal no longer covers, summaries only, and the ends of a watch.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "google/protobuf/text_format.h"
#include "services/scheduler/scheduler_core.h"
#include "tests/scheduler/core_test_util.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::scheduler {
namespace {

using ::testing::HasSubstr;

class ReadyCounter : public StudyWatcher {
 public:
  void OnEventsReady() override { ++ready; }
  void OnEnd(const absl::Status& status) override { ended = status; }
  int ready = 0;
  std::optional<absl::Status> ended;
};

v1::StudyEvent Parse(const WatchEvent& framed) {
  // A framed event is one `events` entry of a WatchStudyResponse.
  v1::WatchStudyResponse response;
  EXPECT_TRUE(response.ParseFromString(framed.framed));
  EXPECT_EQ(response.events_size(), 1);
  return response.events(0);
}

class WatchTest : public ::testing::Test {
 protected:
  WatchTest() { Start(); }

  void Start(WatchJournalLimits journal = {}) {
    core_.reset();
    SchedulerOptions options;
    options.clock = [this] { return now_; };
    options.watch_journal = journal;
    core_ = std::make_unique<SchedulerCore>(db_.get(), options);
    ASSERT_TRUE(core_->Recover().ok());
  }

  uint64_t Watch(const std::string& study, StudyWatcher* watcher, WatchOptions options = {}) {
    absl::StatusOr<uint64_t> id = core_->Watch(study, options, watcher);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  // Every event readable now, parsed; the watch's last position in `position`.
  std::vector<v1::StudyEvent> ReadAll(uint64_t id, WatchRead* last = nullptr) {
    std::vector<v1::StudyEvent> events;
    while (true) {
      absl::StatusOr<WatchRead> read = core_->ReadWatch(id, 1 << 20);
      EXPECT_TRUE(read.ok()) << read.status();
      if (!read.ok()) return events;
      for (const WatchEventPtr& event : read->events) events.push_back(Parse(*event));
      if (read->events.empty()) {
        if (last != nullptr) *last = *read;
        return events;
      }
    }
  }

  // Runs `n` trials of the study to completion on worker `w`.
  void RunTrials(RecordingChannel& channel, uint64_t session, int n) {
    for (int i = 0; i < n; ++i) {
      const std::vector<v1::Assign> assigns = channel.Assigns();
      ASSERT_FALSE(assigns.empty());
      v1::TrialResult result;
      result.set_trial_id(assigns.back().trial_id());
      result.set_attempt(assigns.back().attempt());
      result.set_epoch(assigns.back().epoch());
      result.set_state(v1::Trial::COMPLETED);
      (*result.mutable_metrics())["value"] = i;
      core_->HandleResult(session, result);
    }
  }

  uint64_t Connect(RecordingChannel& channel) {
    absl::StatusOr<uint64_t> session = core_->ConnectWorker(Hello("w", 1), {}, &channel);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  std::deque<RecordingChannel> channels_;  // Destroyed after core_.
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  testing::TempDatabase db_;
  std::unique_ptr<SchedulerCore> core_;
};

TEST_F(WatchTest, ANewWatchGetsTheStudyThenEveryChangeInOrderThenTheEnd) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 3)).ok());
  ReadyCounter watcher;
  const uint64_t id = Watch("s", &watcher);
  std::vector<v1::StudyEvent> first = ReadAll(id);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].has_study());
  EXPECT_EQ(watcher.ready, 0);

  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel);
  EXPECT_EQ(watcher.ready, 1) << "told once that events came, not once per event";
  RunTrials(channel, session, 3);
  WatchRead last;
  std::vector<v1::StudyEvent> events = ReadAll(id, &last);
  uint64_t position = first[0].position();
  std::map<int64_t, std::vector<v1::Trial::State>> states;
  for (const v1::StudyEvent& event : events) {
    EXPECT_GT(event.position(), position);
    position = event.position();
    if (event.has_trial()) states[event.trial().number()].push_back(event.trial().state());
  }
  ASSERT_EQ(states.size(), 3u);
  // Read together, each trial's changes come coalesced: once, finished.
  for (const auto& [number, seen] : states) {
    EXPECT_EQ(seen, std::vector<v1::Trial::State>{v1::Trial::COMPLETED}) << number;
  }
  ASSERT_TRUE(events.back().has_study());
  EXPECT_EQ(events.back().study().state(), v1::Study::COMPLETED);
  EXPECT_TRUE(last.ended);
  EXPECT_FALSE(watcher.ended.has_value()) << "read to the end, not ended early";
  EXPECT_EQ(core_->ReadWatch(id, 1 << 20).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(WatchTest, EveryWatcherSharesTheSameSerialisedEvents) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  ReadyCounter a, b;
  const uint64_t first = Watch("s", &a), second = Watch("s", &b);
  ReadAll(first);
  ReadAll(second);
  RecordingChannel& channel = channels_.emplace_back();
  RunTrials(channel, Connect(channel), 2);
  absl::StatusOr<WatchRead> one = core_->ReadWatch(first, 1 << 20);
  absl::StatusOr<WatchRead> two = core_->ReadWatch(second, 1 << 20);
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_FALSE(one->events.empty());
  ASSERT_EQ(one->events.size(), two->events.size());
  for (size_t i = 0; i < one->events.size(); ++i) {
    EXPECT_EQ(one->events[i].get(), two->events[i].get()) << "built once, shared";
  }
}

TEST_F(WatchTest, AResumedWatchGetsExactlyWhatCameAfterItsPosition) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  ReadyCounter watcher;
  const uint64_t id = Watch("s", &watcher);
  ASSERT_EQ(ReadAll(id).size(), 1u);  // The study now: the watch starts here.
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel);
  RunTrials(channel, session, 3);
  std::vector<v1::StudyEvent> seen = ReadAll(id);
  ASSERT_GE(seen.size(), 4u);
  const uint64_t resume_after = seen[seen.size() / 2].position();
  std::vector<v1::StudyEvent> expected(seen.begin() + seen.size() / 2 + 1, seen.end());
  // Its only watcher gone, the journal is freed: the resumed watch is brought up to date
  // from the trials themselves.
  core_->Unwatch(id);
  ReadyCounter again;
  const uint64_t resumed = Watch("s", &again, {.after_position = resume_after});
  std::vector<v1::StudyEvent> got = ReadAll(resumed);
  // Nothing is lost: the trials changed after the position come in their latest states.
  std::map<int64_t, v1::Trial::State> want, have;
  for (const auto& e : expected) if (e.has_trial()) want[e.trial().number()] = e.trial().state();
  for (const auto& e : got) if (e.has_trial()) have[e.trial().number()] = e.trial().state();
  EXPECT_EQ(have, want);
  for (const auto& e : got) EXPECT_GT(e.position(), resume_after);
  // A resume at the latest position (the summary that ended the catching up) waits for what
  // comes next, and is told when it comes.
  ASSERT_TRUE(got.back().has_study());
  ReadyCounter latest;
  const uint64_t at_head = Watch("s", &latest, {.after_position = got.back().position()});
  WatchRead answer;
  EXPECT_TRUE(ReadAll(at_head, &answer).empty());
  EXPECT_TRUE(answer.up_to_date);  // Answered at once, with nothing: the client knows it is up.
  EXPECT_TRUE(ReadAll(at_head, &answer).empty());
  EXPECT_FALSE(answer.up_to_date);  // Said once; then it waits for what comes next.
  RunTrials(channel, session, 1);
  EXPECT_EQ(latest.ready, 1);
  EXPECT_FALSE(ReadAll(at_head).empty());
}

TEST_F(WatchTest, AWatcherTheJournalNoLongerCoversGetsEachChangedTrialOnceThenTheStudy) {
  Start({.max_events = 8, .max_bytes = 1 << 20});
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 40)).ok());
  ReadyCounter slow, fast;
  const uint64_t slow_id = Watch("s", &slow), fast_id = Watch("s", &fast);
  const uint64_t start = ReadAll(slow_id).back().position();
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel);
  RunTrials(channel, session, 30);  // Far more than 8 events.
  ReadAll(fast_id);
  std::vector<v1::StudyEvent> caught_up;
  // Small reads, so the resynchronisation takes several.
  while (true) {
    absl::StatusOr<WatchRead> read = core_->ReadWatch(slow_id, 200);
    ASSERT_TRUE(read.ok());
    if (read->events.empty()) break;
    for (const WatchEventPtr& event : read->events) caught_up.push_back(Parse(*event));
  }
  std::map<int64_t, v1::Trial::State> latest;
  uint64_t position = start;
  for (const v1::StudyEvent& event : caught_up) {
    EXPECT_GT(event.position(), position);
    position = event.position();
    if (event.has_trial()) latest[event.trial().number()] = event.trial().state();
  }
  // Brought up to date from the trials: the first trial comes once, already finished (its
  // earlier states left the journal long ago), and every trial ends in its latest state.
  ASSERT_TRUE(caught_up.front().has_trial());
  EXPECT_EQ(caught_up.front().trial().number(), 0);
  EXPECT_EQ(caught_up.front().trial().state(), v1::Trial::COMPLETED);
  const std::vector<v1::Trial> trials = AllTrials(*core_, "s");
  EXPECT_EQ(latest.size(), trials.size());
  for (const v1::Trial& trial : trials) EXPECT_EQ(latest[trial.number()], trial.state());
  // Caught up, it reads the journal again: the next change comes alone.
  RunTrials(channel, session, 1);
  std::vector<v1::StudyEvent> next = ReadAll(slow_id);
  ASSERT_FALSE(next.empty());
  EXPECT_LE(next.size(), 4u);
}

TEST_F(WatchTest, APositionFromAnEarlierRunGetsEveryTrialAgain) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 10)).ok());
  ReadyCounter watcher;
  const uint64_t id = Watch("s", &watcher);
  RecordingChannel& channel = channels_.emplace_back();
  RunTrials(channel, Connect(channel), 4);
  const uint64_t old_position = ReadAll(id).back().position();
  core_->Unwatch(id);
  Start();  // A restart on the same database.
  ReadyCounter after_restart;
  const uint64_t resumed = Watch("s", &after_restart, {.after_position = old_position});
  std::vector<v1::StudyEvent> events = ReadAll(resumed);
  std::set<int64_t> numbers;
  for (const auto& e : events) {
    EXPECT_GT(e.position(), old_position) << "positions keep growing across restarts";
    if (e.has_trial()) numbers.insert(e.trial().number());
  }
  EXPECT_EQ(numbers.size(), AllTrials(*core_, "s").size());
  // A position no scheduler gave (from the future) gets everything too, not nothing.
  ReadyCounter made_up;
  const uint64_t future = Watch("s", &made_up, {.after_position = ~uint64_t{0} - 1});
  numbers.clear();
  for (const auto& e : ReadAll(future)) if (e.has_trial()) numbers.insert(e.trial().number());
  EXPECT_EQ(numbers.size(), AllTrials(*core_, "s").size());
}

TEST_F(WatchTest, SummariesOnlyGetNoTrialsAndAtMostOneSummaryPerInterval) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 50)).ok());
  ReadyCounter watcher;
  const uint64_t id = Watch("s", &watcher, {.summaries_only = true});
  ASSERT_EQ(ReadAll(id).size(), 1u);
  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel);
  RunTrials(channel, session, 20);  // The clock stands still: one interval.
  WatchRead last;
  std::vector<v1::StudyEvent> events = ReadAll(id, &last);
  for (const auto& e : events) EXPECT_TRUE(e.has_study());
  EXPECT_LE(events.size(), 1u);
  // The counts moved since: a fresh summary falls due once the interval has passed.
  EXPECT_GT(last.retry_after, absl::ZeroDuration());
  EXPECT_LE(last.retry_after, kWatchSummaryInterval);
  now_ += kWatchSummaryInterval;
  events = ReadAll(id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].study().trials_completed(), 20);
}

// What a waiting study says it waits for names the connected workers; `dhpt watch` shows it
// live, so it must not go stale when workers come and go.
TEST_F(WatchTest, AWaitingStudysWatchersHearWhenWorkersComeAndGo) {
  v1::StudySpec spec = FunctionStudy("pi-only", 5);
  (*spec.mutable_worker_selector())["board"] = "pi4";
  ASSERT_TRUE(core_->CreateStudy(spec).ok());
  ReadyCounter watcher;
  const uint64_t id = Watch("pi-only", &watcher, {.summaries_only = true});
  std::vector<v1::StudyEvent> events = ReadAll(id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].study().state_reason(), HasSubstr("no worker is connected"));

  RecordingChannel& channel = channels_.emplace_back();
  const uint64_t session = Connect(channel);  // No board=pi4 label.
  events = ReadAll(id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].study().state_reason(),
              HasSubstr("connected: 1 CPU worker; 0 of them labelled board=pi4"));
  core_->DisconnectWorker(session, "gone");
  events = ReadAll(id);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_THAT(events[0].study().state_reason(), HasSubstr("no worker is connected"));
}

TEST_F(WatchTest, DeletingTheStudyOrShuttingDownEndsItsWatches) {
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("s", 5)).ok());
  ASSERT_TRUE(core_->CreateStudy(FunctionStudy("t", 5)).ok());
  ReadyCounter on_s, on_t;
  EXPECT_EQ(core_->Watch("missing", {}, &on_s).status().code(), absl::StatusCode::kNotFound);
  Watch("s", &on_s);
  Watch("t", &on_t);
  ASSERT_TRUE(core_->DeleteStudy("s", /*force=*/true).ok());
  ASSERT_TRUE(on_s.ended.has_value());
  EXPECT_EQ(on_s.ended->code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(on_t.ended.has_value());
  core_->Shutdown("going away");
  ASSERT_TRUE(on_t.ended.has_value());
  EXPECT_EQ(on_t.ended->code(), absl::StatusCode::kUnavailable);
  ReadyCounter late;
  EXPECT_EQ(core_->Watch("t", {}, &late).status().code(), absl::StatusCode::kUnavailable);
}

TEST(WatchJournalTest, KeepsTheLatestEventsWithinItsLimitsAndReadsFromAPosition) {
  WatchJournal journal({.max_events = 4, .max_bytes = 1 << 20});
  journal.Reset(10);
  auto event = [](uint64_t position, bool summary) {
    v1::StudyEvent e;
    e.set_position(position);
    if (summary) e.mutable_study()->mutable_spec()->set_name("s");
    else e.mutable_trial()->set_number(static_cast<int64_t>(position));
    return FrameWatchEvent(e);
  };
  for (uint64_t p = 11; p <= 16; ++p) journal.Append(event(p, p % 3 == 0));
  EXPECT_EQ(journal.events(), 4u);
  EXPECT_FALSE(journal.Covers(11));
  EXPECT_TRUE(journal.Covers(12));
  std::vector<WatchEventPtr> out;
  EXPECT_EQ(journal.Read(13, false, 1 << 20, out), 16u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]->position, 14u);
  out.clear();
  EXPECT_EQ(journal.Read(12, true, 1 << 20, out), 16u) << "read through the trials it skips";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->position, 15u);
  out.clear();
  // A byte budget smaller than one event still moves on by one.
  EXPECT_EQ(journal.Read(12, false, 1, out), 13u);
  EXPECT_EQ(out.size(), 1u);
  out.clear();
  EXPECT_EQ(journal.Read(16, false, 1 << 20, out), 16u);
  EXPECT_TRUE(out.empty());
}

TEST(WatchJournalTest, EventsReadTogetherComeOncePerTrialInTheirLatestState) {
  WatchJournal journal;
  journal.Reset(0);
  auto trial = [](uint64_t position, int64_t number, v1::Trial::State state) {
    v1::StudyEvent e;
    e.set_position(position);
    e.mutable_trial()->set_number(number);
    e.mutable_trial()->set_state(state);
    return FrameWatchEvent(e);
  };
  auto summary = [](uint64_t position) {
    v1::StudyEvent e;
    e.set_position(position);
    e.mutable_study()->mutable_spec()->set_name("s");
    return FrameWatchEvent(e);
  };
  journal.Append(trial(1, 0, v1::Trial::PENDING));
  journal.Append(trial(2, 1, v1::Trial::PENDING));
  journal.Append(summary(3));
  journal.Append(trial(4, 0, v1::Trial::RUNNING));
  journal.Append(trial(5, 0, v1::Trial::COMPLETED));
  journal.Append(summary(6));
  std::vector<WatchEventPtr> out;
  EXPECT_EQ(journal.Read(0, false, 1 << 20, out), 6u);
  std::vector<uint64_t> positions;
  for (const WatchEventPtr& event : out) positions.push_back(event->position);
  EXPECT_EQ(positions, (std::vector<uint64_t>{2, 5, 6}));
  // Not across reads: what was read before stays read.
  out.clear();
  journal.Read(3, false, 1 << 20, out);
  positions.clear();
  for (const WatchEventPtr& event : out) positions.push_back(event->position);
  EXPECT_EQ(positions, (std::vector<uint64_t>{5, 6}));
}

}  // namespace
}  // namespace dhpt::scheduler
