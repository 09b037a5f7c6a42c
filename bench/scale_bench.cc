// Scale benchmark: the real dhpt-scheduler (a child process) at the sizes of a large shared
// cluster, driven over loopback by a load generator in this process:
// - `--workers` fake workers, each a real WorkerService stream that answers an assignment at
//   once with a result (no-op trials), so what is measured is the scheduler; they share
//   `--connections` connections (one each, as in a cluster, with --connections=--workers);
// - `--studies` studies holding `--finished_trials` finished trials in all (added through
//   AddTrials), most of them stopped, some waiting for a GPU worker that never comes;
// - `--watchers` WatchStudy readers of the busy study, every event (not summaries only).
// For each watcher count (runs interleaved, the median of --repeats), one busy study of
// `--trials` no-op trials runs on all workers: the dispatch rate, the scheduler's CPU per
// trial (from /proc), and the latency of each user RPC during the run. Memory per worker and
// per finished trial come from the scheduler's resident size as they are added.
//
//   build/bin/scale_bench [--workers=1000] [--connections=8] [--studies=1000]
//                         [--finished_trials=1000000]
//                         [--watchers=0,50] [--trials=30000] [--repeats=3]
//
// With --db=FILE it measures memory instead (MemoryRuns): what the scheduler holds with the
// history on a database file, and after a restart on it.
//
// Two cores here are shared by the scheduler and the generator: ratios (with/without
// watchers) say more than the rates.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dhpt/v1/study_service.grpc.pb.h"
#include "dhpt/v1/worker_service.grpc.pb.h"
#include "services/rpc/stream_outbox.h"
#include "tests/integration/instant_worker.h"

ABSL_FLAG(int, workers, 1000, "fake workers connected throughout");
ABSL_FLAG(int, connections, 8,
          "connections the workers share (a cluster's workers have one each: --connections equal "
          "to --workers)");
ABSL_FLAG(int, studies, 1000, "studies the scheduler holds (one of them the busy one)");
ABSL_FLAG(int, finished_trials, 1'000'000, "finished trials added across the other studies");
ABSL_FLAG(std::string, watchers, "0,50", "WatchStudy readers of the busy study, per run");
ABSL_FLAG(int, trials, 30'000, "no-op trials of each run's busy study");
ABSL_FLAG(int, repeats, 3, "runs per watcher count, interleaved; the median is reported");
ABSL_FLAG(std::string, db, "",
          "the memory runs (issue 34) instead of the dispatch runs, on this database file: "
          "built once (--studies - 1 ended studies holding --finished_trials, and one active "
          "study of --active_trials), then the scheduler's resident size as built, its start-up "
          "time and resident size after a restart, and ListTrials pages of ended studies");
ABSL_FLAG(std::string, scheduler, "",
          "the dhpt-scheduler binary to measure (default: the one beside this benchmark); for "
          "a before/after comparison, alternate runs of two builds' binaries");
ABSL_FLAG(int, active_trials, 10'000, "--db: finished trials of the one active study");
ABSL_FLAG(int, active_curve_points, 0,
          "--db: with N > 0 the active study's trials are imported as trials its ASHA rule "
          "pruned, each with a curve of N intermediate values (ImportStudy), instead of added "
          "(AddTrials): what pruned trials' curves cost in memory");

namespace dhpt {
namespace {

// /proc/<pid>: CPU seconds (user + system) and resident bytes.
double CpuSeconds(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  std::vector<std::string> fields = absl::StrSplit(line.substr(line.rfind(')') + 2), ' ');
  double user = 0, system = 0;
  (void)absl::SimpleAtod(fields[11], &user);
  (void)absl::SimpleAtod(fields[12], &system);
  return (user + system) / static_cast<double>(sysconf(_SC_CLK_TCK));
}
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    absl::string_view text = line;
    int64_t kb = 0;
    if (absl::ConsumePrefix(&text, "VmRSS:") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(text), " kB"), &kb)) {
      return kb * 1024;
    }
  }
  return 0;
}

