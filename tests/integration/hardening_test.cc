// Hostile and careless clients against the real scheduler: cancelled and frozen watchers,
// forged results, impostors, floods, flapping workers, stuck trials and graceful stops; and
// the dashboard's share of connections for one address.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "google/protobuf/util/time_util.h"
#include "services/cli/study_file.h"
#include "services/common/worker_limits.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// Speaks WorkerService directly, as a broken or hostile worker would.
class RawWorker {
 public:
  RawWorker(const std::string& address, const std::string& id,
            std::vector<v1::Model::Kind> models = {v1::Model::FUNCTION},
            const std::function<void(v1::Hello&)>& edit_hello = nullptr)
      : stub_(v1::WorkerService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    stream_ = stub_->Connect(&context_);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(id);
    hello.mutable_hello()->mutable_capabilities()->set_slots(1);
    for (v1::Model::Kind model : models) hello.mutable_hello()->mutable_capabilities()->add_models(model);
    if (edit_hello) edit_hello(*hello.mutable_hello());
    stream_->Write(hello);
  }
  ~RawWorker() {
    if (finished_) return;
    context_.TryCancel();
    stream_->Finish();
  }

  // The next message of `kind`, skipping others; nullopt when the stream ends first.
  std::optional<v1::SchedulerMessage> Next(v1::SchedulerMessage::KindCase kind) {
    v1::SchedulerMessage message;
    while (stream_->Read(&message)) {
      if (message.kind_case() == kind) return message;
    }
    return std::nullopt;
  }
  bool Write(const v1::WorkerMessage& message) { return stream_->Write(message); }
  grpc::Status Finish() {
    v1::SchedulerMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    finished_ = true;
    return stream_->Finish();
  }
  grpc::ClientContext& context() { return context_; }

 private:
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::SchedulerMessage>> stream_;
  bool finished_ = false;
};

v1::StudySpec FunctionStudy(const std::string& name, int trials) {
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(
      "model: {kind: FUNCTION, function: branin}\nparameters:\n"
      "  - {name: x1, double_range: {min: -5, max: 10}}\n"
      "  - {name: x2, double_range: {min: 0, max: 15}}");
  spec->set_name(name);
  spec->set_max_trials(trials);
  return *spec;
}

v1::WorkerMessage Result(uint64_t trial, int attempt, uint64_t epoch, double value) {
  v1::WorkerMessage message;
  v1::TrialResult& result = *message.mutable_result();
  result.set_trial_id(trial);
  result.set_attempt(attempt);
  result.set_epoch(epoch);
  result.set_state(v1::Trial::COMPLETED);
  (*result.mutable_metrics())["value"] = value;
  return message;
}

// The trials done in the last progress line `dhpt watch` printed ("busy RUNNING  N/M done"),
// -1 if none.
int64_t LastDone(const std::string& output) {
  const size_t line = output.rfind("busy RUNNING  ");
  int64_t done = -1;
  if (line == std::string::npos) return done;
  const size_t start = line + std::strlen("busy RUNNING  ");
  const size_t slash = output.find('/', start);
  if (slash == std::string::npos || !absl::SimpleAtoi(output.substr(start, slash - start), &done)) {
    return -1;
  }
  return done;
}

