// Dispatch benchmark: no-op FUNCTION trials through the real scheduler and K real workers over
// loopback gRPC. Reports trials per second and the assignment-to-result latency (the
// scheduler's start and end stamps of each trial) at p50 and p99.
//
//   build/bin/dispatch_bench [--workers=1,2,4] [--slots=4] [--trials=20000] [--metrics=both]
//                            [--stores=memory,sqlite]
//
// Stores: memory is SQLite's :memory: database, sqlite a database file in a fresh temporary
// directory with every commit synced to disk (the scheduler's default), sqlite-normal the same
// without the sync (--db_sync=normal).
//
// With metrics on, the scheduler's and workers' Prometheus metrics are recorded and a scrape
// (collect and serialise everything) runs every second, as Prometheus would.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "prometheus/text_serializer.h"
#include "services/cli/study_client.h"
#include "services/common/metrics_endpoint.h"
#include "services/scheduler/scheduler_metrics.h"
#include "services/scheduler/scheduler_server.h"
#include "services/scheduler/sqlite_study_store.h"
#include "services/worker/worker_client.h"
#include "services/worker/worker_metrics.h"

ABSL_FLAG(std::string, workers, "1,2,4", "worker counts to measure, comma-separated");
ABSL_FLAG(int, slots, 4, "slots per worker");
ABSL_FLAG(int, trials, 20000, "trials per run");
ABSL_FLAG(int, repeats, 3, "runs per worker count; the median run is reported");
ABSL_FLAG(std::string, metrics, "off",
          "off, on (scheduler and worker metrics recorded and scraped every second), or both "
          "(off and on runs interleaved, with the ratio)");
ABSL_FLAG(std::string, stores, "memory,sqlite",
          "stores to measure, comma-separated: memory, sqlite, sqlite-normal");

