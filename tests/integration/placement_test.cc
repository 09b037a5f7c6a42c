// Device-aware placement with real worker processes of both kinds: dhpt-cpu-worker and
// dhpt-gpu-worker (which, on a machine without a CUDA device or with --device=cpu, announces
// itself as a CPU device). Each test holds, and ends, on a machine with CUDA too.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/text_format.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

v1::StudySpec AutoencoderStudy(const std::string& name, bool allow_cpu_fallback) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    model {
      kind: AUTOENCODER
      fixed { key: "epochs" value { number_value: 3 } }
      fixed { key: "hidden_width" value { number_value: 32 } }
    }
    dataset { sensors { samples: 600 seed: 5 } }
    objective { metric: "r2" goal: MAXIMIZE }
    algorithm { name: RANDOM seed: 3 }
    parameters { name: "learning_rate" double_range { min: 0.001 max: 0.01 log: true } }
    parameters { name: "bottleneck" int_range { min: 4 max: 8 } }
    max_trials: 3)pb", &spec));
  spec.set_name(name);
  spec.set_allow_cpu_fallback(allow_cpu_fallback);
  return spec;
}

v1::StudySpec FunctionStudy(const std::string& name, int trials) {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    model { kind: FUNCTION function: "branin" }
    parameters { name: "x1" double_range { min: -5 max: 10 } }
    parameters { name: "x2" double_range { min: 0 max: 15 } })pb", &spec));
  spec.set_name(name);
  spec.set_max_trials(trials);
  return spec;
}

bool Connected(TestCluster& cluster, int workers) {
  return WaitFor([&] { return cluster.core().connected_workers() == workers; });
}

TEST(PlacementTest, AnAutoencoderStudyNeverLandsOnAWorkerWithoutCuda) {
  TestCluster cluster(/*workers=*/1);  // An in-process CPU worker.
  cluster.SpawnWorkerProcess("gpu-node-without-cuda", 1, "dhpt-gpu-worker", {"--device=cpu"});
  ASSERT_TRUE(Connected(cluster, 2));
  ASSERT_TRUE(cluster.client().CreateStudy(AutoencoderStudy("ae-strict", false)).ok());
  // Meanwhile CPU work flows, so the scheduler is not simply idle.
  ASSERT_TRUE(cluster.client().CreateStudy(FunctionStudy("cpu-work", 20)).ok());
  EXPECT_EQ(cluster.WaitForEnd("cpu-work").trials_completed(), 20);

  absl::StatusOr<v1::Study> study = cluster.client().GetStudy("ae-strict");
  ASSERT_TRUE(study.ok());
  EXPECT_EQ(study->state(), v1::Study::PENDING);
  EXPECT_EQ(study->trials_running() + study->trials_completed() + study->trials_failed(), 0);
  EXPECT_EQ(study->state_reason(),
            "waiting for a CUDA worker that runs AUTOENCODER (connected: 2 CPU workers; set "
            "allow_cpu_fallback to let a GPU worker without a CUDA device run it)");
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("ae-strict");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& trial : *trials) EXPECT_EQ(trial.state(), v1::Trial::PENDING);
  // Function trials never went to the GPU worker: it does not announce them.
  absl::StatusOr<std::vector<v1::Trial>> cpu_trials = cluster.client().ListTrials("cpu-work");
  for (const v1::Trial& trial : *cpu_trials) EXPECT_EQ(trial.worker_id(), "worker-1");
}

TEST(PlacementTest, WithTheFallbackAutoencoderTrialsCompleteOnTheCpuAndSaySo) {
  TestCluster cluster(/*workers=*/1);
  cluster.SpawnWorkerProcess("gpu-worker", 1, "dhpt-gpu-worker", {"--device=cpu"});
  ASSERT_TRUE(Connected(cluster, 2));
  ASSERT_TRUE(cluster.client().CreateStudy(AutoencoderStudy("ae-fallback", true)).ok());
  const v1::Study study = cluster.WaitForEnd("ae-fallback");
  EXPECT_EQ(study.state(), v1::Study::COMPLETED);
  EXPECT_EQ(study.trials_completed(), 3);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("ae-fallback");
  ASSERT_TRUE(trials.ok());
  for (const v1::Trial& trial : *trials) {
    EXPECT_EQ(trial.worker_id(), "gpu-worker");  // Never the CPU worker: it has no libtorch.
    EXPECT_EQ(trial.device(), "cpu");
    EXPECT_GT(trial.metrics().at("r2"), 0);
    EXPECT_TRUE(trial.metrics().contains("val_loss"));
    EXPECT_FALSE(trial.metrics().contains("gpu_utilization_avg"));  // No GPU: absent, not 0.
  }
}