// CPU time and time spent runnable but waiting for a core (the run queue), from the kernel's
// /proc/PID/task/TID/schedstat, summed over the scheduler's threads of each name: where a user
// call's tail goes when the handler itself is quick (docs/benchmarks.md, "User calls during a
// saturating run"). The threads are named by the scheduler (dhpt-user-call, dhpt-store, ...)
// and by gRPC (nexting_thread: the callback methods, the worker streams among them).
struct ThreadTimes {
  double cpu_ms = 0;
  double wait_ms = 0;
  int64_t slices = 0;
};
std::map<std::string, ThreadTimes> ThreadTimesByName(pid_t pid) {
  std::map<std::string, ThreadTimes> times;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::ifstream schedstat(task.path() / "schedstat");
    std::string name;
    double cpu_ns = 0, wait_ns = 0;
    int64_t slices = 0;
    if (!std::getline(comm, name) || !(schedstat >> cpu_ns >> wait_ns >> slices)) continue;
    ThreadTimes& sum = times[name];
    sum.cpu_ms += cpu_ns / 1e6;
    sum.wait_ms += wait_ns / 1e6;
    sum.slices += slices;
  }
  return times;
}

void PrintThreadTimes(const std::map<std::string, ThreadTimes>& before,
                      const std::map<std::string, ThreadTimes>& after) {
  std::printf("  scheduler threads during the run (CPU ms, run-queue wait ms, waits; mean wait):\n");
  for (const auto& [name, end] : after) {
    ThreadTimes start;
    if (auto it = before.find(name); it != before.end()) start = it->second;
    const double wait = end.wait_ms - start.wait_ms;
    const int64_t slices = end.slices - start.slices;
    if (slices == 0) continue;
    // The user call threads also poll the server's connections (the worker streams' too), so
    // their wake-ups are many more than the calls (docs/benchmarks.md).
    std::printf("    %-16s %9.0f %9.0f %8lld  %.3f ms\n", name.c_str(), end.cpu_ms - start.cpu_ms,
                wait, static_cast<long long>(slices), wait / static_cast<double>(slices));
  }
}

struct Scheduler {
  pid_t pid = 0;
  std::string address;
  absl::Duration start_up;  // From the exec to "listening on".
  Scheduler(const std::string& binary, const std::string& db = ":memory:") {
    const std::string db_flag = "--db=" + db;
    const absl::Time start = absl::Now();
    int out[2];
    if (pipe(out) != 0) std::abort();
    pid = fork();
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, STDERR_FILENO);
      execl(binary.c_str(), binary.c_str(), "--listen=127.0.0.1:0", db_flag.c_str(),
            "--max_studies=100000", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    FILE* stream = fdopen(out[0], "r");
    char line[256];
    while (fgets(line, sizeof line, stream) != nullptr) {
      absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
      if (absl::ConsumePrefix(&text, "listening on ")) {
        address = absl::StrCat("127.0.0.1:", text.substr(text.rfind(':') + 1));
        break;
      }
    }
    if (address.empty()) {
      std::fprintf(stderr, "%s did not start\n", binary.c_str());
      std::exit(1);
    }
    start_up = absl::Now() - start;
    std::thread([stream] {
      char rest[256];
      while (fgets(rest, sizeof rest, stream) != nullptr) {
      }
    }).detach();
  }
  ~Scheduler() {
    if (pid <= 0) return;  // Stopped and reaped already.
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

// A WatchStudy reader of every event that counts the events of each batch from its framing
// and parses nothing: a real watcher's parsing happens on its own machine, not on the two
// cores the scheduler shares with this generator.
class RawWatcher : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawWatcher(grpc::GenericStub* stub, const std::string& study, std::atomic<int64_t>* events)
      : events_(events) {
    v1::WatchStudyRequest request;
    request.set_name(study);
    std::string bytes = request.SerializeAsString();
    grpc::Slice slice(bytes);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub->PrepareBidiStreamingCall(&context_, "/dhpt.v1.StudyService/WatchStudy", {}, this);
    StartWrite(&request_);
    StartWritesDone();
    StartRead(&batch_);
    StartCall();
  }
  void Stop() { context_.TryCancel(); }
  void WaitDone() { done_.WaitForNotification(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    if (batch_.Dump(&slices).ok()) {
      std::string bytes;
      for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      // Each entry: the tag byte, a varint length, the event.
      int64_t n = 0;
      for (size_t at = 0; at < bytes.size(); ++n) {
        ++at;
        uint64_t length = 0;
        for (int shift = 0; at < bytes.size(); shift += 7) {
          const uint8_t byte = static_cast<uint8_t>(bytes[at++]);
          length |= static_cast<uint64_t>(byte & 0x7f) << shift;
          if ((byte & 0x80) == 0) break;
        }
        at += length;
      }
      events_->fetch_add(n);
    }
    StartRead(&batch_);
  }
  void OnDone(const grpc::Status&) override { done_.Notify(); }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer batch_;
  std::atomic<int64_t>* events_;
  absl::Notification done_;
};

struct Latencies {
  std::map<std::string, std::vector<double>> ms;
  void Add(const std::string& rpc, absl::Duration took) {
    ms[rpc].push_back(absl::ToDoubleMilliseconds(took));
  }
};

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * (values.size() - 1))];
}

