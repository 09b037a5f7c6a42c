// The scheduler core under whatever workers may send. The input is a sequence of chunks (one
// length byte, then that many bytes); each chunk's first byte picks an action: connect a
// worker, end a stream, deliver a message (parsed from the chunk, or a result or progress
// aimed at a trial the fake worker was really assigned), or let time pass and expire leases.
// After every step the study must still answer and its counters must match its trials.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "services/scheduler/scheduler_core.h"
#include "services/scheduler/sqlite_study_store.h"

namespace dhpt::scheduler {
namespace {

// A worker's stream as the core sees it; records the assignments so that later chunks can
// answer them, and whether the core closed it.
class FakeChannel : public WorkerChannel {
 public:
  void Send(v1::SchedulerMessage message) override {
    if (closed) return;
    if (message.has_assign()) assigned.push_back(message.assign());
  }
  void Close(const absl::Status& status) override { closed = true; }

  bool closed = false;
  std::vector<v1::Assign> assigned;
};

// One stream, as WorkerSession holds it: session 0 until a hello is accepted.
struct Stream {
  std::unique_ptr<FakeChannel> channel = std::make_unique<FakeChannel>();
  uint64_t session = 0;
  bool ended = false;
};

constexpr absl::string_view kStudy = "fuzz-branin";

v1::Hello DefaultHello(int index) {
  v1::Hello hello;
  hello.set_worker_id(absl::StrCat("w", index % 3));  // Ids repeat: reconnects and duplicates.
  hello.mutable_capabilities()->set_slots(1 + index % 3);
  hello.mutable_capabilities()->set_device_kind(v1::WorkerCapabilities::CPU);
  hello.mutable_capabilities()->add_models(v1::Model::FUNCTION);
  return hello;
}

class Harness {
 public:
  Harness() {
    SchedulerOptions options;
    options.heartbeat_interval = absl::Seconds(1);
    options.clock = [this] { return now_; };
    core_ = std::make_unique<SchedulerCore>(store_.get(), options);
    if (!core_->Recover().ok()) std::abort();
    v1::StudySpec spec;
    spec.set_name(std::string(kStudy));
    spec.mutable_model()->set_kind(v1::Model::FUNCTION);
    spec.mutable_model()->set_function("branin");
    // RANDOM suggests inline (cheap()), so every run of an input takes the same path.
    spec.mutable_algorithm()->set_name(v1::Algorithm::RANDOM);
    spec.set_max_trials(12);
    spec.set_parallel_trials(3);
    spec.set_max_failed_trials(4);
    spec.mutable_trial_timeout()->set_seconds(2);  // So that step 6 can also time trials out.
    for (const char* name : {"x1", "x2"}) {
      v1::Parameter* p = spec.add_parameters();
      p->set_name(name);
      p->mutable_double_range()->set_min(-5);
      p->mutable_double_range()->set_max(15);
    }
    absl::StatusOr<v1::Study> study = core_->CreateStudy(spec);
    if (!study.ok()) std::abort();
    max_trials_ = study->spec().max_trials();
    parallel_trials_ = study->spec().parallel_trials();
  }

  ~Harness() {
    // As the server does: the core first, then the streams it may still hold.
    core_->Shutdown("fuzz input done");
    for (Stream& stream : streams_) End(stream);
  }