TEST(HardeningTest, CancelledAndFrozenWatchersNeverCrashTheScheduler) {
  // A small journal, so that a watcher that stops reading falls off it.
  SchedulerProcess scheduler({"--watch_journal_events=256"});
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(FunctionStudy("busy", 1'000'000)).ok());
  InProcessWorker first(scheduler.address(), "w1", 2), second(scheduler.address(), "w2", 2);
  auto stub = v1::StudyService::NewStub(
      grpc::CreateChannel(scheduler.address(), grpc::InsecureChannelCredentials()));
  v1::WatchStudyRequest request;
  request.set_name("busy");

  // Ctrl-C on `dhpt watch`, 200 times, each while events are being written.
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext context;
    auto reader = stub->WatchStudy(&context, request);
    v1::WatchStudyResponse batch;
    for (int read = 0; read < 1 + i % 5 && reader->Read(&batch); ++read) {
    }
    context.TryCancel();
    reader->Finish();
    ASSERT_TRUE(scheduler.alive()) << "after " << i + 1 << " cancels";
  }

  // A watcher that stops reading costs the scheduler only its place in the journal; it is
  // read on below, once the study has moved far past what the journal holds.
  grpc::ClientContext frozen_context;
  auto frozen = stub->WatchStudy(&frozen_context, request);
  v1::WatchStudyResponse batch;
  ASSERT_TRUE(frozen->Read(&batch));
  ASSERT_GT(batch.events_size(), 0);
  uint64_t position = batch.events(batch.events_size() - 1).position();
  const absl::Time frozen_since = absl::Now();
  const int64_t completed_then = client.GetStudy("busy")->trials_completed();
  ASSERT_TRUE(WaitFor([&] {
    return client.GetStudy("busy")->trials_completed() > completed_then + 20'000;
  }, absl::Seconds(120)));

  // `dhpt watch` frozen by SIGSTOP once it has connected and printed the study's progress,
  // thawed once the study has moved 10,000 trials on: it catches up, then is killed.
  OutputReader printed;
  const std::unique_ptr<cli::ChildProcess> watch = StartProcess(
      {DHPT_BIN_DIR "/dhpt", "watch", "busy", "--scheduler=" + scheduler.address()},
      printed.write_fd());
  printed.Started();
  ASSERT_TRUE(printed.WaitForText("busy RUNNING")) << "dhpt watch never connected:\n"
                                                   << printed.text();
  watch->Signal(SIGSTOP);
  const int64_t frozen_at = client.GetStudy("busy")->trials_completed();
  ASSERT_TRUE(WaitFor([&] {
    return client.GetStudy("busy")->trials_completed() > frozen_at + 10'000;
  }, absl::Seconds(120)));
  const size_t printed_before_thaw = printed.text().size();
  watch->Signal(SIGCONT);
  EXPECT_TRUE(WaitFor([&] { return LastDone(printed.text()) > frozen_at + 10'000; }))
      << "the thawed watch did not catch up:\n" << printed.text().substr(printed_before_thaw);
  watch->Signal(SIGKILL);

  EXPECT_TRUE(scheduler.alive());
  ASSERT_TRUE(client.StopStudy("busy").ok());
  EXPECT_EQ(client.GetStudy("busy")->state(), v1::Study::STOPPED);

  // The frozen watcher reads on: positions only grow, and when the stream ends every trial
  // that changed after it stopped reading has come, in its final state.
  std::map<int64_t, v1::Trial::State> latest;
  while (frozen->Read(&batch)) {
    for (const v1::StudyEvent& event : batch.events()) {
      ASSERT_GT(event.position(), position);
      position = event.position();
      if (event.has_trial()) latest[event.trial().number()] = event.trial().state();
    }
  }
  grpc::Status ended = frozen->Finish();
  EXPECT_TRUE(ended.ok()) << ended.error_message();
  EXPECT_GT(latest.size(), 20'000u);
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("busy");
  ASSERT_TRUE(trials.ok()) << trials.status();
  int checked = 0;
  for (const v1::Trial& trial : *trials) {
    auto seen = latest.find(trial.number());
    const absl::Time ended_at = absl::FromUnixNanos(
        google::protobuf::util::TimeUtil::TimestampToNanoseconds(trial.end_time()));
    if (seen == latest.end() && ended_at <= frozen_since) continue;  // Over before it froze.
    ASSERT_NE(seen, latest.end()) << "trial " << trial.number() << " never came";
    EXPECT_EQ(seen->second, trial.state()) << "trial " << trial.number();
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(latest.size()));
}

// WatchStudy reads its request's bytes itself (it is served raw, for the shared journal), so
// bytes that are no WatchStudyRequest must be refused there, with a reason.
TEST(HardeningTest, AGarbledWatchRequestIsRefusedNotFatal) {
  SchedulerProcess scheduler;
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(FunctionStudy("watched", 10)).ok());
  grpc::GenericStub stub(
      grpc::CreateChannel(scheduler.address(), grpc::InsecureChannelCredentials()));
  const std::vector<std::string> garbled = {
      std::string("\xff\xff\xff\xff", 4),       // an unfinished varint tag
      std::string("\x0a\x64watched", 9),         // name: says 100 bytes, has 7
      std::string("\x0a\x07watched\x10", 10),   // after_position: its value missing
      std::string("\x0f", 1),                     // field 1 as a group end (wire type 7 is none)
  };
  for (const std::string& bytes : garbled) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status status;
    absl::Notification done;
    // A server-streaming method called as unary: its refusal comes before any message.
    stub.UnaryCall(&context, "/dhpt.v1.StudyService/WatchStudy", {}, &request, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("not a WatchStudyRequest"));
    ASSERT_TRUE(scheduler.alive());
  }
  EXPECT_EQ(client.GetStudy("watched")->spec().name(), "watched");
}

TEST(HardeningTest, AStudyNameOfAnyLengthIsRefusedWithItsOwnStatusAndAShortQuote) {
  SchedulerProcess scheduler;
  cli::StudyClient client(scheduler.address());
  // Quoted whole, a 20,000-byte name came back past the 8 KiB of metadata a client takes by
  // default, and the caller saw RESOURCE_EXHAUSTED "received initial metadata size exceeds
  // limit" instead of NOT_FOUND.
  absl::StatusOr<v1::Study> long_name = client.GetStudy(std::string(20000, 'a'));
  EXPECT_TRUE(absl::IsNotFound(long_name.status())) << long_name.status();
  EXPECT_THAT(long_name.status().message(), HasSubstr("...\" (20000 bytes)"));
  EXPECT_LT(long_name.status().message().size(), 200u);
  // Cut before a character, never inside one (two bytes each here, after one of one byte).
  std::string accented = "a";
  for (int i = 0; i < 5000; ++i) accented += "\xc3\xa9";
  absl::StatusOr<v1::Study> stopped = client.StopStudy(accented);
  EXPECT_TRUE(absl::IsNotFound(stopped.status())) << stopped.status();
  EXPECT_THAT(stopped.status().message(), HasSubstr("\xc3\xa9...\" (10001 bytes)"));
  ASSERT_TRUE(scheduler.alive());
}

// The worker checks its id against the scheduler's own limit (one constant, worker_limits.h):
// the longest id the worker starts with is one the scheduler takes, and one byte more stops
// the worker at start.
TEST(HardeningTest, AWorkerIdTheSchedulerWouldRefuseStopsTheWorkerAtStart) {
  SchedulerProcess scheduler;
  // It connected, was refused (hello.worker_id: longer than the limit) and retried for ever,
  // never taking a trial: `timeout` ended it (124).
  auto [code, output] = RunCommandLine(
      absl::StrCat("timeout 30 " DHPT_BIN_DIR "/dhpt-cpu-worker --scheduler=", scheduler.address(),
                   " --worker_id=", std::string(kMaxWorkerIdBytes + 1, 'w'), " </dev/null"));
  EXPECT_EQ(code, 2) << output;
  EXPECT_THAT(output, HasSubstr(absl::StrCat("--worker_id: ", kMaxWorkerIdBytes + 1,
                                             " bytes, more than the ", kMaxWorkerIdBytes,
                                             " a scheduler takes")));
  // Likewise a node name (the flag, or $NODE_NAME as the chart sets it) over the limit.
  const std::string long_node(kMaxWorkerTextBytes + 1, 'n');
  const std::string start_worker = absl::StrCat(
      "timeout 30 " DHPT_BIN_DIR "/dhpt-cpu-worker --scheduler=", scheduler.address());
  for (const std::string& command : {absl::StrCat(start_worker, " --node_name=", long_node),
                                     absl::StrCat("NODE_NAME=", long_node, " ", start_worker)}) {
    std::tie(code, output) = RunCommandLine(command + " </dev/null");
    EXPECT_EQ(code, 2) << output;
    EXPECT_THAT(output, HasSubstr(absl::StrCat("--node_name (or $NODE_NAME): ",
                                               kMaxWorkerTextBytes + 1, " bytes, more than the ",
                                               kMaxWorkerTextBytes, " a scheduler takes")));
  }
  const std::string longest(kMaxWorkerIdBytes, 'w');
  std::unique_ptr<cli::ChildProcess> worker = StartWorkerProcess(scheduler.address(), longest);
  cli::StudyClient client(scheduler.address());
  EXPECT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
    return workers.ok() && workers->size() == 1 && (*workers)[0].worker_id() == longest;
  })) << "a worker with the longest id the worker takes never connected";
}