template <typename Call>
grpc::Status Timed(Latencies& latencies, const std::string& rpc, Call call) {
  grpc::ClientContext context;
  const absl::Time start = absl::Now();
  grpc::Status status = call(&context);
  latencies.Add(rpc, absl::Now() - start);
  return status;
}

// One of the user RPCs that read: 0 ListStudies, 1 ListTrials, 2 ListWorkers, 3 GetBestTrial.
void TimeRead(v1::StudyService::Stub& stub, const std::string& study, int which,
              Latencies& latencies) {
  switch (which % 4) {
    case 0: {
      v1::ListStudiesRequest list;
      v1::ListStudiesResponse page;
      Timed(latencies, "ListStudies", [&](grpc::ClientContext* c) { return stub.ListStudies(c, list, &page); });
      break;
    }
    case 1: {
      v1::ListTrialsRequest list;
      list.set_study(study);
      list.set_page_size(100);
      v1::ListTrialsResponse page;
      Timed(latencies, "ListTrials", [&](grpc::ClientContext* c) { return stub.ListTrials(c, list, &page); });
      break;
    }
    case 2: {
      v1::ListWorkersRequest list;
      v1::ListWorkersResponse page;
      Timed(latencies, "ListWorkers", [&](grpc::ClientContext* c) { return stub.ListWorkers(c, list, &page); });
      break;
    }
    default: {
      v1::GetBestTrialRequest best;
      best.set_study(study);
      v1::Trial trial;
      Timed(latencies, "GetBestTrial", [&](grpc::ClientContext* c) { return stub.GetBestTrial(c, best, &trial); });
      break;
    }
  }
}

// How often the user calls are made during a run: GetStudy and one other.
constexpr absl::Duration kUserCallPace = absl::Milliseconds(100);

struct Run {
  double trials_per_second = 0;
  double cpu_ms_per_trial = 0;
  int64_t events_read = 0;
  Latencies latencies;
};