std::string MappedFiles(pid_t pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}

// The GPU worker loads libtorch (libdhpt_autoencoder.so) at its first AutoEncoder trial, not at
// start: linked at start it held about 145 MiB of an idle worker (docs/benchmarks.md, "Idle
// memory"). Started with --device=auto, so the device probe at start runs too (in a child).
TEST(PlacementTest, AnIdleGpuWorkerHoldsNoLibtorchUntilItsFirstAutoencoderTrial) {
  TestCluster cluster(/*workers=*/0);
  cli::ChildProcess& gpu = cluster.SpawnWorkerProcess("gpu-worker", 1, "dhpt-gpu-worker");
  ASSERT_TRUE(Connected(cluster, 1));
  const std::string idle = MappedFiles(gpu.pid());
  ASSERT_TRUE(absl::StrContains(idle, "dhpt-gpu-worker"));  // The maps were read.
  EXPECT_FALSE(absl::StrContains(idle, "libtorch")) << "libtorch is mapped before any trial";
  EXPECT_FALSE(absl::StrContains(idle, "libdhpt_autoencoder.so"));
  // Generous: about 22 MiB here without libtorch, 165 MiB with it.
  EXPECT_LT(ProcStatusBytes(gpu.pid(), "VmRSS"), int64_t{100} << 20);

  ASSERT_TRUE(cluster.client().CreateStudy(AutoencoderStudy("ae-first", true)).ok());
  const v1::Study study = cluster.WaitForEnd("ae-first");
  EXPECT_EQ(study.trials_completed(), 3);
  const std::string working = MappedFiles(gpu.pid());
  EXPECT_TRUE(absl::StrContains(working, "libdhpt_autoencoder.so"));
  EXPECT_TRUE(absl::StrContains(working, "libtorch"));
}

