#include "tests/integration/test_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "services/cli/study_file.h"

namespace dhpt::testing {

v1::StudySpec Spec(const std::string& yaml) {
  absl::StatusOr<v1::StudySpec> spec = cli::ParseStudySpec(yaml);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : v1::StudySpec();
}

std::pair<int, std::string> RunBinary(const std::string& name, const std::string& args) {
  return RunCommandLine(absl::StrCat(DHPT_BIN_DIR "/", name, " ", args));
}

std::pair<int, std::string> RunCommandLine(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return condition();
}

namespace {

// As a worker started with --data_root=tests/data: the studies' CSV files live there.
worker::TrialRunnerOptions TestRunnerOptions() {
  worker::TrialRunnerOptions options;
  options.datasets.data_roots = {DHPT_TEST_DATA_DIR};
  return options;
}

}  // namespace

SchedulerProcess::SchedulerProcess(std::vector<std::string> flags) {
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  const std::string path = DHPT_BIN_DIR "/dhpt-scheduler";
  auto given = [&](absl::string_view name) {
    return std::any_of(flags.begin(), flags.end(),
                       [&](const std::string& flag) { return absl::StartsWith(flag, name); });
  };
  if (!given("--listen=")) flags.push_back("--listen=127.0.0.1:0");
  if (!given("--db=")) flags.push_back("--db=:memory:");
  if (!given("--heartbeat_interval=")) flags.push_back("--heartbeat_interval=200ms");
  if (!given("--missed_heartbeats=")) {
    flags.push_back(absl::StrCat("--missed_heartbeats=", kTestMissedHeartbeats));
  }
  flags.insert(flags.begin(), path);
  std::vector<char*> argv;
  for (std::string& flag : flags) argv.push_back(flag.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    execv(path.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  FILE* stream = fdopen(out[0], "r");
  char line[256];
  while (fgets(line, sizeof line, stream) != nullptr) {
    absl::string_view text = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&text, "listening on ")) {
      address_ = absl::StrCat("127.0.0.1:", text.substr(text.rfind(':') + 1));
      break;
    }
  }
  // Keep reading so the scheduler never blocks on a full pipe.
  reader_ = std::thread([stream] {
    char rest[256];
    while (fgets(rest, sizeof rest, stream) != nullptr) {
    }
    fclose(stream);
  });
}

SchedulerProcess::~SchedulerProcess() {
  Kill();
  reader_.join();
}

int SchedulerProcess::port() const {
  int port = 0;
  return absl::SimpleAtoi(address_.substr(address_.rfind(':') + 1), &port) ? port : 0;
}

bool SchedulerProcess::alive() const { return !reaped_ && waitpid(pid_, nullptr, WNOHANG) == 0; }

void SchedulerProcess::Kill() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  reaped_ = true;
}

std::pair<absl::Duration, int> SchedulerProcess::Terminate(absl::Duration limit) {
  const absl::Time start = absl::Now();
  kill(pid_, SIGTERM);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() - start > limit) {
      Kill();
      return {absl::InfiniteDuration(), -1};
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  reaped_ = true;
  return {absl::Now() - start, status};
}

int64_t ProcStatusBytes(pid_t pid, absl::string_view field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view text(line);
    int64_t kib = 0;
    if (absl::ConsumePrefix(&text, field) && absl::ConsumePrefix(&text, ":") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(text), " kB"), &kib)) {
      return kib << 10;
    }
  }
  return 0;
}

int64_t SchedulerProcess::resident_bytes() const { return ProcStatusBytes(pid_, "VmRSS"); }

InProcessWorker::InProcessWorker(const std::string& address, const std::string& id, int slots)
    : runner_(TestRunnerOptions()) {
  core_ = std::make_unique<worker::WorkerCore>(
      worker::WorkerCoreOptions{.slots = slots, .threads_per_trial = 1}, &runner_);
  core_->Start();
  worker::WorkerClientOptions options;
  options.scheduler_address = address;
  options.hello.set_worker_id(id);
  v1::WorkerCapabilities& caps = *options.hello.mutable_capabilities();
  caps.set_device_kind(v1::WorkerCapabilities::CPU);
  caps.set_device_name("cpu");
  caps.set_slots(slots);
  caps.set_node_name("test-node");
  for (auto m : {v1::Model::XGBOOST, v1::Model::RANDOM_FOREST, v1::Model::FUNCTION}) {
    caps.add_models(m);
  }
  client_ = std::make_unique<worker::WorkerClient>(options, core_.get());
  thread_ = std::thread([this] { client_->Run(); });
}