  // Every action a worker (or time) can take. New core entry points belong here.
  void Step(uint8_t action, absl::string_view body) {
    const uint8_t pick = body.empty() ? 0 : static_cast<uint8_t>(body[0]);
    switch (action % 8) {
      case 0: {  // A new stream whose first message is a hello (parsed, or a valid default).
        v1::WorkerMessage first;
        if (!first.ParseFromArray(body.data(), static_cast<int>(body.size())) ||
            !first.has_hello()) {
          *first.mutable_hello() = DefaultHello(pick);
        }
        streams_.emplace_back();
        Route(streams_.back(), first);
        break;
      }
      case 1:  // The stream ends (the worker closed it or the connection dropped).
        if (Stream* s = Pick(pick)) End(*s);
        break;
      case 2: {  // Any message on a stream.
        v1::WorkerMessage message;
        if (!message.ParseFromArray(body.data() + (body.empty() ? 0 : 1),
                                    static_cast<int>(body.size() > 0 ? body.size() - 1 : 0))) {
          break;
        }
        if (Stream* s = Pick(pick)) Route(*s, message);
        break;
      }
      case 3:  // A result for a trial that stream was given.
      case 4: {  // Progress for one.
        Stream* s = Pick(pick);
        if (s == nullptr || s->channel->assigned.empty()) break;
        const uint8_t which = body.size() > 1 ? static_cast<uint8_t>(body[1]) : 0;
        const uint8_t how = body.size() > 2 ? static_cast<uint8_t>(body[2]) : 0;
        double value = 0;
        if (body.size() >= 11) memcpy(&value, body.data() + 3, sizeof value);  // Any double.
        const v1::Assign& assign = s->channel->assigned[which % s->channel->assigned.size()];
        v1::WorkerMessage message;
        if (action % 8 == 3) {
          v1::TrialResult* result = message.mutable_result();
          result->set_trial_id(assign.trial_id());
          // Mostly the given attempt; sometimes a stale or future one.
          result->set_attempt(assign.attempt() + (how & 0x10 ? (how & 0x20 ? 1 : -1) : 0));
          // Mostly the assignment's epoch; sometimes another scheduler's.
          result->set_epoch(which & 0x80 ? assign.epoch() + 1 : assign.epoch());
          result->set_state(static_cast<v1::Trial::State>(how % 7));
          if (!(how & 0x40)) (*result->mutable_metrics())["value"] = value;
          if (how & 0x80) result->set_error("fuzzed failure");
        } else if (how & 0x80) {  // The worker's slot began it.
          message.mutable_started()->set_trial_id(assign.trial_id());
          message.mutable_started()->set_attempt(assign.attempt());
          message.mutable_started()->set_epoch(assign.epoch());
        } else {
          v1::TrialProgress* progress = message.mutable_progress();
          progress->set_trial_id(assign.trial_id());
          progress->set_attempt(assign.attempt());
          progress->set_epoch(assign.epoch());
          progress->set_step(how);
          progress->set_value(value);
        }
        Route(*s, message);
        break;
      }
      case 5: {  // A heartbeat.
        v1::WorkerMessage message;
        message.mutable_heartbeat();
        if (Stream* s = Pick(pick)) Route(*s, message);
        break;
      }
      case 6:  // Time passes (up to 4.25 s, past a lease's 3 s) and leases expire.
        now_ += absl::Milliseconds(pick * 1000 / 60);
        core_->ExpireLeases();
        core_->ExpireTrials();
        break;
      case 7:  // A user stops the study (once in a while).
        if (pick > 240) (void)core_->StopStudy(kStudy);
        break;
    }
    // A stream the core closed ends as WorkerSession::OnDone ends it.
    for (Stream& stream : streams_) {
      if (stream.channel->closed) End(stream);
    }
    CheckInvariants();
  }

 private:
  // What WorkerSession::HandleMessage does with one message.
  void Route(Stream& stream, const v1::WorkerMessage& message) {
    if (stream.ended) return;
    if (stream.session == 0) {
      if (!message.has_hello()) {
        stream.channel->Close(absl::FailedPreconditionError("first message must be hello"));
        return;
      }
      absl::StatusOr<uint64_t> session =
          core_->ConnectWorker(message.hello(), {}, stream.channel.get());
      if (!session.ok()) {
        stream.channel->Close(session.status());
        return;
      }
      stream.session = *session;
      return;
    }
    core_->HandleWorkerMessage(stream.session, message);
  }


  void End(Stream& stream) {
    if (stream.ended) return;
    stream.ended = true;
    stream.channel->closed = true;
    if (stream.session != 0) core_->DisconnectWorker(stream.session, "stream ended");
  }

