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

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/cli/child_process.h"
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

// Starts `argv` (argv[0] a path) as a child the caller owns (cli::ChildProcess, as `dhpt
// local` runs its own): SIGKILLed and reaped when it goes out of scope, so a failed ASSERT that
// returns early leaks no process, and never signalled once reaped (its pid may be another
// process's by then). Its stdout and stderr go to `output_fd` (-1: inherited).
std::unique_ptr<cli::ChildProcess> StartProcess(const std::vector<std::string>& argv,
                                                int output_fd = -1);

// Whether `process` exits within `limit` (reaped if so: wait_status() tells how).
bool WaitForExit(cli::ChildProcess& process, absl::Duration limit = absl::Seconds(60));

// What a child process writes to write_fd(), read on a thread of its own for a test to wait
// on. Declare it before the process: the process dies first, closing the pipe the reader waits
// on. Not for a process whose own children outlive it (they would hold the pipe open).
class OutputReader {
 public:
  OutputReader();
  ~OutputReader();
  OutputReader(const OutputReader&) = delete;
  OutputReader& operator=(const OutputReader&) = delete;

  int write_fd() const { return write_fd_; }
  // Closes this process's copy of the write end, once the child holds its own.
  void Started();
  std::string text() const;
  // Polls text() for `wanted` until `timeout`; whether it appeared.
  bool WaitForText(absl::string_view wanted, absl::Duration timeout = absl::Seconds(60)) const;

 private:
  int write_fd_ = -1;
  mutable absl::Mutex mutex_;
  std::string text_ ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

// Starts a real worker binary (build/bin/`binary`) for the scheduler at `address`, owned by
// the caller.
std::unique_ptr<cli::ChildProcess> StartWorkerProcess(const std::string& address, const std::string& id,
                                                      int slots = 1,
                                                      const std::string& binary = "dhpt-cpu-worker",
                                                      std::vector<std::string> flags = {});

// A dhpt-scheduler process: a crash shows as a dead process, not a dead test. It listens on
// 127.0.0.1:0, keeps its studies in memory and leases as TestCluster's unless `flags` say
// otherwise (--listen, --db, --heartbeat_interval, --missed_heartbeats).
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

// Test schedulers want heartbeats every 200 ms (a restarted or silent peer is noticed soon),
// and a lease of 15 of them, 3 s: a worker starved of the CPU for a second on a loaded 2-core
// machine or a Pi is slow, not lost. The tests of lease expiry ask for kShortLeaseHeartbeats.
inline constexpr int kTestMissedHeartbeats = 15;
inline constexpr int kShortLeaseHeartbeats = 3;  // 600 ms.

class TestCluster {
 public:
  // Heartbeats every 200 ms, a lease of `missed_heartbeats` of them. `observer` (may be null)
  // is told of the core's events, as the scheduler's metrics are.
  explicit TestCluster(int workers, int slots = 1, scheduler::SchedulerObserver* observer = nullptr,
                       int missed_heartbeats = kTestMissedHeartbeats);
  ~TestCluster();

  std::string address() const;
  scheduler::SchedulerCore& core() { return server_->core(); }
  cli::StudyClient& client() { return *client_; }
  InProcessWorker& AddWorker(const std::string& id, int slots = 1);
  // Starts a real worker binary (dhpt-cpu-worker unless `binary` says otherwise) with extra
  // `flags`, owned by the cluster; the test may signal or kill it through the reference.
  cli::ChildProcess& SpawnWorkerProcess(const std::string& id, int slots = 1,
                                        const std::string& binary = "dhpt-cpu-worker",
                                        std::vector<std::string> flags = {});
  // Waits until the study has ended and returns it.
  v1::Study WaitForEnd(const std::string& study, absl::Duration timeout = absl::Seconds(120));

 private:
  TempDatabase db_;  // A real database file, removed with the cluster.
  std::unique_ptr<scheduler::SchedulerServer> server_;
  std::unique_ptr<cli::StudyClient> client_;
  std::vector<std::unique_ptr<InProcessWorker>> workers_;
  std::vector<std::unique_ptr<cli::ChildProcess>> processes_;
};

}  // namespace dhpt::testing
