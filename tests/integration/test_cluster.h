#pragma once

// Real services on 127.0.0.1:0 for integration tests: the scheduler in-process, workers
// in-process (the real runtime and trainers) or as real dhpt-cpu-worker processes.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/cli/study_client.h"
#include "services/scheduler/scheduler_server.h"
#include "services/worker/worker_client.h"
#include "tests/scheduler/temp_database.h"

namespace dhpt::testing {

// Runs a built binary (build/bin/NAME) with `args`, returning its exit code and its stdout and
// stderr together.
std::pair<int, std::string> RunBinary(const std::string& name, const std::string& args);
// Runs a shell command line, the same way.
std::pair<int, std::string> RunCommandLine(const std::string& command);

// A study spec from YAML (as `dhpt submit` reads it); a parse error fails the test.
v1::StudySpec Spec(const std::string& yaml);

// A size from /proc/PID/status (`field` such as VmRSS or VmSize), in bytes; 0 when unreadable.
int64_t ProcStatusBytes(pid_t pid, absl::string_view field);

// Polls `condition` until it holds or `timeout` passes; returns whether it held.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(60));

// Starts a real worker binary (build/bin/`binary`) for the scheduler at `address`; the caller
// kills and reaps it.
pid_t StartWorkerProcess(const std::string& address, const std::string& id, int slots = 1,
                         const std::string& binary = "dhpt-cpu-worker",
                         std::vector<std::string> flags = {});

// A dhpt-scheduler process: a crash shows as a dead process, not a dead test. It listens on
// 127.0.0.1:0 and keeps its studies in memory unless `flags` say otherwise (--listen, --db).
class SchedulerProcess {
 public:
  explicit SchedulerProcess(std::vector<std::string> flags = {});
  // SIGKILL, and reaped.
  ~SchedulerProcess();

  const std::string& address() const { return address_; }
  int port() const;
  pid_t pid() const { return pid_; }  // For limits set from outside (prlimit).
  bool alive() const;
  int64_t resident_bytes() const;
  // SIGKILL now; reaped.
  void Kill();
  // SIGTERM; how long it took to exit (InfiniteDuration if it did not within `limit`, when it
  // is killed) and its exit status.
  std::pair<absl::Duration, int> Terminate(absl::Duration limit = absl::Seconds(30));

 private:
  pid_t pid_ = 0;
  bool reaped_ = false;
  std::string address_;
  std::thread reader_;
};

class InProcessWorker {
 public:
  InProcessWorker(const std::string& address, const std::string& id, int slots);
  ~InProcessWorker();
  worker::WorkerClient& client() { return *client_; }

 private:
  worker::TrialRunner runner_;
  std::unique_ptr<worker::WorkerCore> core_;
  std::unique_ptr<worker::WorkerClient> client_;
  std::thread thread_;
};

class TestCluster {
 public:
  // Heartbeats every 200 ms, so lost workers are noticed within a second. `observer` (may be
  // null) is told of the core's events, as the scheduler's metrics are.
  explicit TestCluster(int workers, int slots = 1, scheduler::SchedulerObserver* observer = nullptr);
  ~TestCluster();

  std::string address() const;
  scheduler::SchedulerCore& core() { return server_->core(); }
  cli::StudyClient& client() { return *client_; }
  InProcessWorker& AddWorker(const std::string& id, int slots = 1);
  // Starts a real worker binary (dhpt-cpu-worker unless `binary` says otherwise) with extra
  // `flags`; the test may kill it.
  pid_t SpawnWorkerProcess(const std::string& id, int slots = 1,
                           const std::string& binary = "dhpt-cpu-worker",
                           std::vector<std::string> flags = {});
  // Waits until the study has ended and returns it.
  v1::Study WaitForEnd(const std::string& study, absl::Duration timeout = absl::Seconds(120));

 private:
  TempDatabase db_;  // A real database file, removed with the cluster.
  std::unique_ptr<scheduler::SchedulerServer> server_;
  std::unique_ptr<cli::StudyClient> client_;
  std::vector<std::unique_ptr<InProcessWorker>> workers_;
  std::vector<pid_t> processes_;
};

}  // namespace dhpt::testing