TEST(HardeningTest, ForgedResultsImpostorsAndFloodsAreRefused) {
  // Long leases: these raw workers send no heartbeats.
  SchedulerProcess scheduler({"--heartbeat_interval=60s"});
  cli::StudyClient client(scheduler.address());
  ASSERT_TRUE(client.CreateStudy(FunctionStudy("target", 1)).ok());
  RawWorker honest(scheduler.address(), "honest");
  std::optional<v1::SchedulerMessage> assign = honest.Next(v1::SchedulerMessage::kAssign);
  ASSERT_TRUE(assign.has_value());
  const uint64_t trial = assign->assign().trial_id();
  const uint64_t epoch = assign->assign().epoch();
  v1::WorkerMessage started;
  started.mutable_started()->set_trial_id(trial);
  started.mutable_started()->set_attempt(1);
  started.mutable_started()->set_epoch(epoch);
  ASSERT_TRUE(honest.Write(started));

  // A worker never given the trial (it does not even run FUNCTION) claims a perfect result.
  {
    RawWorker forger(scheduler.address(), "forger", {v1::Model::RANDOM_FOREST});
    ASSERT_TRUE(forger.Next(v1::SchedulerMessage::kWelcome).has_value());
    ASSERT_TRUE(forger.Write(Result(trial, 1, epoch, -1e9)));
    std::optional<v1::SchedulerMessage> answer = forger.Next(v1::SchedulerMessage::kCancel);
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->cancel().trial_id(), trial);
  }
  // Three connections under the honest worker's id (ListWorkers publishes it).
  for (int i = 0; i < 3; ++i) {
    RawWorker impostor(scheduler.address(), "honest");
    grpc::Status refused = impostor.Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS) << refused.error_message();
  }
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials("target");
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_EQ(trials->at(0).state(), v1::Trial::RUNNING);
  EXPECT_EQ(trials->at(0).worker_id(), "honest");
  EXPECT_EQ(trials->at(0).lost_attempts(), 0);

  // A million-message flood for a trial it does not run, never reading its stream: one
  // Cancel is queued, not one per message. Then names for many trials: cut off.
  const int64_t before = scheduler.resident_bytes();
  {
    RawWorker flooder(scheduler.address(), "flooder", {v1::Model::RANDOM_FOREST});
    v1::WorkerMessage progress;
    progress.mutable_progress()->set_trial_id(987'654'321);
    for (int i = 0; i < 200'000; ++i) ASSERT_TRUE(flooder.Write(progress));
    for (uint64_t id = 1; id <= 1000; ++id) {
      progress.mutable_progress()->set_trial_id(1'000'000'000 + id);
      if (!flooder.Write(progress)) break;
    }
    grpc::Status cut = flooder.Finish();
    EXPECT_EQ(cut.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << cut.error_message();
  }
  EXPECT_LT(scheduler.resident_bytes() - before, int64_t{64} << 20);

  // The honest result still counts.
  ASSERT_TRUE(honest.Write(Result(trial, 1, epoch, 1.25)));
  ASSERT_TRUE(honest.Next(v1::SchedulerMessage::kAck).has_value());
  absl::StatusOr<v1::Study> study = client.GetStudy("target");
  EXPECT_EQ(study->state(), v1::Study::COMPLETED);
  EXPECT_EQ(study->best_trial().objective_value(), 1.25);
  EXPECT_EQ(study->best_trial().worker_id(), "honest");
  EXPECT_TRUE(scheduler.alive());
}

// A hello that lies about what the worker is: numbers no enum defines, more labels than any
// node has, labels no Kubernetes node could carry. Each is refused with the field named.
TEST(HardeningTest, AHelloWithUndefinedKindsOrTooManyLabelsIsRefused) {
  SchedulerProcess scheduler({"--heartbeat_interval=60s"});
  const std::vector<std::pair<std::function<void(v1::Hello&)>, std::string>> lies = {
      {[](v1::Hello& h) {
         h.mutable_capabilities()->set_device_kind(static_cast<v1::WorkerCapabilities::DeviceKind>(99));
       },
       "hello.capabilities.device_kind: 99 is no value of DeviceKind"},
      {[](v1::Hello& h) { h.mutable_capabilities()->add_models(static_cast<v1::Model::Kind>(77)); },
       "hello.capabilities.models[1]: 77 is no value of Kind"},
      {[](v1::Hello& h) {
         for (int i = 0; i < 5000; ++i) {
           (*h.mutable_capabilities()->mutable_labels())[absl::StrCat("l", i)] = "x";
         }
       },
       "hello.capabilities.labels: 5000 labels, more than 32"},
      {[](v1::Hello& h) { (*h.mutable_capabilities()->mutable_labels())["bad key!"] = "x"; },
       "hello.capabilities.labels"},
  };
  for (const auto& [lie, words] : lies) {
    RawWorker liar(scheduler.address(), "liar", {v1::Model::FUNCTION}, lie);
    const grpc::Status refused = liar.Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << words;
    EXPECT_THAT(refused.error_message(), HasSubstr(words));
  }
  cli::StudyClient client(scheduler.address());
  absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  EXPECT_TRUE(workers->empty());
  RawWorker honest(scheduler.address(), "honest");
  EXPECT_TRUE(honest.Next(v1::SchedulerMessage::kWelcome).has_value());
}

TEST(HardeningTest, FlappingWorkersCannotBurnOtherTrialsAttempts) {
  // A short lease: a flapper that drops before it is given a trial (once the study has ended)
  // is only let go when its lease runs out, and the next one connects after it.
  TestCluster cluster(2, 1, nullptr, kShortLeaseHeartbeats);
  v1::StudySpec spec = FunctionStudy("churn", 2000);
  spec.set_max_attempts(1);  // Strict: any charged loss would fail a trial.
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  // A flapping Wi-Fi node: connect, say hello, drop within 20 ms; 300 times.
  std::thread flapping([&] {
    for (int i = 0; i < 300; ++i) {
      RawWorker flapper(cluster.address(), absl::StrCat("flap-", i));
      flapper.context().set_deadline(std::chrono::system_clock::now() +
                                     std::chrono::milliseconds(20));
      flapper.Next(v1::SchedulerMessage::kAssign);
    }
  });
  flapping.join();
  v1::Study study = cluster.WaitForEnd("churn");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 2000);
  EXPECT_EQ(study.trials_failed(), 0);
}

// The 127.0.0.1:PORT a scheduler's output says it listens on.
std::string ListeningAddress(const std::string& text) {
  const size_t port = text.rfind(':', text.find('\n', text.find("listening on "))) + 1;
  return absl::StrCat("127.0.0.1:", text.substr(port, text.find('\n', port) - port));
}

// What a scheduler logged of worker connections, by kind ("connects", "drains",
// "disconnects"): lines of their own and counts in summary lines ("I workers: ...").
struct WorkerLines {
  std::map<std::string, int> logged;
  std::map<std::string, int64_t> counted;
  int summaries = 0;
};
WorkerLines ReadWorkerLines(const std::string& output) {
  WorkerLines seen;
  const std::map<std::string, std::string> line_of = {
      {"connects", " connected: "}, {"drains", " drains ("}, {"disconnects", " disconnected ("}};
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    for (const auto& [kind, text] : line_of) {
      if (absl::StrContains(line, text)) ++seen.logged[kind];
    }
    if (!absl::StrContains(line, " I workers: ")) continue;
    ++seen.summaries;
    const std::string summary(line);
    for (const auto& [kind, text] : line_of) {
      std::smatch match;
      if (std::regex_search(summary, match, std::regex(absl::StrCat("([0-9]+) ", kind, "[ ,]")))) {
        seen.counted[kind] += std::stoll(match[1]);
      }
    }
  }
  return seen;
}