// Likewise the CPU worker and XGBoost (libdhpt_xgboost.so, with libxgboost, dmlc and libgomp):
// loaded at its first XGBoost or Random Forest trial; linked at start they held about 4 MiB of
// an idle worker's 22 MiB (docs/benchmarks.md, "Idle memory"). A function trial loads nothing.
TEST(PlacementTest, AnIdleCpuWorkerHoldsNoXgboostUntilItsFirstXgboostTrial) {
  TestCluster cluster(/*workers=*/0);
  cli::ChildProcess& cpu = cluster.SpawnWorkerProcess("cpu-worker", 1);
  ASSERT_TRUE(Connected(cluster, 1));
  const std::string idle = MappedFiles(cpu.pid());
  ASSERT_TRUE(absl::StrContains(idle, "dhpt-cpu-worker"));  // The maps were read.
  EXPECT_FALSE(absl::StrContains(idle, "libxgboost")) << "XGBoost is mapped before any trial";
  EXPECT_FALSE(absl::StrContains(idle, "libdhpt_xgboost.so"));
  EXPECT_FALSE(absl::StrContains(idle, "libgomp"));

  ASSERT_TRUE(cluster.client().CreateStudy(FunctionStudy("functions-first", 2)).ok());
  EXPECT_EQ(cluster.WaitForEnd("functions-first").trials_completed(), 2);
  EXPECT_FALSE(absl::StrContains(MappedFiles(cpu.pid()), "libxgboost"));

  ASSERT_TRUE(cluster.client()
                  .CreateStudy(Spec(R"(
name: xgb-first
model: {kind: XGBOOST}
dataset: {friedman1: {samples: 300, features: 6, seed: 2}}
objective: {metric: r2, goal: MAXIMIZE}
algorithm: {name: RANDOM, seed: 4}
parameters:
  - {name: max_depth, int_range: {min: 2, max: 4}}
max_trials: 2
)"))
                  .ok());
  const v1::Study study = cluster.WaitForEnd("xgb-first");
  EXPECT_EQ(study.trials_completed(), 2);
  const std::string working = MappedFiles(cpu.pid());
  EXPECT_TRUE(absl::StrContains(working, "libdhpt_xgboost.so"));
  EXPECT_TRUE(absl::StrContains(working, "libxgboost"));
}

// A CPU worker whose XGBoost library cannot be loaded (missing, not a library, or truncated)
// refuses to start with the reason, as the GPU worker does for its AutoEncoder library (below):
// announcing XGBoost, it would fail every XGBoost and Random Forest trial.
TEST(PlacementTest, ACpuWorkerWhoseXgboostLibraryCannotLoadRefusesToStart) {
  const std::string dir = ::testing::TempDir();
  const std::string truncated = dir + "/truncated-xgboost.so";
  {
    std::ifstream whole(DHPT_BIN_DIR "/libdhpt_xgboost.so", std::ios::binary);
    std::string head(20000, '\0');
    ASSERT_TRUE(whole.read(head.data(), head.size()));
    std::ofstream(truncated, std::ios::binary) << head;
  }
  const std::string garbage = dir + "/garbage-xgboost.so";
  std::ofstream(garbage) << "not a library";
  // A FIFO blocked the start-up probe (dlopen waits for a writer) for its 60 s, with no line.
  const std::string fifo = absl::StrCat(dir, "/fifo-xgboost-", getpid(), ".so");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << fifo;
  for (const std::string& module : {truncated, garbage, dir + "/missing-xgboost.so", fifo}) {
    // A worker that starts keeps trying to reach the (absent) scheduler: `timeout` ends it.
    auto [code, output] = RunCommandLine(absl::StrCat(
        "DHPT_XGBOOST_MODULE=", module, " timeout 60 " DHPT_BIN_DIR "/dhpt-cpu-worker",
        " --scheduler=127.0.0.1:1 </dev/null"));
    EXPECT_EQ(code, 1) << module << ": " << output;
    EXPECT_THAT(output, HasSubstr("could run no XGBoost or Random Forest trial")) << module;
    // What to install where, said once.
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(output, "DHPT_XGBOOST_MODULE")).size(), 2u)
        << output;
  }
  // A bare name is looked up on the library search path, as dlopen does: a FIFO found there
  // blocked the probe for its 60 s too, and is refused at once, naming where it was found.
  {
    const std::string bare = absl::StrCat("libdhpt-fifo-", getpid(), ".so");
    // As the loader names its directories: without a trailing slash.
    const std::string library_dir(absl::StripSuffix(dir, "/"));
    const std::string found = absl::StrCat(library_dir, "/", bare);
    ASSERT_EQ(mkfifo(found.c_str(), 0600), 0) << found;
    const absl::Time start = absl::Now();
    auto [code, output] = RunCommandLine(absl::StrCat(
        "LD_LIBRARY_PATH=", library_dir, " DHPT_XGBOOST_MODULE=", bare, " timeout 60 " DHPT_BIN_DIR
        "/dhpt-cpu-worker --scheduler=127.0.0.1:1 </dev/null"));
    EXPECT_EQ(code, 1) << output;
    EXPECT_THAT(output, HasSubstr(absl::StrCat(bare, " (found on the library search path as ",
                                               found, ") is a FIFO, not a library file")));
    EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "waited on the FIFO";
    unlink(found.c_str());
  }
  unlink(fifo.c_str());
  // A worker that announces no kind needing XGBoost does not need its library; it starts
  // (and keeps trying the absent scheduler until `timeout` ends it).
  auto [code, output] = RunCommandLine(absl::StrCat(
      "DHPT_XGBOOST_MODULE=", garbage, " timeout 3 " DHPT_BIN_DIR
      "/dhpt-cpu-worker --scheduler=127.0.0.1:1 --models=FUNCTION </dev/null"));
  EXPECT_EQ(code, 124) << output;
}

// A process's environment as its /proc file holds it: NAME=VALUE entries.
std::vector<std::string> Environment(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
  std::vector<std::string> entries;
  for (std::string entry; std::getline(file, entry, '\0');) entries.push_back(entry);
  return entries;
}