// One busy study of `trials` no-op trials on every worker, `watchers` reading all its events,
// and each user RPC timed while it runs.
Run MeasureRun(const Scheduler& scheduler, v1::StudyService::Stub& stub,
               grpc::GenericStub& watch_stub, int run, int trials, int watchers) {
  const std::string name = absl::StrCat("busy-", run);
  std::atomic<int64_t> events{0};
  {
    grpc::ClientContext context;
    v1::Study study;
    if (!stub.CreateStudy(&context, testing::InstantStudySpec(name, trials), &study).ok()) std::abort();
  }
  std::vector<std::unique_ptr<RawWatcher>> readers;
  for (int i = 0; i < watchers; ++i) {
    readers.push_back(std::make_unique<RawWatcher>(&watch_stub, name, &events));
  }
  const double cpu_before = CpuSeconds(scheduler.pid);
  const std::map<std::string, ThreadTimes> threads_before = ThreadTimesByName(scheduler.pid);
  double load[3] = {0, 0, 0};
  (void)getloadavg(load, 3);
  const absl::Time start = absl::Now();
  Run result;
  int64_t done = 0;
  for (int i = 0; done < trials; ++i) {
    v1::GetStudyRequest get;
    get.set_name(name);
    v1::Study study;
    if (!Timed(result.latencies, "GetStudy", [&](grpc::ClientContext* c) { return stub.GetStudy(c, get, &study); }).ok()) {
      std::abort();
    }
    done = study.trials_completed();
    if (study.state() != v1::Study::RUNNING && study.state() != v1::Study::PENDING) break;
    TimeRead(stub, name, i, result.latencies);
    // Paced (a call pair every kUserCallPace from the start, or at once when behind), so a
    // faster scheduler is not asked more often: the user calls' own cost stays alike.
    absl::SleepFor(start + (i + 1) * kUserCallPace - absl::Now());
  }
  const absl::Duration elapsed = absl::Now() - start;
  const double cpu = CpuSeconds(scheduler.pid) - cpu_before;
  for (auto& reader : readers) reader->Stop();
  for (auto& reader : readers) reader->WaitDone();
  result.trials_per_second = trials / absl::ToDoubleSeconds(elapsed);
  result.cpu_ms_per_trial = cpu * 1e3 / trials;
  result.events_read = events.load();
  std::printf("run %d, %d watchers, load average %.1f at the start: %.0f trials/s, GetStudy p50 "
              "%.2f / p99 %.2f ms over %zu calls\n",
              run, watchers, load[0], result.trials_per_second,
              Quantile(result.latencies.ms["GetStudy"], 0.5),
              Quantile(result.latencies.ms["GetStudy"], 0.99), result.latencies.ms["GetStudy"].size());
  PrintThreadTimes(threads_before, ThreadTimesByName(scheduler.pid));
  return result;
}

}  // namespace
}  // namespace dhpt