// The lines of a flood of worker connections: one each up to kWorkerLogLines an interval,
// then counted into one line when the interval ends. Every connect and disconnect is either
// logged or counted. Before, 150 flapping workers wrote 300 lines.
TEST(HardeningTest, AFloodOfWorkerConnectionsIsLoggedAsCounts) {
  OutputReader output;
  std::unique_ptr<cli::ChildProcess> scheduler = StartProcess(
      {DHPT_BIN_DIR "/dhpt-scheduler", "--listen=127.0.0.1:0", "--db=:memory:",
       "--heartbeat_interval=200ms", "--worker_log_interval=1s"},
      output.write_fd());
  output.Started();
  ASSERT_TRUE(output.WaitForText("listening on ")) << output.text();
  const std::string address = ListeningAddress(output.text());
  constexpr int kFlaps = 150;
  for (int i = 0; i < kFlaps; ++i) {
    RawWorker flapper(address, absl::StrCat("flap-", i));
    ASSERT_TRUE(flapper.Next(v1::SchedulerMessage::kWelcome).has_value()) << i;
  }  // Each cancels its stream on leaving the loop body: a disconnect.

  // The last counts come at the sweep after their interval ends (every 100 ms).
  ASSERT_TRUE(WaitFor([&] {
    WorkerLines seen = ReadWorkerLines(output.text());
    return seen.logged["connects"] + seen.counted["connects"] == kFlaps &&
           seen.logged["disconnects"] + seen.counted["disconnects"] == kFlaps;
  }, absl::Seconds(30))) << output.text();
  WorkerLines seen = ReadWorkerLines(output.text());
  EXPECT_GE(seen.summaries, 1) << output.text();
  // kWorkerLogLines a 1 s interval: each summary ends one, and the last may not be full.
  EXPECT_LE(seen.logged["connects"] + seen.logged["disconnects"],
            scheduler::kWorkerLogLines * (seen.summaries + 1)) << output.text();
  EXPECT_THAT(output.text(), ContainsRegex("not logged \\(more than 20 lines in 1s\\); [0-9]+ "
                                           "workers connected now"));
}

