// The scheduler's state against crashes, with real processes: SIGKILL at any moment loses no
// accepted study or result, counts nothing twice or for the wrong trial, and reuses no trial
// id; bad database files are clear errors at start; SIGTERM is prompt.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/cli/study_file.h"
#include "services/common/benchmark_functions.h"
#include "services/common/param_values.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

// The function's value at the trial's parameters, computed here.
double Recompute(const std::string& function, const v1::Trial& trial) {
  std::vector<double> x;
  for (int i = 1; trial.params().contains(absl::StrCat("x", i)); ++i) {
    x.push_back(*AsNumber(trial.params().at(absl::StrCat("x", i))));
  }
  return FindBenchmarkFunction(function)->evaluate(x);
}

// Worker processes that can be killed and started again under the same ids.
class WorkerProcesses {
 public:
  WorkerProcesses(std::string address, int count) : address_(std::move(address)) {
    for (int i = 0; i < count; ++i) workers_.push_back(Start(i));
  }
  void Restart(int index) {
    std::unique_ptr<cli::ChildProcess>& worker = workers_[static_cast<size_t>(index)];
    worker.reset();  // SIGKILLed and reaped, then started again under its id.
    worker = Start(index);
  }
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  std::unique_ptr<cli::ChildProcess> Start(int index) {
    return StartWorkerProcess(address_, absl::StrCat("chaos-", index));
  }
  std::string address_;
  std::vector<std::unique_ptr<cli::ChildProcess>> workers_;  // Killed and reaped with the test.
};

// The defect the issue reported: a scheduler without state was killed during a trial and
// restarted; trial ids began at 1 again, and the worker's late result for the old trial 1
// became the new study's trial 1 (and its best). Epochs now tell the two apart.
TEST(DurabilityTest, AResultForAnotherSchedulersTrialNeverLandsOnANewStudy) {
  auto first = std::make_unique<SchedulerProcess>(std::vector<std::string>{"--db=:memory:"});
  const std::string address = first->address();
  cli::StudyClient client(address);
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: old
model: {kind: FUNCTION, function: ackley, fixed: {seconds: 2}}
max_trials: 1
parameters: [{name: x1, double_range: {min: 1, max: 2}}, {name: x2, double_range: {min: 1, max: 2}}]
)")).ok());
  const std::unique_ptr<cli::ChildProcess> worker = StartWorkerProcess(address, "survivor");
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> study = client.GetStudy("old");
    return study.ok() && study->trials_running() == 1;
  }));
  first->Kill();
  // Same address, no state: the worker still runs the old trial 1.
  SchedulerProcess second({absl::StrCat("--listen=", address), "--db=:memory:"});
  ASSERT_EQ(second.address(), address);
  cli::StudyClient again(address);
  // The first call may meet the connection the old scheduler left (UNAVAILABLE); creating is
  // idempotent, so a client retries.
  absl::StatusOr<v1::Study> created;
  ASSERT_TRUE(WaitFor([&] {
    created = again.CreateStudy(Spec(R"(
name: fresh
model: {kind: FUNCTION, function: branin}
max_trials: 3
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)"));
    return created.ok();
  }, absl::Seconds(10))) << created.status();
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> study = again.GetStudy("fresh");
    return study.ok() && study->state() == v1::Study::COMPLETED;
  }));
  absl::StatusOr<std::vector<v1::Trial>> trials = again.ListTrials("fresh");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 3u);
  EXPECT_EQ(trials->at(0).id(), 1u);  // The id the old trial had.
  for (const v1::Trial& trial : *trials) {
    EXPECT_EQ(trial.objective_value(), Recompute("branin", trial)) << trial.ShortDebugString();
  }
}