namespace dhpt {
namespace {

// Adds `count` finished trials to the study, 10,000 a call; false on an error.
bool AddFinished(v1::StudyService::Stub& users, const v1::StudySpec& spec, const std::string& metric,
                 int count) {
  for (int done = 0; done < count;) {
    v1::AddTrialsRequest add;
    add.set_study(spec.name());
    const int batch = std::min(count - done, 10'000);
    for (int t = 0; t < batch; ++t, ++done) {
      v1::AddedTrial* trial = add.add_trials();
      for (const v1::Parameter& p : spec.parameters()) {
        const double span = p.double_range().max() - p.double_range().min();
        (*trial->mutable_params())[p.name()].set_number_value(
            p.double_range().min() + span * ((done * 7919 + (p.name().size() * 104729)) % 100003) / 100003.0);
      }
      (*trial->mutable_metrics())[metric] = done;
    }
    grpc::ClientContext context;
    v1::AddTrialsResponse added;
    grpc::Status status = users.AddTrials(&context, add, &added);
    if (!status.ok()) {
      std::fprintf(stderr, "AddTrials: %s\n", status.error_message().c_str());
      return false;
    }
  }
  return true;
}

// An active study of `count` trials that its ASHA rule pruned, each with a curve of `points`
// values (steps 1..points), imported whole (the export's form).
bool ImportPruned(v1::StudyService::Stub& users, int count, int points) {
  v1::StudyExport exported;
  v1::StudySpec& spec = *exported.mutable_study()->mutable_spec();
  spec = testing::InstantStudySpec("active", count + 1'000);
  spec.mutable_model()->clear_function();
  spec.mutable_model()->set_kind(v1::Model::EXTERNAL);
  spec.mutable_objective()->set_metric("loss");
  spec.mutable_objective()->set_goal(v1::Objective::MINIMIZE);
  spec.mutable_early_stopping()->mutable_asha()->set_min_resource(1);
  spec.mutable_early_stopping()->mutable_asha()->set_reduction_factor(3);
  exported.mutable_study()->set_state(v1::Study::RUNNING);
  for (int t = 0; t < count; ++t) {
    v1::Trial& trial = *exported.add_trials();
    trial.set_number(t);
    trial.set_state(v1::Trial::PRUNED);
    for (const v1::Parameter& p : spec.parameters()) {
      (*trial.mutable_params())[p.name()].set_double_value(
          p.double_range().min() + (p.double_range().max() - p.double_range().min()) *
                                       ((t * 7919 + p.name().size() * 104729) % 100003) / 100003.0);
    }
    trial.set_attempt(1);
    trial.add_attempts()->set_client_id("bench");
    v1::TrialCurve& curve = *exported.add_curves();
    curve.set_number(t);
    curve.set_attempt(1);
    for (int step = 1; step <= points; ++step) {
      curve.add_steps(step);
      curve.add_values(1.0 + t % 97 + 1.0 / step);
    }
    (*trial.mutable_metrics())["loss"] = curve.values(points - 1);
  }
  grpc::ClientContext context;
  v1::Study study;
  grpc::Status status = users.ImportStudy(&context, exported, &study);
  if (!status.ok()) std::fprintf(stderr, "ImportStudy: %s\n", status.error_message().c_str());
  return status.ok();
}

// ListTrials pages (100 trials) of ended studies: each of `studies` once (most of them read
// back from the database: the scheduler keeps only the recently used in memory), then the
// first one again `again` times (in memory).
void TimeEndedPages(v1::StudyService::Stub& users, int studies, int again, Latencies& latencies) {
  auto page = [&](int s, const std::string& label) {
    v1::ListTrialsRequest list;
    list.set_study(absl::StrCat("study-", s));
    list.set_page_size(100);
    v1::ListTrialsResponse response;
    grpc::Status status = Timed(latencies, label, [&](grpc::ClientContext* c) {
      return users.ListTrials(c, list, &response);
    });
    if (!status.ok() || response.trials_size() != 100) {
      std::fprintf(stderr, "ListTrials study-%d: %s\n", s, status.error_message().c_str());
    }
  };
  for (int s = 0; s < studies; ++s) page(s, "ListTrials, ended study read back");
  for (int i = 0; i < again; ++i) page(0, "ListTrials, ended study in memory");
  for (int i = 0; i < again; ++i) {
    v1::GetStudyRequest get;
    get.set_name(absl::StrCat("study-", (i * 37) % studies));
    v1::Study study;
    Timed(latencies, "GetStudy, ended study", [&](grpc::ClientContext* c) { return users.GetStudy(c, get, &study); });
    v1::ListStudiesRequest list;
    v1::ListStudiesResponse listed;
    Timed(latencies, "ListStudies (first page of 100)", [&](grpc::ClientContext* c) { return users.ListStudies(c, list, &listed); });
  }
}

void PrintLatencies(const Latencies& latencies) {
  for (const auto& [rpc, ms] : latencies.ms) {
    std::printf("  %-40s p50 %.2f ms, p99 %.2f ms (%zu calls)\n", rpc.c_str(), Quantile(ms, 0.5),
                Quantile(ms, 0.99), ms.size());
  }
}

// Memory (issue 34): ended studies' trials live in the database, not in the scheduler.
int MemoryRuns(const std::string& binary, const std::string& db) {
  const int studies = absl::GetFlag(FLAGS_studies);
  const int finished = absl::GetFlag(FLAGS_finished_trials);
  const int active = absl::GetFlag(FLAGS_active_trials);
  const int ended = studies - 1;
  const int per_study = finished / std::max(1, ended);
  const bool build = !std::ifstream(db).good();
  {
    Scheduler scheduler(binary, db);
    auto users = v1::StudyService::NewStub(
        grpc::CreateChannel(scheduler.address, grpc::InsecureChannelCredentials()));
    if (build) {
      const int64_t rss_empty = ResidentBytes(scheduler.pid);
      const absl::Time loading = absl::Now();
      for (int s = 0; s < ended; ++s) {
        v1::StudySpec spec = testing::InstantStudySpec(absl::StrCat("study-", s), per_study + 10);
        grpc::ClientContext create;
        v1::Study study;
        if (grpc::Status created = users->CreateStudy(&create, spec, &study); !created.ok()) {
          std::fprintf(stderr, "CreateStudy: %s\n", created.error_message().c_str());
          return 1;
        }
        if (!AddFinished(*users, spec, study.spec().objective().metric(), per_study)) return 1;
        grpc::ClientContext stop;
        v1::StopStudyRequest request;
        request.set_name(spec.name());
        (void)users->StopStudy(&stop, request, &study);
      }
      // The active one: no worker runs it, its trials added like the others' (or imported as
      // pruned with their curves).
      if (const int points = absl::GetFlag(FLAGS_active_curve_points); points > 0) {
        if (!ImportPruned(*users, active, points)) return 1;
      } else {
        v1::StudySpec spec = testing::InstantStudySpec("active", active + 1'000);
        grpc::ClientContext create;
        v1::Study study;
        if (!users->CreateStudy(&create, spec, &study).ok() ||
            !AddFinished(*users, spec, study.spec().objective().metric(), active)) {
          return 1;
        }
      }
      std::printf("built %s: %d ended studies of %d finished trials and one active study of %d, "
                  "in %.1f s\n", db.c_str(), ended, per_study, active,
                  absl::ToDoubleSeconds(absl::Now() - loading));
      absl::SleepFor(absl::Seconds(2));  // The last commits, and the cache's evictions.
      std::printf("scheduler resident: %.1f MiB empty, %.1f MiB as built\n", rss_empty / 1048576.0,
                  ResidentBytes(scheduler.pid) / 1048576.0);
    }
    Latencies latencies;
    TimeEndedPages(*users, std::min(ended, 200), 200, latencies);
    std::printf("%s the scheduler that %s it:\n", db.c_str(), build ? "built" : "opened");
    PrintLatencies(latencies);
    std::printf("  resident after the reads: %.1f MiB\n", ResidentBytes(scheduler.pid) / 1048576.0);
    kill(scheduler.pid, SIGTERM);  // A clean stop; the destructor reaps it.
    waitpid(scheduler.pid, nullptr, 0);
    scheduler.pid = 0;
  }
  // A restart on that database, three times: the median start-up.
  std::vector<double> start_ups, residents;
  Latencies latencies;
  for (int r = 0; r < 3; ++r) {
    Scheduler scheduler(binary, db);
    start_ups.push_back(absl::ToDoubleSeconds(scheduler.start_up));
    residents.push_back(ResidentBytes(scheduler.pid) / 1048576.0);
    if (r == 0) {
      auto users = v1::StudyService::NewStub(
          grpc::CreateChannel(scheduler.address, grpc::InsecureChannelCredentials()));
      TimeEndedPages(*users, std::min(ended, 200), 200, latencies);
      residents.back() = ResidentBytes(scheduler.pid) / 1048576.0;  // After the reads.
    }
  }
  std::printf("after a restart on it: start-up %.2f / %.2f / %.2f s (to listening), resident "
              "%.1f MiB after 200 ended studies' pages, %.1f and %.1f MiB at start\n",
              start_ups[0], start_ups[1], start_ups[2], residents[0], residents[1], residents[2]);
  PrintLatencies(latencies);
  return 0;
}

}  // namespace
}  // namespace dhpt

int main(int argc, char** argv) {
  using namespace dhpt;
  absl::ParseCommandLine(argc, argv);
  const int workers = absl::GetFlag(FLAGS_workers);
  const int studies = absl::GetFlag(FLAGS_studies);
  const int finished = absl::GetFlag(FLAGS_finished_trials);
  std::vector<int> watcher_counts;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_watchers), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(text, &n) || n < 0) return 2;
    watcher_counts.push_back(n);
  }
  if (workers < 1 || studies < 2 || finished < 0) return 2;
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
  if (length <= 0) return 1;
  self[length] = '\0';
  std::string binary = absl::GetFlag(FLAGS_scheduler);
  if (binary.empty()) binary = std::string(self, strrchr(self, '/') - self) + "/dhpt-scheduler";
  if (const std::string db = absl::GetFlag(FLAGS_db); !db.empty()) return MemoryRuns(binary, db);