// At shutdown the lines held back are told (no later sweep would), and a fleet draining at
// once is limited as its connects are: 30 workers that connect and drain, then a SIGTERM,
// within an interval that has not ended. Before, their 30 drain lines were all written, and the
// 10 connects, 30 drains and 30 disconnects counted past the limit were never told.
TEST(HardeningTest, AtShutdownTheWorkerLinesHeldBackAreToldAndDrainsAreLimitedToo) {
  OutputReader output;
  std::unique_ptr<cli::ChildProcess> process = StartProcess(
      {DHPT_BIN_DIR "/dhpt-scheduler", "--listen=127.0.0.1:0", "--db=:memory:",
       "--heartbeat_interval=60s", "--worker_log_interval=1h"},
      output.write_fd());
  output.Started();
  ASSERT_TRUE(output.WaitForText("listening on ")) << output.text();
  const std::string address = ListeningAddress(output.text());
  constexpr int kWorkers = 30;
  std::vector<std::unique_ptr<RawWorker>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(std::make_unique<RawWorker>(address, absl::StrCat("rollout-", i)));
    RawWorker& worker = *workers.back();
    ASSERT_TRUE(worker.Next(v1::SchedulerMessage::kWelcome).has_value()) << i;
    v1::WorkerMessage draining;
    draining.mutable_draining()->set_reason("SIGTERM");
    ASSERT_TRUE(worker.Write(draining)) << i;
    // A result for no trial is acknowledged after the drain before it on the stream is handled.
    ASSERT_TRUE(worker.Write(Result(1'000'000 + i, 1, 0, 0.0))) << i;
    ASSERT_TRUE(worker.Next(v1::SchedulerMessage::kAck).has_value()) << i;
  }
  process->Signal(SIGTERM);
  ASSERT_TRUE(WaitForExit(*process)) << output.text();
  WorkerLines seen = ReadWorkerLines(output.text());
  EXPECT_LE(seen.logged["connects"] + seen.logged["drains"] + seen.logged["disconnects"],
            scheduler::kWorkerLogLines) << output.text();
  for (const char* kind : {"connects", "drains", "disconnects"}) {
    EXPECT_EQ(seen.logged[kind] + seen.counted[kind], kWorkers) << kind << "\n" << output.text();
  }
  EXPECT_THAT(output.text(), ContainsRegex("not logged \\(more than 20 lines in 1h\\); 0 "
                                           "workers connected now"));
}