// Issue 13's chaos test: the scheduler is SIGKILLed three times during a 200-trial TPE study
// on three workers, which are themselves killed and restarted at random moments. The study
// must end with exactly 200 completed trials, unique ids and numbers, and every stored value
// equal to the function at that trial's parameters.
TEST(DurabilityTest, ChaosKillsLoseNothingAndCountNothingTwice) {
  constexpr int kTrials = 200;
  TempDirectory directory;
  const std::string db = absl::StrCat("--db=", directory.path(), "/scheduler.db");
  auto scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
  const std::string address = scheduler->address();
  const std::vector<std::string> flags = {db, absl::StrCat("--listen=", address)};
  cli::StudyClient client(address, {}, absl::Seconds(2));
  // Each trial takes 30 ms, so the study runs for seconds and the kills land in it.
  ASSERT_TRUE(client.CreateStudy(Spec(absl::StrCat(R"(
name: chaos
model: {kind: FUNCTION, function: branin, fixed: {seconds: 0.03}}
algorithm: {name: TPE, seed: 7}
max_trials: )", kTrials, R"(
max_attempts: 50
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)"))).ok());
  WorkerProcesses workers(address, 3);

  std::mt19937 random(42);
  int scheduler_kills = 0;
  int worker_kills = 0;
  for (int milestone : {40, 90, 140}) {
    int completed = 0;
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Study> study = client.GetStudy("chaos");
      if (study.ok()) completed = study->trials_completed();
      if (completed < milestone && random() % 8 == 0) {
        workers.Restart(static_cast<int>(random() % workers.size()));
        ++worker_kills;
      }
      if (completed < milestone) absl::SleepFor(absl::Milliseconds(20));
      return completed >= milestone;
    }, absl::Seconds(120)));
    ASSERT_LT(completed, kTrials) << "the study ended before the scheduler could be killed";
    scheduler->Kill();
    ++scheduler_kills;
    if (random() % 2 == 0) {  // A worker dies while the scheduler is down, too.
      workers.Restart(static_cast<int>(random() % workers.size()));
      ++worker_kills;
    }
    scheduler = std::make_unique<SchedulerProcess>(flags);
    ASSERT_EQ(scheduler->address(), address) << "the restarted scheduler did not start";
  }
  v1::Study study;
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<v1::Study> s = client.GetStudy("chaos");
    if (s.ok()) study = *s;
    return s.ok() && study.state() != v1::Study::PENDING && study.state() != v1::Study::RUNNING;
  }, absl::Seconds(180)));
  EXPECT_EQ(scheduler_kills, 3);
  EXPECT_GT(worker_kills, 0);
  EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  EXPECT_EQ(study.trials_completed(), kTrials);
  EXPECT_EQ(study.trials_failed(), 0);

  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("chaos");
  ASSERT_TRUE(trials.ok());
  std::set<uint64_t> ids;
  int completed = 0;
  for (size_t i = 0; i < trials->size(); ++i) {
    const v1::Trial& trial = (*trials)[i];
    EXPECT_TRUE(ids.insert(trial.id()).second) << "trial id " << trial.id() << " twice";
    EXPECT_EQ(trial.number(), static_cast<int64_t>(i));
    if (trial.state() != v1::Trial::COMPLETED) continue;
    ++completed;
    EXPECT_EQ(trial.objective_value(), Recompute("branin", trial)) << trial.ShortDebugString();
    EXPECT_EQ(trial.metrics().at("value"), trial.objective_value());
  }
  EXPECT_EQ(completed, kTrials);
}

// What a scheduler says when its database cannot be used: a clear error and exit code 1, the
// file left as it was.
std::pair<int, std::string> StartOn(const std::string& db) {
  return RunCommandLine(absl::StrCat("timeout 30 " DHPT_BIN_DIR "/dhpt-scheduler --listen=127.0.0.1:0 --db=", db));
}