  Scheduler scheduler(binary);
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  auto users = v1::StudyService::NewStub(grpc::CreateCustomChannel(
      scheduler.address, grpc::InsecureChannelCredentials(), arguments));
  grpc::GenericStub watch_stub(
      grpc::CreateCustomChannel(scheduler.address, grpc::InsecureChannelCredentials(), arguments));
  const int64_t rss_empty = ResidentBytes(scheduler.pid);

  // Studies and finished trials first, before any worker could run them.
  const int others = studies - 1;
  const int per_study = finished / std::max(1, others);
  const absl::Time loading = absl::Now();
  for (int s = 0; s < others; ++s) {
    const bool waiting = s % 10 == 9;  // One in ten waits for a GPU worker; the rest stopped.
    v1::StudySpec spec = testing::InstantStudySpec(absl::StrCat("study-", s), per_study + 10);
    if (waiting) {
      spec.mutable_model()->set_kind(v1::Model::AUTOENCODER);
      spec.mutable_model()->clear_function();
      spec.mutable_dataset()->mutable_sensors()->set_samples(100);
      spec.clear_parameters();
      v1::Parameter* p = spec.add_parameters();
      p->set_name("learning_rate");
      p->mutable_double_range()->set_min(0.001);
      p->mutable_double_range()->set_max(0.01);
    }
    grpc::ClientContext create;
    v1::Study study;
    grpc::Status created = users->CreateStudy(&create, spec, &study);
    if (!created.ok()) {
      std::fprintf(stderr, "CreateStudy: %s\n", created.error_message().c_str());
      return 1;
    }
    if (!AddFinished(*users, spec, study.spec().objective().metric(), per_study)) return 1;
    if (!waiting) {
      grpc::ClientContext stop;
      v1::StopStudyRequest request;
      request.set_name(spec.name());
      (void)users->StopStudy(&stop, request, &study);
    }
  }
  const int64_t rss_loaded = ResidentBytes(scheduler.pid);
  std::printf("loaded %d studies and %d finished trials in %.1f s\n", others,
              per_study * others, absl::ToDoubleSeconds(absl::Now() - loading));