InProcessWorker::~InProcessWorker() {
  core_->Stop();
  client_->Stop();
  thread_.join();
}

TestCluster::TestCluster(int workers, int slots, scheduler::SchedulerObserver* observer,
                         int missed_heartbeats) {
  scheduler::SchedulerServerOptions options;
  options.core.observer = observer;
  options.listen_address = "127.0.0.1:0";
  options.core.heartbeat_interval = absl::Milliseconds(200);
  options.core.missed_heartbeats = missed_heartbeats;
  auto server = scheduler::SchedulerServer::Start(options, db_.get());
  EXPECT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  client_ = std::make_unique<cli::StudyClient>(address());
  for (int i = 1; i <= workers; ++i) AddWorker(absl::StrCat("worker-", i), slots);
}

TestCluster::~TestCluster() {
  processes_.clear();
  workers_.clear();
  client_.reset();
  server_->Shutdown(absl::Seconds(2));
}

std::string TestCluster::address() const { return absl::StrCat("127.0.0.1:", server_->port()); }

InProcessWorker& TestCluster::AddWorker(const std::string& id, int slots) {
  workers_.push_back(std::make_unique<InProcessWorker>(address(), id, slots));
  return *workers_.back();
}

cli::ChildProcess& TestCluster::SpawnWorkerProcess(const std::string& id, int slots,
                                                   const std::string& binary,
                                                   std::vector<std::string> flags) {
  processes_.push_back(StartWorkerProcess(address(), id, slots, binary, std::move(flags)));
  return *processes_.back();
}

std::unique_ptr<cli::ChildProcess> StartWorkerProcess(const std::string& address,
                                                      const std::string& id, int slots,
                                                      const std::string& binary,
                                                      std::vector<std::string> flags) {
  flags.insert(flags.begin(), {absl::StrCat(DHPT_BIN_DIR "/", binary), "--scheduler=" + address,
                               "--worker_id=" + id, absl::StrCat("--slots=", slots),
                               "--threads_per_trial=1", "--data_root=" DHPT_TEST_DATA_DIR});
  return StartProcess(flags);
}

std::unique_ptr<cli::ChildProcess> StartProcess(const std::vector<std::string>& argv,
                                                int output_fd) {
  absl::StatusOr<std::unique_ptr<cli::ChildProcess>> child =
      cli::ChildProcess::Start(argv[0], argv, output_fd, output_fd);
  EXPECT_TRUE(child.ok()) << child.status();
  return child.ok() ? std::move(*child) : nullptr;
}

bool WaitForExit(cli::ChildProcess& process, absl::Duration limit) {
  return WaitFor([&] { return process.Poll(); }, limit);
}

OutputReader::OutputReader() {
  int fds[2] = {-1, -1};
  EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
  write_fd_ = fds[1];
  thread_ = std::thread([this, fd = fds[0]] {
    char buffer[4096];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) {
      absl::MutexLock lock(&mutex_);
      text_.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
  });
}

OutputReader::~OutputReader() {
  Started();
  thread_.join();
}

void OutputReader::Started() {
  if (write_fd_ >= 0) close(std::exchange(write_fd_, -1));
}

std::string OutputReader::text() const {
  absl::MutexLock lock(&mutex_);
  return text_;
}

bool OutputReader::WaitForText(absl::string_view wanted, absl::Duration timeout) const {
  return WaitFor([&] { return absl::StrContains(text(), wanted); }, timeout);
}

v1::Study TestCluster::WaitForEnd(const std::string& name, absl::Duration timeout) {
  v1::Study study;
  const bool ended = WaitFor(
      [&] {
        absl::StatusOr<v1::Study> s = client_->GetStudy(name);
        if (!s.ok()) return false;
        study = *s;
        return study.state() == v1::Study::COMPLETED || study.state() == v1::Study::FAILED ||
               study.state() == v1::Study::STOPPED;
      },
      timeout);
  EXPECT_TRUE(ended) << "study " << name << " did not end: " << study.ShortDebugString();
  return study;
}

}  // namespace dhpt::testing