// Every browser behind a kubectl port-forward comes from 127.0.0.1 and so shares one address's
// part of the dashboard's --max_connections; --per_address_share sets that part (1 there).
// 30 connections from one address with their requests begun, at a share of a quarter of 40:
// 10 are served and held, the other 20 are answered 503 at once (at the half it was fixed at
// before, 10 would be).
TEST(HardeningTest, TheDashboardsPerAddressShareIsAFlag) {
  OutputReader output;
  std::unique_ptr<cli::ChildProcess> dashboard = StartProcess(
      {DHPT_BIN_DIR "/dhpt-dashboard", "--scheduler=127.0.0.1:1", "--listen=127.0.0.1:0",
       "--max_event_streams=8", "--max_connections=40", "--per_address_share=0.25"},
      output.write_fd());
  output.Started();
  ASSERT_TRUE(output.WaitForText("dashboard at http://127.0.0.1:")) << output.text();
  int port = 0;
  const std::string text = output.text();
  const size_t at = text.find("127.0.0.1:") + std::strlen("127.0.0.1:");
  ASSERT_TRUE(absl::SimpleAtoi(text.substr(at, text.find('/', at) - at), &port)) << text;

  constexpr int kConnections = 30;
  std::vector<int> held;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << i;
    const std::string begun = "GET / HTTP/1.1\r\n";  // Held: the request is never finished.
    ASSERT_EQ(send(fd, begun.data(), begun.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(begun.size()));
    held.push_back(fd);
  }
  std::vector<std::string> answers(kConnections);
  auto refused = [&] {
    int count = 0;
    for (int i = 0; i < kConnections; ++i) {
      char buffer[4096];
      ssize_t n;
      while ((n = recv(held[i], buffer, sizeof(buffer), MSG_DONTWAIT)) > 0) {
        answers[i].append(buffer, static_cast<size_t>(n));
      }
      count += absl::StartsWith(answers[i], "HTTP/1.1 503") ? 1 : 0;
    }
    return count;
  };
  // Within the request timeout (10 s), before the held ones are cut.
  EXPECT_TRUE(WaitFor([&] { return refused() == 20; }, absl::Seconds(8))) << refused();
  EXPECT_EQ(refused(), 20);
  EXPECT_THAT(answers, Contains(HasSubstr("your address already holds 10 connections")));
  for (int fd : held) close(fd);

  // Out of range: refused at start, saying what is allowed.
  const auto [status, said] = RunBinary("dhpt-dashboard", "--listen=127.0.0.1:0 --per_address_share=0");
  EXPECT_EQ(status, 2) << said;
  EXPECT_THAT(said, HasSubstr("--per_address_share must be above 0 and at most 1"));
}