namespace dhpt {
namespace {


using google::protobuf::util::TimeUtil;

// What a Prometheus scrape costs the process: every family collected and serialised.
std::string Scrape(const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collectable : collectables) {
    for (auto& family : collectable->Collect()) families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

struct Worker {
  worker::TrialRunner runner;
  worker::WorkerMetrics metrics;
  std::unique_ptr<worker::WorkerCore> core;
  std::unique_ptr<worker::WorkerClient> client;
  std::thread thread;

  Worker(const std::string& address, int index, int slots, bool with_metrics)
      : metrics("cpu", absl::StrCat("bench-node-", index), slots, false) {
    core = std::make_unique<worker::WorkerCore>(
        worker::WorkerCoreOptions{.slots = slots,
                                  .threads_per_trial = 1,
                                  .observer = with_metrics ? &metrics : nullptr},
        &runner);
    core->Start();
    worker::WorkerClientOptions options;
    options.scheduler_address = address;
    options.hello.set_worker_id(absl::StrCat("bench-", index));
    options.hello.mutable_capabilities()->set_slots(slots);
    options.hello.mutable_capabilities()->add_models(v1::Model::FUNCTION);
    client = std::make_unique<worker::WorkerClient>(options, core.get());
    thread = std::thread([this] { client->Run(); });
  }
  ~Worker() {
    core->Stop();
    client->Stop();
    thread.join();
  }
};

size_t benchmark_sink = 0;  // Keeps the scrapes from being optimised away.

struct Run {
  double trials_per_second;
  double p50_ms;
  double p99_ms;
};

// A store of `kind` in a fresh temporary directory (removed afterwards).
struct BenchStore {
  std::string directory;
  std::unique_ptr<scheduler::SqliteStudyStore> store;

  explicit BenchStore(const std::string& kind) {
    scheduler::SqliteStoreOptions options{.path = ":memory:"};
    if (kind != "memory") {
      std::string pattern = (std::filesystem::temp_directory_path() / "dhpt-bench-XXXXXX").string();
      directory = mkdtemp(pattern.data());
      options.path = directory + "/scheduler.db";
      options.sync_to_disk = kind == "sqlite";
    }
    store = std::move(*scheduler::SqliteStudyStore::Open(options));
  }
  ~BenchStore() {
    store.reset();
    if (!directory.empty()) std::filesystem::remove_all(directory);
  }
};

Run Measure(int workers, int slots, int trials, bool with_metrics, const std::string& store_kind) {
  BenchStore store(store_kind);
  scheduler::SchedulerMetrics scheduler_metrics;
  scheduler::SchedulerServerOptions options;
  options.listen_address = "127.0.0.1:0";
  if (with_metrics) options.core.observer = &scheduler_metrics;
  auto server = std::move(*scheduler::SchedulerServer::Start(options, store.store.get()));
  const std::string address = absl::StrCat("127.0.0.1:", server->port());
  std::vector<std::unique_ptr<Worker>> pool;
  for (int i = 0; i < workers; ++i) pool.push_back(std::make_unique<Worker>(address, i, slots, with_metrics));
  while (server->core().connected_workers() < workers) absl::SleepFor(absl::Milliseconds(5));
  // Scrapes once a second while the study runs, as Prometheus would.
  std::vector<std::shared_ptr<prometheus::Collectable>> scraped = {
      scheduler_metrics.registry(), std::make_shared<scheduler::SchedulerStateCollector>(&server->core()),
      std::make_shared<ProcessCollector>()};
  for (const auto& worker : pool) scraped.push_back(worker->metrics.registry());
  absl::Notification done;
  std::thread scraper([&] {
    while (with_metrics && !done.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      benchmark_sink = Scrape(scraped).size();
    }
  });

  v1::StudySpec spec;
  spec.set_name("dispatch");
  spec.mutable_model()->set_kind(v1::Model::FUNCTION);
  spec.mutable_model()->set_function("styblinski_tang");
  for (const char* name : {"x1", "x2"}) {
    v1::Parameter* p = spec.add_parameters();
    p->set_name(name);
    p->mutable_double_range()->set_min(-5);
    p->mutable_double_range()->set_max(5);
  }
  spec.set_max_trials(trials);
  cli::StudyClient client(address);
  const absl::Time start = absl::Now();
  if (!client.CreateStudy(spec).ok()) std::abort();
  // Polled rather than watched: a watch stream would add two messages per trial to what is
  // measured.
  while (client.GetStudy("dispatch")->state() != v1::Study::COMPLETED) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  const absl::Duration elapsed = absl::Now() - start;
  done.Notify();
  scraper.join();

  std::vector<double> latency_ms;
  for (std::string token;;) {
    auto page = server->core().ListTrials("dispatch", v1::Trial::COMPLETED,
                                          scheduler::kMaxTrialPageSize, token);
    for (const v1::Trial& t : page->items) {
      latency_ms.push_back(
          static_cast<double>(TimeUtil::DurationToNanoseconds(t.end_time() - t.start_time())) /
          1e6);
    }
    if ((token = page->next_page_token).empty()) break;
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  pool.clear();
  server->Shutdown(absl::Seconds(1));
  auto at = [&](double q) { return latency_ms[static_cast<size_t>(q * (latency_ms.size() - 1))]; };
  return {latency_ms.size() / absl::ToDoubleSeconds(elapsed), at(0.5), at(0.99)};
}

}  // namespace
}  // namespace dhpt

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int slots = absl::GetFlag(FLAGS_slots);
  const int trials = absl::GetFlag(FLAGS_trials);
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  std::vector<bool> modes;
  if (metrics == "off" || metrics == "both") modes.push_back(false);
  if (metrics == "on" || metrics == "both") modes.push_back(true);
  if (modes.empty()) {
    std::fprintf(stderr, "--metrics must be off, on or both\n");
    return 2;
  }
  std::vector<std::string> stores = absl::StrSplit(absl::GetFlag(FLAGS_stores), ',');
  for (const std::string& store : stores) {
    if (store != "memory" && store != "sqlite" && store != "sqlite-normal") {
      std::fprintf(stderr, "--stores: memory, sqlite or sqlite-normal\n");
      return 2;
    }
  }
  std::printf("%-8s %-6s %-8s %-14s %-8s %14s %10s %10s\n", "workers", "slots", "trials", "store",
              "metrics", "trials/s", "p50 ms", "p99 ms");
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_workers), ',')) {
    int workers = 0;
    if (!absl::SimpleAtoi(text, &workers) || workers < 1) return 2;
    for (const std::string& store : stores) {
      // Off and on runs interleaved, so that drift in the machine's speed hits both alike.
      std::map<bool, std::vector<dhpt::Run>> runs;
      for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
        for (bool mode : modes) {
          runs[mode].push_back(dhpt::Measure(workers, slots, trials, mode, store));
        }
      }
      std::map<bool, double> median_rate;
      for (bool mode : modes) {
        std::vector<dhpt::Run>& all = runs[mode];
        std::sort(all.begin(), all.end(),
                  [](const auto& a, const auto& b) { return a.trials_per_second < b.trials_per_second; });
        const dhpt::Run& median = all[all.size() / 2];
        median_rate[mode] = median.trials_per_second;
        std::printf("%-8d %-6d %-8d %-14s %-8s %14.0f %10.3f %10.3f\n", workers, slots, trials,
                    store.c_str(), mode ? "on" : "off", median.trials_per_second, median.p50_ms,
                    median.p99_ms);
      }
      if (modes.size() == 2) {
        std::printf("         metrics on/off throughput: %.3f\n", median_rate[true] / median_rate[false]);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