// OpenMP threads that spin at barriers starve each other on a busy board (the README's study:
// 7 s idle, over 120 s beside 16 busy processes, 35 s with the bounded spin): a worker runs
// with GOMP_SPINCOUNT bounded (services/worker/openmp_spin.h), unless the operator set it or
// OMP_WAIT_POLICY. A worker that then connects has run its re-executed image.
TEST(PlacementTest, AWorkersOpenMpThreadsSpinBoundedlyUnlessTheOperatorSaysOtherwise) {
  TestCluster cluster(/*workers=*/0);
  ASSERT_EQ(unsetenv("GOMP_SPINCOUNT"), 0);
  ASSERT_EQ(unsetenv("OMP_WAIT_POLICY"), 0);
  cli::ChildProcess& plain = cluster.SpawnWorkerProcess("plain", 1);
  ASSERT_EQ(setenv("GOMP_SPINCOUNT", "123", 1), 0);
  cli::ChildProcess& own_spin = cluster.SpawnWorkerProcess("own-spin", 1);
  ASSERT_EQ(unsetenv("GOMP_SPINCOUNT"), 0);
  ASSERT_EQ(setenv("OMP_WAIT_POLICY", "passive", 1), 0);
  cli::ChildProcess& passive = cluster.SpawnWorkerProcess("passive", 1);
  ASSERT_EQ(unsetenv("OMP_WAIT_POLICY"), 0);
  ASSERT_TRUE(Connected(cluster, 3));
  EXPECT_THAT(Environment(plain.pid()), ::testing::Contains("GOMP_SPINCOUNT=10000"));
  EXPECT_THAT(Environment(own_spin.pid()), ::testing::Contains("GOMP_SPINCOUNT=123"));
  EXPECT_THAT(Environment(passive.pid()),
              ::testing::Not(::testing::Contains(::testing::StartsWith("GOMP_SPINCOUNT="))));
  // The re-executed worker is the same process and runs trials as before.
  ASSERT_TRUE(cluster.client().CreateStudy(FunctionStudy("after-exec", 6)).ok());
  EXPECT_EQ(cluster.WaitForEnd("after-exec").trials_completed(), 6);
}

TEST(PlacementTest, GpuWorkersRunCpuModelsOnlyWhenTheOperatorSaysSo) {
  TestCluster cluster(/*workers=*/0);
  cluster.SpawnWorkerProcess("gpu-plain", 1, "dhpt-gpu-worker");
  cluster.SpawnWorkerProcess("gpu-all", 1, "dhpt-gpu-worker", {"--run-cpu-models"});
  ASSERT_TRUE(Connected(cluster, 2));
  ASSERT_TRUE(cluster.client().CreateStudy(FunctionStudy("functions", 6)).ok());
  EXPECT_EQ(cluster.WaitForEnd("functions").trials_completed(), 6);
  absl::StatusOr<std::vector<v1::Trial>> trials = cluster.client().ListTrials("functions");
  for (const v1::Trial& trial : *trials) EXPECT_EQ(trial.worker_id(), "gpu-all");
}

TEST(PlacementTest, RequireGpuRefusesToStartWithoutACudaDevice) {
  // Bounded on every machine: without a CUDA device the worker exits at once; with one it
  // starts, and would reconnect for ever to a scheduler that is not there, so it is given
  // this cluster's, where it shows up as a CUDA worker, and is killed with the test.
  TestCluster cluster(/*workers=*/0);
  OutputReader output;  // Before the worker: see OutputReader.
  const std::unique_ptr<cli::ChildProcess> worker =
      StartProcess({DHPT_BIN_DIR "/dhpt-gpu-worker", "--require-gpu",
                    "--scheduler=" + cluster.address(), "--worker_id=required"},
                   output.write_fd());
  output.Started();
  ASSERT_TRUE(WaitFor([&] { return worker->Poll() || cluster.core().connected_workers() == 1; },
                      absl::Seconds(120)))
      << "dhpt-gpu-worker --require-gpu neither exited nor connected:\n" << output.text();
  if (!worker->exited()) {
    absl::StatusOr<std::vector<v1::Worker>> workers = cluster.client().ListWorkers();
    ASSERT_TRUE(workers.ok()) << workers.status();
    ASSERT_EQ(workers->size(), 1u);
    EXPECT_EQ(workers->at(0).capabilities().device_kind(), v1::WorkerCapabilities::CUDA)
        << "--require-gpu started without a CUDA device: " << workers->at(0).ShortDebugString();
  } else {
    EXPECT_TRUE(WIFEXITED(worker->wait_status()) && WEXITSTATUS(worker->wait_status()) == 1)
        << worker->wait_status();
    // Waited for: the reader thread may not have read the pipe yet when the worker is reaped.
    EXPECT_TRUE(output.WaitForText(
        "no CUDA device visible: this worker must run on a GPU node; check the node's gpu label "
        "and the Deployment's node affinity"))
        << output.text();
  }
  // --device=cpu with --require-gpu (underscores work too) is a contradiction, refused alike.
  auto [env_code, env_output] =
      RunBinary("dhpt-gpu-worker", "--scheduler=127.0.0.1:1 --device=cpu --require_gpu");
  EXPECT_EQ(env_code, 1);
  EXPECT_THAT(env_output, HasSubstr("--device=cpu was given"));
  auto [bad_code, bad_output] = RunBinary("dhpt-gpu-worker", "--device=tpu");
  EXPECT_EQ(bad_code, 2);
  EXPECT_THAT(bad_output, HasSubstr("--device must be auto, cuda or cpu"));
}