  // Workers, over a few connections as from many nodes (or one each, --connections).
  std::atomic<int64_t> results{0};
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs;
  const int connections = std::clamp(absl::GetFlag(FLAGS_connections), 1, workers);
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments channel_arguments;
    channel_arguments.SetInt("dhpt.bench.connection", c);  // A connection of its own.
    stubs.push_back(v1::WorkerService::NewStub(grpc::CreateCustomChannel(
        scheduler.address, grpc::InsecureChannelCredentials(), channel_arguments)));
  }
  std::vector<std::unique_ptr<testing::InstantWorker>> fleet;
  for (int w = 0; w < workers; ++w) {
    fleet.push_back(
        std::make_unique<testing::InstantWorker>(stubs[w % stubs.size()].get(), w, &results));
  }
  for (const auto& worker : fleet) {
    while (!worker->welcomed()) absl::SleepFor(absl::Milliseconds(1));
  }
  absl::Notification stop_beats;
  std::thread beats([&] {
    while (!stop_beats.WaitForNotificationWithTimeout(absl::Seconds(2))) {
      for (const auto& worker : fleet) worker->Heartbeat();
    }
  });
  absl::SleepFor(absl::Seconds(2));
  const int64_t rss_workers = ResidentBytes(scheduler.pid);
  std::printf("scheduler resident: %.1f MiB empty, %.1f MiB with the trials (%.0f bytes per "
              "finished trial), %.1f MiB with %d workers (%.1f KiB per worker)\n",
              rss_empty / 1048576.0, rss_loaded / 1048576.0,
              static_cast<double>(rss_loaded - rss_empty) / std::max(1, per_study * others),
              rss_workers / 1048576.0, workers, (rss_workers - rss_loaded) / 1024.0 / workers);

  const int trials = absl::GetFlag(FLAGS_trials);
  std::map<int, std::vector<Run>> runs;
  int run = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    for (int watchers : watcher_counts) {
      runs[watchers].push_back(MeasureRun(scheduler, *users, watch_stub, run++, trials, watchers));
    }
  }
  std::printf("\n%-9s %12s %16s %14s   %s\n", "watchers", "trials/s", "sched CPU ms/trial",
              "events read", "RPC latency during the run, p50 / p99 ms");
  std::map<int, double> median_rate;
  for (int watchers : watcher_counts) {
    std::vector<Run>& all = runs[watchers];
    std::sort(all.begin(), all.end(), [](const Run& a, const Run& b) {
      return a.trials_per_second < b.trials_per_second;
    });
    const Run& median = all[all.size() / 2];
    median_rate[watchers] = median.trials_per_second;
    std::string rpcs;
    for (const auto& [rpc, ms] : median.latencies.ms) {
      absl::StrAppend(&rpcs, rpc, " ", absl::StrFormat("%.2f/%.2f", Quantile(ms, 0.5), Quantile(ms, 0.99)), "  ");
    }
    std::printf("%-9d %12.0f %16.3f %14lld   %s\n", watchers, median.trials_per_second,
                median.cpu_ms_per_trial, static_cast<long long>(median.events_read), rpcs.c_str());
  }
  // The same RPCs with the cluster idle (every worker connected, every trial held): what the
  // sizes cost, apart from a saturating dispatch.
  Latencies idle;
  for (int i = 0; i < 50; ++i) {
    v1::GetStudyRequest get;
    get.set_name("study-0");
    v1::Study study;
    Timed(idle, "GetStudy", [&](grpc::ClientContext* c) { return users->GetStudy(c, get, &study); });
    for (int which = 0; which < 4; ++which) TimeRead(*users, "study-0", which, idle);
    v1::StudySpec spec = testing::InstantStudySpec(absl::StrCat("idle-", i), 1);
    Timed(idle, "CreateStudy", [&](grpc::ClientContext* c) { return users->CreateStudy(c, spec, &study); });
  }
  std::string rpcs;
  for (const auto& [rpc, ms] : idle.ms) {
    absl::StrAppend(&rpcs, rpc, " ", absl::StrFormat("%.2f/%.2f", Quantile(ms, 0.5), Quantile(ms, 0.99)), "  ");
  }
  std::printf("\nRPC latency with the cluster idle, p50 / p99 ms: %s\n", rpcs.c_str());
  if (watcher_counts.size() >= 2) {
    std::printf("\nwith %d watchers / with %d: %.3f of the dispatch rate\n", watcher_counts.back(),
                watcher_counts.front(),
                median_rate[watcher_counts.back()] / median_rate[watcher_counts.front()]);
  }
  stop_beats.Notify();
  beats.join();
  for (const auto& worker : fleet) worker->Stop();
  for (const auto& worker : fleet) worker->WaitDone();
  return 0;
}