// XGBoost trials that run for seconds, so a signal lands mid-trial.
v1::StudySpec LongStudy(const std::string& name, int trials, int rounds) {
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(absl::StrCat(R"(
model: {kind: XGBOOST, fixed: {num_boost_round: )", rounds, R"(, max_depth: 6}}
dataset: {friedman1: {samples: 4000, features: 10, seed: 4}}
parameters:
  - {name: eta, double_range: {min: 0.01, max: 0.3, log: true}}
)"));
  spec->set_name(name);
  spec->set_max_trials(trials);
  return *spec;
}

TEST(HardeningTest, AGracefullyStoppedWorkerHandsItsTrialBackAtNoCost) {
  TestCluster cluster(0);
  cli::ChildProcess& stopping = cluster.SpawnWorkerProcess("stopping");
  v1::StudySpec spec = LongStudy("handed-back", 1, 3000);
  spec.set_max_attempts(1);
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("handed-back");
    return trials.ok() && !trials->empty() && trials->at(0).state() == v1::Trial::RUNNING;
  }));
  cluster.SpawnWorkerProcess("idle");
  ASSERT_TRUE(WaitFor([&] { return cluster.core().connected_workers() == 2; }));
  stopping.Signal(SIGTERM);
  // The trial then runs whole on "idle": about 15 s here, over 180 s in a stress run at load 10.
  v1::Study study = cluster.WaitForEnd("handed-back", absl::Seconds(480));
  EXPECT_EQ(study.state(), v1::Study::COMPLETED) << study.state_reason();
  v1::Trial trial = cluster.client().ListTrials("handed-back")->at(0);
  EXPECT_EQ(trial.worker_id(), "idle");
  EXPECT_EQ(trial.lost_attempts(), 0);
  ASSERT_TRUE(WaitForExit(stopping)) << "the worker did not exit after SIGTERM";
  const int status = stopping.wait_status();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(HardeningTest, AStuckTrialIsStoppedAtItsTimeoutAndTheWorkerGoesOn) {
  TestCluster cluster(0);
  cli::ChildProcess& worker = cluster.SpawnWorkerProcess("runner");
  v1::StudySpec spec = LongStudy("stuck", 2, 100'000);  // Minutes per trial without a limit.
  spec.mutable_trial_timeout()->set_seconds(2);
  spec.set_max_failed_trials(5);
  ASSERT_TRUE(cluster.client().CreateStudy(spec).ok());
  const absl::Time start = absl::Now();
  v1::Study study = cluster.WaitForEnd("stuck", absl::Seconds(60));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(study.trials_failed(), 2);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("stuck");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& trial : *trials) {
    EXPECT_THAT(trial.error(), HasSubstr("trial_timeout of 2s"));
  }
  EXPECT_FALSE(worker.Poll());  // Still running.
}