// --models names each kind once (from the hostile review): empty (absl reads `--models=` as
// the default, every kind), a blank name or one named twice is refused with the reason and the
// kinds it can run, instead of a worker that announces what was not meant. `timeout` ends a
// worker that starts anyway (it keeps trying to reach the absent scheduler).
TEST(PlacementTest, AWorkerRefusesAnEmptyOrRepeatedModelsList) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--models=", "no model kind named"},
      {"--models=XGBOOST,XGBOOST", "XGBOOST is named twice"},
      {"--models=XGBOOST,,RANDOM_FOREST", "an empty name"},
      {"--models=XGBOOST,", "an empty name"},
      {"--models=LINEAR", "LINEAR is not a model kind this worker runs"},
  };
  for (const auto& [flag, reason] : cases) {
    auto [code, output] = RunCommandLine(absl::StrCat(
        "timeout 60 " DHPT_BIN_DIR "/dhpt-cpu-worker --scheduler=127.0.0.1:1 ", flag, " </dev/null"));
    EXPECT_EQ(code, 2) << flag << ": " << output;
    EXPECT_THAT(output, HasSubstr("--models: " + reason)) << flag;
    EXPECT_THAT(output, HasSubstr("name each kind once, comma-separated, of XGBOOST, RANDOM_FOREST, FUNCTION"))
        << flag << ": " << output;
  }
  auto [env_code, env_output] = RunCommandLine(
      "DHPT_MODELS= timeout 60 " DHPT_BIN_DIR "/dhpt-cpu-worker --scheduler=127.0.0.1:1 </dev/null");
  EXPECT_EQ(env_code, 2) << env_output;
  EXPECT_THAT(env_output, HasSubstr("--models: no model kind named"));
}

// A GPU worker whose AutoEncoder library cannot be loaded (missing, not a library, or
// truncated by a half-done copy, which crashed the worker with SIGBUS at its first trial) refuses
// to start, also with --device=cpu: announcing AutoEncoders, it failed each in a millisecond and
// used up studies' budgets.
TEST(PlacementTest, AGpuWorkerWhoseAutoencoderLibraryCannotLoadRefusesToStart) {
  const std::string dir = ::testing::TempDir();
  const std::string truncated = dir + "/truncated-autoencoder.so";
  {
    std::ifstream whole(DHPT_BIN_DIR "/libdhpt_autoencoder.so", std::ios::binary);
    std::string head(20000, '\0');
    ASSERT_TRUE(whole.read(head.data(), head.size()));
    std::ofstream(truncated, std::ios::binary) << head;
  }
  const std::string garbage = dir + "/garbage-autoencoder.so";
  std::ofstream(garbage) << "not a library";
  for (const std::string& module : {truncated, garbage, dir + "/missing-autoencoder.so"}) {
    // A worker that starts keeps trying to reach the (absent) scheduler: `timeout` ends it.
    auto [code, output] = RunCommandLine(absl::StrCat("DHPT_AUTOENCODER_MODULE=", module,
                                                      " timeout 60 " DHPT_BIN_DIR "/dhpt-gpu-worker",
                                                      " --scheduler=127.0.0.1:1 --device=cpu"));
    EXPECT_EQ(code, 1) << module << ": " << output;
    EXPECT_THAT(output, HasSubstr("cannot load the AutoEncoder library")) << module;
    EXPECT_THAT(output, HasSubstr("DHPT_AUTOENCODER_MODULE")) << module;
  }
}

}  // namespace
}  // namespace dhpt::testing