TEST(DurabilityTest, AWatchRidesOutASchedulerRestartAndMissesNoTrial) {
  constexpr int kTrials = 120;
  TempDirectory directory;
  const std::string db = absl::StrCat("--db=", directory.path(), "/scheduler.db");
  auto scheduler = std::make_unique<SchedulerProcess>(std::vector<std::string>{db});
  const std::string address = scheduler->address();
  cli::StudyClient client(address, {}, absl::Seconds(2));
  ASSERT_TRUE(client.CreateStudy(Spec(absl::StrCat(R"(
name: watched
model: {kind: FUNCTION, function: branin, fixed: {seconds: 0.02}}
max_trials: )", kTrials, R"(
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)"))).ok());
  // Every event, from before the first trial; the stream drops with the scheduler and resumes
  // after the last position it handled.
  cli::StudyClient watcher(address);
  std::map<int64_t, v1::Trial::State> latest;
  std::atomic<int64_t> events{0};
  uint64_t position = 0;
  bool ordered = true;
  absl::Status watched;
  std::thread watch([&] {
    watched = watcher.Watch("watched", [&](const v1::StudyEvent& event) {
      ordered = ordered && event.position() > position;
      position = event.position();
      if (event.has_trial()) latest[event.trial().number()] = event.trial().state();
      ++events;
    });
  });
  ASSERT_TRUE(WaitFor([&] { return events.load() > 0; }));  // The study as it starts.
  WorkerProcesses workers(address, 2);
  // Killed, then stopped as an operator would (SIGTERM): a stopping scheduler's server may
  // cancel the open watch rather than end it, which the watcher must ride out as well.
  for (const auto& [stop, completed] :
       {std::pair{"kill", 30}, std::pair{"terminate", 60}}) {
    ASSERT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Study> study = client.GetStudy("watched");  // Fails while restarting.
      return study.ok() && study->trials_completed() >= completed;
    })) << "before " << stop;
    if (std::string(stop) == "kill") {
      scheduler->Kill();
    } else {
      scheduler->Terminate();
    }
    absl::SleepFor(absl::Seconds(3));  // Longer than the watcher's first pauses.
    scheduler = std::make_unique<SchedulerProcess>(
        std::vector<std::string>{db, absl::StrCat("--listen=", address)});
  }
  watch.join();
  EXPECT_TRUE(watched.ok()) << watched;
  EXPECT_TRUE(ordered) << "positions only grow, across the restart too";
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("watched");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(latest.size(), trials->size());
  for (const v1::Trial& trial : *trials) {
    EXPECT_EQ(latest[trial.number()], trial.state()) << "trial " << trial.number();
  }
  EXPECT_EQ(client.GetStudy("watched")->trials_completed(), kTrials);
}