  Stream* Pick(uint8_t pick) {
    if (streams_.empty()) return nullptr;
    return &streams_[pick % streams_.size()];
  }

  // Says which invariant broke (the fuzzer's report shows only the abort).
  [[noreturn]] static void Fail(const std::string& what) {
    std::fprintf(stderr, "worker_messages_fuzzer: invariant broken: %s\n", what.c_str());
    std::abort();
  }

  void CheckInvariants() {
    absl::StatusOr<v1::Study> study = core_->GetStudy(kStudy);
    if (!study.ok()) Fail(absl::StrCat("GetStudy: ", study.status().ToString()));
    absl::StatusOr<ListPage<v1::Trial>> page =
        core_->ListTrials(kStudy, v1::Trial::STATE_UNSPECIFIED, kMaxTrialPageSize, "");
    if (!page.ok()) Fail(absl::StrCat("ListTrials: ", page.status().ToString()));
    const std::vector<v1::Trial>* trials = &page->items;
    int counts[8] = {};
    for (const v1::Trial& trial : *trials) ++counts[trial.state() & 7];
    // trials_pending also counts the trials not yet suggested (the space is continuous, so
    // never exhausted), until the study ends.
    const bool ended = study->state() == v1::Study::COMPLETED ||
                       study->state() == v1::Study::STOPPED || study->state() == v1::Study::FAILED;
    const int unsuggested =
        ended ? 0 : std::max(0, max_trials_ - static_cast<int>(trials->size()));
    if (counts[v1::Trial::PENDING] + unsuggested != study->trials_pending() ||
        counts[v1::Trial::RUNNING] != study->trials_running() ||
        counts[v1::Trial::COMPLETED] != study->trials_completed() ||
        counts[v1::Trial::FAILED] != study->trials_failed() ||
        counts[v1::Trial::CANCELLED] != study->trials_cancelled() ||
        counts[v1::Trial::STATE_UNSPECIFIED] != 0) {
      Fail(absl::StrCat("ListTrials has pending(+unsuggested)/running/completed/failed/cancelled ",
                        counts[1], "+", unsuggested, "/", counts[2], "/", counts[3], "/", counts[4], "/", counts[5],
                        " (", counts[0], " unspecified), the study counts ",
                        study->trials_pending(), "/", study->trials_running(), "/",
                        study->trials_completed(), "/", study->trials_failed(), "/",
                        study->trials_cancelled()));
    }
    if (static_cast<int>(trials->size()) > max_trials_) {
      Fail(absl::StrCat(trials->size(), " trials, max_trials ", max_trials_));
    }
    if (study->trials_running() > parallel_trials_) {
      Fail(absl::StrCat(study->trials_running(), " running, parallel_trials ", parallel_trials_));
    }
  }

  // In memory: the fuzzer runs thousands of inputs a second. Acks come from its writer thread.
  std::unique_ptr<SqliteStudyStore> store_ =
      std::move(*SqliteStudyStore::Open({.path = ":memory:"}));
  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  std::unique_ptr<SchedulerCore> core_;
  std::vector<Stream> streams_;
  int max_trials_ = 0;
  int parallel_trials_ = 0;
};

}  // namespace
}  // namespace dhpt::scheduler

// protobuf logs every rejected message (invalid UTF-8 and the like); the core's own event log
// stays on, it is the context of a crash.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dhpt::scheduler::Harness harness;
  size_t at = 0;
  // Bounded steps keep one input's run short whatever its size.
  for (int steps = 0; at < size && steps < 256; ++steps) {
    const size_t length = std::min<size_t>(data[at], size - at - 1);
    const absl::string_view chunk(reinterpret_cast<const char*>(data) + at + 1, length);
    at += 1 + length;
    if (chunk.empty()) continue;
    harness.Step(static_cast<uint8_t>(chunk[0]), chunk.substr(1));
  }
  return 0;
}