TEST(HardeningTest, AStudyCannotReadAWorkersFilesOrExhaustItsMemory) {
  // The scheduler would allow a 100 GB data set; this worker allows 1 MB and no CSV file.
  SchedulerProcess scheduler({"--max_dataset_bytes=100000000000"});
  const std::unique_ptr<cli::ChildProcess> worker =
      StartProcess({DHPT_BIN_DIR "/dhpt-cpu-worker", "--scheduler=" + scheduler.address(),
                    "--worker_id=careful", "--threads_per_trial=1", "--max_dataset_bytes=1000000"});
  cli::StudyClient client(scheduler.address());
  auto submit = [&](const std::string& name, const std::string& dataset) {
    absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(absl::StrCat(
        "name: ", name, "\nmodel: {kind: XGBOOST, fixed: {num_boost_round: 5}}\ndataset: ",
        dataset, "\nparameters:\n  - {name: max_depth, int_range: {min: 2, max: 4}}\n"
        "max_trials: 1\nmax_failed_trials: 1"));
    EXPECT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(client.CreateStudy(*spec).ok());
    EXPECT_TRUE(WaitFor([&] {
      absl::StatusOr<v1::Study> study = client.GetStudy(name);
      return study.ok() && study->state() != v1::Study::PENDING &&
             study->state() != v1::Study::RUNNING;
    }));
    absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(name);
    return trials.ok() && !trials->empty() ? trials->at(0) : v1::Trial();
  };
  v1::Trial secret = submit("secret", "{csv: {path: /etc/passwd, target: root}}");
  EXPECT_EQ(secret.state(), v1::Trial::FAILED);
  EXPECT_THAT(secret.error(), HasSubstr("--data_root"));
  EXPECT_THAT(secret.error(), ::testing::Not(HasSubstr("root:x")));
  v1::Trial fifo = submit("fifo", "{csv: {path: /dev/zero, target: y}}");
  EXPECT_EQ(fifo.state(), v1::Trial::FAILED);
  v1::Trial huge = submit("huge", "{friedman1: {samples: 20000, features: 10}}");
  EXPECT_EQ(huge.state(), v1::Trial::FAILED);
  EXPECT_THAT(huge.error(), HasSubstr("--max_dataset_bytes"));
  // The worker lived through all three and still runs trials.
  v1::Trial fine = submit("fine", "{friedman1: {samples: 200, features: 5}}");
  EXPECT_EQ(fine.state(), v1::Trial::COMPLETED) << fine.error();
  EXPECT_FALSE(worker->Poll());
}

}  // namespace
}  // namespace dhpt::testing