TEST(DurabilityTest, BadDatabaseFilesAreClearErrorsAtStart) {
  TempDirectory directory;
  const std::string corrupt = directory.path() + "/corrupt.db";
  std::ofstream(corrupt) << std::string(10000, '#');
  auto [code, output] = StartOn(corrupt);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("not a DHPT database or is damaged"));

  const std::string missing = directory.path() + "/no/such/dir/scheduler.db";
  std::tie(code, output) = StartOn(missing);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("directory must exist and be writable"));

  // Held by a running scheduler: a second one is refused, under any name for the file, and
  // so is a second one on its port.
  const std::string shared = directory.path() + "/shared.db";
  auto owner = std::make_unique<SchedulerProcess>(std::vector<std::string>{"--db=" + shared});
  ASSERT_FALSE(owner->address().empty());
  std::tie(code, output) = StartOn(shared);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("in use by another scheduler"));
  std::filesystem::create_symlink(shared, directory.path() + "/alias.db");
  std::tie(code, output) = StartOn(directory.path() + "/alias.db");
  EXPECT_THAT(output, HasSubstr("in use by another scheduler"));
  std::tie(code, output) = RunCommandLine(absl::StrCat(
      "timeout 30 " DHPT_BIN_DIR "/dhpt-scheduler --db=:memory: --listen=", owner->address()));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("address is in use"));

  // Rows that do not fit together (a trial missing from the middle of a study): DATA_LOSS.
  cli::StudyClient client(owner->address());
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: holed
model: {kind: FUNCTION, function: branin}
max_trials: 5
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)")).ok());
  {
    InProcessWorker worker(owner->address(), "w", 1);
    ASSERT_TRUE(WaitFor([&] { return client.GetStudy("holed")->state() == v1::Study::COMPLETED; }));
  }
  // And a study in progress (added trials, which no worker runs), loaded whole at start.
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: open
model: {kind: EXTERNAL}
objective: {metric: loss, goal: MINIMIZE}
max_trials: 5
parameters: [{name: x, double_range: {min: 0, max: 1}}]
)")).ok());
  v1::AddTrialsRequest add;
  add.set_study("open");
  for (int t = 0; t < 4; ++t) {
    v1::AddedTrial& trial = *add.add_trials();
    (*trial.mutable_params())["x"].set_number_value(t / 4.0);
    (*trial.mutable_metrics())["loss"] = t;
  }
  ASSERT_TRUE(client.AddTrials(add).ok());
  // Stopped, not killed: a study seen COMPLETED may still have writes queued (they commit in
  // groups), and a kill could lose trials 2-4 whole, which leaves no hole to find.
  EXPECT_EQ(owner->Terminate().second, 0);
  owner.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(shared.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM trials WHERE number = 2", nullptr, nullptr, nullptr),
            SQLITE_OK);
  std::tie(code, output) = StartOn(shared);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("DATA_LOSS"));
  EXPECT_THAT(output, HasSubstr("open has number 3, expected 2"));
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM trials WHERE study = 'open'; "
                             "DELETE FROM studies WHERE name = 'open'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  // The study has ended: a start loads its summary only, and reading its trials finds the hole.
  SchedulerProcess reopened({"--db=" + shared});
  ASSERT_FALSE(reopened.address().empty());
  cli::StudyClient reader(reopened.address());
  EXPECT_TRUE(reader.GetStudy("holed").ok());
  absl::StatusOr<std::vector<v1::Trial>> trials = reader.ListTrials("holed");
  EXPECT_TRUE(absl::IsDataLoss(trials.status())) << trials.status();
  EXPECT_THAT(trials.status().message(), HasSubstr("expected 2"));
}

TEST(DurabilityTest, AReadOnlyDatabaseIsAClearErrorAtStart) {
  TempDirectory directory;
  const std::string db = directory.path() + "/scheduler.db";
  {
    SchedulerProcess creator({"--db=" + db});
    ASSERT_FALSE(creator.address().empty());
  }
  if (geteuid() != 0) {
    std::filesystem::permissions(directory.path(), std::filesystem::perms::owner_read |
                                                       std::filesystem::perms::owner_exec);
    auto [code, output] = StartOn(db);
    std::filesystem::permissions(directory.path(), std::filesystem::perms::owner_all);
    EXPECT_EQ(code, 1);
    EXPECT_THAT(output, HasSubstr("writable"));
    return;
  }
  // Root ignores file modes, so the file is made read-only the way a read-only volume is: a
  // read-only bind mount, in a mount namespace of its own. Where there are none (a container
  // without CAP_SYS_ADMIN) the scheduler runs as nobody instead, to whom the root-owned
  // directory and file are read-only: the check runs on every machine the Guarantees table
  // (docs/testing.md) is read for, never skipped.
  const std::string scheduler = absl::StrCat("timeout 30 " DHPT_BIN_DIR
                                             "/dhpt-scheduler --listen=127.0.0.1:0 --db=", db);
  std::string command;
  if (RunCommandLine("unshare --mount true").first == 0) {
    command = absl::StrCat("unshare --mount sh -c 'mount --bind ", directory.path(), " ",
                           directory.path(), " && mount -o remount,bind,ro ", directory.path(),
                           " && exec ", scheduler, "'");
  } else {
    using std::filesystem::perms;
    std::filesystem::permissions(directory.path(), perms::owner_all | perms::group_read |
                                                       perms::group_exec | perms::others_read |
                                                       perms::others_exec);
    std::filesystem::permissions(db, perms::owner_read | perms::owner_write |
                                         perms::group_read | perms::others_read);
    command = "setpriv --reuid=nobody --regid=nogroup --clear-groups " + scheduler;
  }
  auto [code, output] = RunCommandLine(command);
  EXPECT_EQ(code, 1) << command << "\n" << output;
  EXPECT_THAT(output, HasSubstr("writ"));
}

