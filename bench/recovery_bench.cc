// Recovery benchmark: how long a scheduler takes to come back with a big database, how big
// the database is per trial, and what the scheduler holds in memory per finished trial.
//
//   build/bin/recovery_bench [--trials=100000] [--studies=10] [--parameters=5]
//
// The trials are finished FUNCTION trials of TPE studies with the metrics a real result
// carries; the database is a file in a fresh temporary directory, written through the store
// (group commit) as the scheduler writes it. "Reload" is what a restart does: open and check
// the file, migrate, load, and rebuild every study, optimiser history and trial in the core.

#include <malloc.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/time_util.h"
#include "services/scheduler/scheduler_core.h"
#include "services/study/spec_validation.h"
#include "services/scheduler/sqlite_study_store.h"

ABSL_FLAG(int, trials, 100'000, "finished trials in the database");
ABSL_FLAG(int, studies, 10, "studies they belong to");
ABSL_FLAG(int, parameters, 5, "parameters of each study");

namespace dhpt {
namespace {

using google::protobuf::util::TimeUtil;

size_t HeapBytes() { return mallinfo2().uordblks; }

v1::StudySpec Spec(int index, int parameters, int trials) {
  v1::StudySpec spec;
  spec.set_name(absl::StrCat("study-", index));
  spec.mutable_model()->set_kind(v1::Model::FUNCTION);
  spec.mutable_model()->set_function("rosenbrock");
  spec.mutable_algorithm()->set_name(v1::Algorithm::TPE);
  for (int p = 1; p <= parameters; ++p) {
    v1::Parameter& parameter = *spec.add_parameters();
    parameter.set_name(absl::StrCat("x", p));
    parameter.mutable_double_range()->set_min(-5);
    parameter.mutable_double_range()->set_max(5);
  }
  spec.set_max_trials(trials);
  return *study::NormalizeStudySpec(spec);
}

v1::Trial FinishedTrial(uint64_t id, const v1::StudySpec& spec, int64_t number,
                        std::mt19937_64& random) {
  std::uniform_real_distribution<double> uniform(-5, 5);
  v1::Trial trial;
  trial.set_id(id);
  trial.set_study(spec.name());
  trial.set_number(number);
  trial.set_state(v1::Trial::COMPLETED);
  for (const v1::Parameter& parameter : spec.parameters()) {
    (*trial.mutable_params())[parameter.name()].set_double_value(uniform(random));
  }
  trial.set_attempt(1);
  v1::Trial::Attempt& attempt = *trial.add_attempts();
  attempt.set_worker_id("cpu-worker-7f9c");
  attempt.set_epoch(random());
  const double value = uniform(random) * 100;
  auto& metrics = *trial.mutable_metrics();
  metrics["value"] = value;
  metrics["wall_seconds"] = 0.01;
  metrics["cpu_seconds"] = 0.01;
  metrics["cpu_utilization"] = 0.98;
  metrics["peak_rss_bytes"] = 9.3e7;
  trial.set_objective_value(value);
  trial.set_worker_id("cpu-worker-7f9c");
  trial.set_node_name("pi-node-3");
  trial.set_device("cpu");
  const int64_t base = 1'790'000'000'000'000'000 + static_cast<int64_t>(id) * 1'000'000;
  *trial.mutable_create_time() = TimeUtil::NanosecondsToTimestamp(base);
  *trial.mutable_start_time() = TimeUtil::NanosecondsToTimestamp(base + 100'000);
  *trial.mutable_end_time() = TimeUtil::NanosecondsToTimestamp(base + 900'000);
  return trial;
}

int Run() {
  const int trials = absl::GetFlag(FLAGS_trials);
  const int studies = std::max(1, absl::GetFlag(FLAGS_studies));
  const int parameters = absl::GetFlag(FLAGS_parameters);
  std::string pattern = (std::filesystem::temp_directory_path() / "dhpt-recovery-XXXXXX").string();
  const std::string directory = mkdtemp(pattern.data());
  const scheduler::SqliteStoreOptions options{.path = directory + "/scheduler.db"};

  // Write.
  {
    auto store = std::move(*scheduler::SqliteStudyStore::Open(options));
    std::mt19937_64 random(1);
    const int per_study = (trials + studies - 1) / studies;
    const absl::Time start = absl::Now();
    uint64_t id = 1;
    for (int s = 0; s < studies; ++s) {
      const v1::StudySpec spec = Spec(s, parameters, per_study);
      v1::Study study;
      *study.mutable_spec() = spec;
      study.set_state(v1::Study::COMPLETED);
      store->PutStudy(study);
      for (int n = 0; n < per_study && id <= static_cast<uint64_t>(trials); ++n) {
        store->PutTrial(FinishedTrial(id++, spec, n, random));
      }
    }
    if (!store->Sync(store->last_sequence()).ok()) return 1;
    const absl::Duration took = absl::Now() - start;
    std::printf("write    %d trials in %.2f s (%.0f trials/s, group commit)\n", trials,
                absl::ToDoubleSeconds(took), trials / absl::ToDoubleSeconds(took));
  }
  const double bytes = static_cast<double>(std::filesystem::file_size(options.path));
  std::printf("database %.1f MB, %.0f bytes per trial\n", bytes / 1e6, bytes / trials);

  // Reload, as a restart does.
  malloc_trim(0);
  const size_t heap_before = HeapBytes();
  const absl::Time start = absl::Now();
  auto store = std::move(*scheduler::SqliteStudyStore::Open(options));
  const absl::Time opened = absl::Now();
  scheduler::SchedulerCore core(store.get(), scheduler::SchedulerOptions());
  if (absl::Status status = core.Recover(); !status.ok()) {
    std::fprintf(stderr, "recover: %s\n", status.ToString().c_str());
    return 1;
  }
  const absl::Time recovered = absl::Now();
  const size_t heap_after = HeapBytes();
  std::printf("reload   %.2f s (open and check %.2f s, load and rebuild %.2f s)\n",
              absl::ToDoubleSeconds(recovered - start), absl::ToDoubleSeconds(opened - start),
              absl::ToDoubleSeconds(recovered - opened));
  std::printf("memory   %.0f bytes of heap per finished trial (%d parameters, %d metrics)\n",
              static_cast<double>(heap_after - heap_before) / trials, parameters, 5);
  std::filesystem::remove_all(directory);
  return 0;
}

}  // namespace
}  // namespace dhpt

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dhpt::Run();
}