TEST(DurabilityTest, SigtermExitsPromptlyWithIdleClientsConnected) {
  SchedulerProcess scheduler;
  ASSERT_FALSE(scheduler.address().empty());
  // An idle user's channel, a watcher of a running study and an idle worker.
  cli::StudyClient idle(scheduler.address());
  ASSERT_TRUE(idle.ListStudies().ok());
  ASSERT_TRUE(idle.CreateStudy(Spec(R"(
name: waiting
model: {kind: FUNCTION, function: branin}
max_trials: 1
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)")).ok());
  cli::StudyClient watcher(scheduler.address());
  std::thread watch([&] { watcher.Watch("waiting", [](const v1::StudyEvent&) {}).IgnoreError(); });
  InProcessWorker worker(scheduler.address(), "idle", 1);
  ASSERT_TRUE(WaitFor([&] { return worker.client().connected(); }));
  // A worker stream that never says hello.
  auto channel = grpc::CreateChannel(scheduler.address(), grpc::InsecureChannelCredentials());
  auto stub = v1::WorkerService::NewStub(channel);
  grpc::ClientContext silent_context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::SchedulerMessage>> silent =
      stub->Connect(&silent_context);
  absl::SleepFor(absl::Milliseconds(200));
  auto [took, status] = scheduler.Terminate();
  EXPECT_LT(took, absl::Seconds(2)) << "the 5 s grace was waited out";
  std::printf("exited %s after SIGTERM\n", absl::FormatDuration(took).c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  watcher.Cancel();
  watch.join();
}

// A watch resumed where nothing changed since its position is answered at once, with an
// empty batch: before, it heard nothing until the study changed, so `dhpt watch` could not say
// it was back after a dropped stream on an idle study (and its retry window ran on). What
// changes next still comes on the same stream.
TEST(DurabilityTest, AResumedWatchWithNothingNewIsAnsweredAtOnce) {
  SchedulerProcess scheduler;
  ASSERT_FALSE(scheduler.address().empty());
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: idle
model: {kind: FUNCTION, function: branin}
max_trials: 1
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)")).ok());
  auto stub = v1::StudyService::NewStub(
      grpc::CreateChannel(scheduler.address(), grpc::InsecureChannelCredentials()));
  const auto open = [&stub](grpc::ClientContext& context, uint64_t after) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::WatchStudyRequest request;
    request.set_name("idle");
    request.set_after_position(after);
    return stub->WatchStudy(&context, request);
  };
  uint64_t position = 0;
  {
    grpc::ClientContext context;
    auto first = open(context, 0);
    v1::WatchStudyResponse now;
    ASSERT_TRUE(first->Read(&now));
    ASSERT_EQ(now.events_size(), 1);
    position = now.events(0).position();
    context.TryCancel();
    first->Finish().IgnoreError();
  }
  grpc::ClientContext context;
  auto resumed = open(context, position);
  const absl::Time asked = absl::Now();
  v1::WatchStudyResponse answer;
  ASSERT_TRUE(resumed->Read(&answer)) << "no answer within the 20 s deadline";
  EXPECT_EQ(answer.events_size(), 0);
  EXPECT_LT(absl::Now() - asked, absl::Seconds(10));
  ASSERT_TRUE(client.StopStudy("idle").ok());
  v1::WatchStudyResponse stopped;
  ASSERT_TRUE(resumed->Read(&stopped));
  ASSERT_GE(stopped.events_size(), 1);
  EXPECT_EQ(stopped.events(stopped.events_size() - 1).study().state(), v1::Study::STOPPED);
  EXPECT_GT(stopped.events(0).position(), position);
}

TEST(DurabilityTest, AStreamThatNeverSaysHelloIsEndedAfterALease) {
  // Heartbeats every 200 ms and a short lease, 600 ms: what this test waits out.
  SchedulerProcess scheduler({absl::StrCat("--missed_heartbeats=", kShortLeaseHeartbeats)});
  auto stub = v1::WorkerService::NewStub(
      grpc::CreateChannel(scheduler.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->Connect(&context);
  v1::SchedulerMessage message;
  EXPECT_FALSE(stream->Read(&message));
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("no hello"));
}

TEST(DurabilityTest, TheCliFollowsPagesDeletesAndExports) {
  TempDirectory directory;
  SchedulerProcess scheduler({absl::StrCat("--db=", directory.path(), "/scheduler.db")});
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(Spec(R"(
name: long
model: {kind: FUNCTION, function: branin}
max_trials: 2500
parameters: [{name: x1, double_range: {min: -5, max: 10}}, {name: x2, double_range: {min: 0, max: 15}}]
)")).ok());
  InProcessWorker worker(scheduler.address(), "w", 4);
  ASSERT_TRUE(WaitFor([&] { return client.GetStudy("long")->state() == v1::Study::COMPLETED; }));
  const std::string flags = absl::StrCat("--scheduler=", scheduler.address());
  auto [code, output] = RunBinary("dhpt", absl::StrCat("trials long --json ", flags));
  ASSERT_EQ(code, 0) << output.substr(0, 500);
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n') > 2500, true);
  // --json is plain JSON (numbers, plain parameter values), read here as a script would.
  google::protobuf::Struct listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(output, &listed).ok());
  const auto& listed_trials = listed.fields().at("trials").list_value();
  ASSERT_EQ(listed_trials.values_size(), 2500);  // More than one page (1,000).
  // Trial 0 has its number, 64-bit integers are numbers and parameters plain values.
  const auto& first = listed_trials.values(0).struct_value().fields();
  ASSERT_TRUE(first.contains("number")) << output.substr(0, 500);
  EXPECT_EQ(first.at("number").number_value(), 0);
  EXPECT_EQ(first.at("id").kind_case(), google::protobuf::Value::kNumberValue);
  EXPECT_EQ(first.at("params").struct_value().fields().at("x1").kind_case(),
            google::protobuf::Value::kNumberValue);
  // dhpt trial --json prints the trial as the listing does (it printed the export's form:
  // ids as strings, typed parameter values, zeros left out: hostile review).
  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("trial long 0 --json ", flags));
  ASSERT_EQ(code, 0) << output.substr(0, 500);
  google::protobuf::Struct one;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(output, &one).ok()) << output;
  EXPECT_EQ(one.fields().at("number").number_value(), 0);
  EXPECT_EQ(one.fields().at("lost_attempts").number_value(), 0);
  EXPECT_EQ(one.fields().at("id").number_value(), first.at("id").number_value());
  EXPECT_EQ(one.fields().at("params").struct_value().fields().at("x1").kind_case(),
            google::protobuf::Value::kNumberValue);

  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("export long ", flags));
  ASSERT_EQ(code, 0);
  v1::StudyExport exported;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(output, &exported).ok());
  EXPECT_EQ(exported.study().spec().name(), "long");
  EXPECT_EQ(exported.trials_size(), 2500);

  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("delete long ", flags));
  ASSERT_EQ(code, 0) << output;
  std::tie(code, output) = RunBinary("dhpt", absl::StrCat("trials long ", flags));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(output, HasSubstr("NOT_FOUND"));
}

}  // namespace
}  // namespace dhpt::testing
