// Every binary's command line as a careless user types it, run as a real process: usage errors
// exit 2 naming the flag and what it takes, help and version exit 0, each numeric flag refuses
// a value one step outside its range (docs/deployment.md, "Flag ranges"; docs/cli.md), and
// the edge values themselves still start.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/test_cluster.h"

namespace dhpt::testing {
namespace {

using ::testing::HasSubstr;

struct Refusal {
  std::string binary;
  std::string args;  // After the binary; the shell splits them.
  int status;
  std::string said;  // What the output must hold.
};

// A worker that parsed its flags keeps trying to reach the absent scheduler at 127.0.0.1:1;
// the scheduler and the dashboard never stop alone: `timeout` ends each after a while.
std::pair<int, std::string> RunRow(const Refusal& row) {
  return RunCommandLine(absl::StrCat("timeout 20 " DHPT_BIN_DIR "/", row.binary, " ", row.args,
                                     " </dev/null"));
}

bool Built(const std::string& binary) {
  return std::filesystem::exists(absl::StrCat(DHPT_BIN_DIR "/", binary));
}

void ExpectEach(const std::vector<Refusal>& rows) {
  for (const Refusal& row : rows) {
    if (!Built(row.binary)) continue;  // dhpt-gpu-worker, in a build without libtorch.
    SCOPED_TRACE(absl::StrCat(row.binary, " ", row.args));
    const auto [status, output] = RunRow(row);
    EXPECT_EQ(status, row.status) << output;
    EXPECT_THAT(output, HasSubstr(row.said));
  }
}

// absl's own parse errors exited 1 ("ERROR: Illegal value 'abc' specified for flag 'slots'"),
// and --help exited 1 as well.
TEST(CommandLineTest, UsageErrorsExit2NamingTheFlagAndHelpExits0InEveryBinary) {
  std::vector<Refusal> rows;
  // Each binary, and a flag its --help lists.
  const std::pair<std::string, std::string> binaries[] = {{"dhpt-scheduler", "--listen"},
                                                          {"dhpt-cpu-worker", "--scheduler"},
                                                          {"dhpt-gpu-worker", "--device"},
                                                          {"dhpt-dashboard", "--per_address_share"}};
  for (const auto& [binary, listed] : binaries) {
    rows.push_back({binary, "--no_such_flag=1", 2,
                    absl::StrCat(binary, ": unknown flag --no_such_flag\n", binary,
                                 " --help lists its flags")});
    rows.push_back({binary, "--max_event_stream=1", 2, "unknown flag --max_event_stream"});
    rows.push_back({binary, "--help", 0, listed});
    rows.push_back({binary, "-h", 0, listed});
    rows.push_back({binary, "--helpfull", 0, "--flagfile"});
    rows.push_back({binary, "--version", 0, absl::StrCat(binary, " 0.")});
  }
  // Near a flag of its own, the unknown one is answered with it.
  rows.push_back({"dhpt-cpu-worker", "--slot=2", 2, "unknown flag --slot (did you mean --slots?)"});
  rows.push_back({"dhpt-scheduler", "--listen", 2, "--listen needs a value: --listen=VALUE"});
  rows.push_back({"dhpt-cpu-worker", "--slots", 2, "--slots needs a value: --slots=VALUE"});
  rows.push_back({"dhpt-cpu-worker", "--slots=abc", 2,
                  "dhpt-cpu-worker: --slots=abc is not a whole number; it must be between 1 "
                  "and 1024"});
  rows.push_back({"dhpt-gpu-worker", "--slots=two", 2, "--slots=two is not a whole number"});
  rows.push_back({"dhpt-scheduler", "--heartbeat-interval=5", 2,
                  "--heartbeat_interval=5 is not a duration such as 500ms, 30s, 5m or 1h30m; it "
                  "must be between 10ms and 1h"});
  rows.push_back({"dhpt-scheduler", "--speed_placement=maybe", 2,
                  "--speed_placement=maybe is not true or false"});
  rows.push_back({"dhpt-dashboard", "--per_address_share=half", 2,
                  "--per_address_share=half is not a number; it must be above 0 and at most 1"});
  rows.push_back({"dhpt", "local --slots=abc", 2, "dhpt local: --slots=abc is not a whole number"});
  rows.push_back({"dhpt", "studies --jsno", 2, "dhpt studies: unknown flag --jsno (did you mean --json?)"});
  rows.push_back({"dhpt", "ask --count", 2, "--count needs a value"});
  rows.push_back({"dhpt", "ask", 2, "expected a study"});
  rows.push_back({"dhpt", "trials --helpfull", 0, "--scheduler"});
  rows.push_back({"dhpt", "--help", 0, "dhpt local"});
  // absl read these alone and exited 1 ("ERROR: Can't open flagfile"; "unknown flag --1").
  rows.push_back({"dhpt-cpu-worker", "--flagfile=/nonexistent/flags", 2,
                  "dhpt-cpu-worker: --flagfile=/nonexistent/flags: cannot read "
                  "/nonexistent/flags (No such file or directory)"});
  rows.push_back({"dhpt-scheduler", "--flagfile", 2, "--flagfile needs a value"});
  rows.push_back({"dhpt", "trial s -1", 2,
                  "dhpt trial: \"-1\" is read as a flag; an argument that starts with '-' goes "
                  "after --"});
  ExpectEach(rows);
}

// Every numeric flag of every binary, one step outside its range; DHPT_<FLAG> values too.
TEST(CommandLineTest, EachNumericFlagRefusesAValueOutsideItsRangeSayingTheRange) {
  const std::vector<Refusal> rows = {
      // The workers (the GPU worker shares the table).
      {"dhpt-cpu-worker", "--threads_per_trial=-1", 2,
       "dhpt-cpu-worker: --threads_per_trial must be between 0 and 1024 (0: the machine's cores "
       "divided by --slots); got -1"},
      {"dhpt-cpu-worker", "--threads_per_trial=1025", 2, "got 1025"},
      {"dhpt-cpu-worker", "--slots=0", 2, "--slots must be between 1 and 1024; got 0"},
      {"dhpt-cpu-worker", "--slots=1025", 2, "--slots must be between 1 and 1024; got 1025"},
      {"dhpt-gpu-worker", "--threads-per-trial=-1", 2, "--threads_per_trial must be between 0"},
      {"dhpt-cpu-worker", "--metrics_port=-2", 2,
       "--metrics_port must be between -1 and 65535 (-1: off, 0: any free port); got -2"},
      {"dhpt-cpu-worker", "--metrics_port=65536", 2, "got 65536"},
      {"dhpt-cpu-worker", "--max_dataset_file_bytes=0", 2,
       "--max_dataset_file_bytes must be at least 1; got 0"},
      {"dhpt-cpu-worker", "--max_dataset_bytes=-1", 2,
       "--max_dataset_bytes must be at least 0 (0: half of this machine's physical memory); "
       "got -1"},
      {"dhpt-cpu-worker", "--keepalive_time=999ms", 2,
       "--keepalive_time must be between 1s and 24h; got 999ms"},
      {"dhpt-cpu-worker", "--keepalive_time=25h", 2, "got 25h"},
      {"dhpt-cpu-worker", "--keepalive_timeout=0s", 2,
       "--keepalive_timeout must be between 1s and 24h; got 0s"},
      {"dhpt-cpu-worker", "--max_reconnect_backoff=99ms", 2,
       "--max_reconnect_backoff must be between 100ms and 1h; got 99ms"},
      {"dhpt-cpu-worker", "--max_reconnect_backoff=inf", 2, "got inf"},
      {"dhpt-cpu-worker", "--command_grace_seconds=-1", 2,
       "--command_grace_seconds must be between 0 and 3600 (0: SIGKILL right after SIGTERM); "
       "got -1"},
      {"dhpt-cpu-worker", "--command_grace_seconds=nan", 2, "got nan"},
      {"dhpt-cpu-worker", "--command_max_output_bytes=-1", 2,
       "--command_max_output_bytes must be at least 0; got -1"},
      // Addresses: gRPC took port 99999 as 34463; an empty or unparsable one failed later in
      // gRPC's own log lines, or a worker retried it for ever.
      {"dhpt-scheduler", "--listen=127.0.0.1:99999", 2,
       "--listen must be HOST:PORT with PORT between 0 and 65535 and HOST at most 255 "
       "characters (0: any free port); got '127.0.0.1:99999'"},
      {"dhpt-scheduler", "--listen=garbage", 2, "got 'garbage'"},
      {"dhpt-scheduler", "--listen=", 2, "got ''"},
      {"dhpt-scheduler", "--listen=127.0.0.1:-1", 2, "got '127.0.0.1:-1'"},
      {"dhpt-scheduler", "--listen=::1:50051", 2, "got '::1:50051'"},
      {"dhpt-cpu-worker", "--scheduler=127.0.0.1:99999", 2,
       "--scheduler must be HOST:PORT with PORT between 1 and 65535 and HOST at most 255 "
       "characters; got '127.0.0.1:99999'"},
      {"dhpt", "studies --scheduler=127.0.0.1:103097", 2,
       "--scheduler must be HOST:PORT with PORT between 1 and 65535 and HOST at most 255 "
       "characters (empty: localhost:50051, or for compare a scheduler of its own); got "
       "'127.0.0.1:103097'"},
      {"dhpt", "studies --scheduler=127.0.0.1:-1", 2, "got '127.0.0.1:-1'"},
      {"dhpt-cpu-worker", "--scheduler=", 2, "got ''"},
      {"dhpt-cpu-worker", "--scheduler=127.0.0.1:0", 2, "got '127.0.0.1:0'"},
      {"dhpt-dashboard", "--scheduler=", 2, "--scheduler must be HOST:PORT with PORT between 1"},
      {"dhpt-dashboard", "--listen=127.0.0.1:99999", 2,
       "--listen must be HOST:PORT with PORT between 0 and 65535"},
      // The scheduler.
      {"dhpt-scheduler", "--metrics_port=65536", 2, "--metrics_port must be between -1 and 65535"},
      {"dhpt-scheduler", "--max_db_bytes=-1", 2, "--max_db_bytes must be at least 0 (0: no cap); got -1"},
      {"dhpt-scheduler", "--shutdown_grace=-1s", 2, "--shutdown_grace must be between 0s and 10m; got -1s"},
      {"dhpt-scheduler", "--shutdown_grace=inf", 2, "got inf"},
      {"dhpt-scheduler", "--max_studies=0", 2, "--max_studies must be at least 1; got 0"},
      {"dhpt-scheduler", "--max_parameters=0", 2, "--max_parameters must be at least 1; got 0"},
      {"dhpt-scheduler", "--max_dataset_bytes=0", 2, "--max_dataset_bytes must be at least 1; got 0"},
      {"dhpt-scheduler", "--max_message_bytes=1023", 2,
       "--max_message_bytes must be at least 1024; got 1023"},
      {"dhpt-scheduler", "--max_spec_bytes_total=0", 2, "--max_spec_bytes_total must be at least 1"},
      {"dhpt-scheduler", "--max_reply_bytes_in_flight=1048575", 2,
       "--max_reply_bytes_in_flight must be at least 1048576; got 1048575"},
      {"dhpt-scheduler", "--ended_study_cache_bytes=-1", 2,
       "--ended_study_cache_bytes must be at least 0; got -1"},
      {"dhpt-scheduler", "--max_memory_bytes=-2", 2,
       "--max_memory_bytes must be at least -1 (-1: the memory limit of its container, 0: no "
       "cap); got -2"},
      // Was raised to 1 without a word.
      {"dhpt-scheduler", "--watch_journal_events=0", 2,
       "--watch_journal_events must be at least 1; got 0"},
      {"dhpt-scheduler", "--heartbeat_interval=9ms", 2,
       "--heartbeat_interval must be between 10ms and 1h; got 9ms"},
      {"dhpt-scheduler", "--heartbeat_interval=61m", 2, "got 1h1m"},
      {"dhpt-scheduler", "--missed_heartbeats=0", 2, "--missed_heartbeats must be at least 1; got 0"},
      {"dhpt-scheduler", "--keepalive_time=500ms", 2, "--keepalive_time must be between 1s and 24h"},
      {"dhpt-scheduler", "--keepalive_timeout=25h", 2, "--keepalive_timeout must be between 1s and 24h"},
      {"dhpt-scheduler", "--keepalive_min_ping_interval=999ms", 2,
       "--keepalive_min_ping_interval must be between 1s and 24h; got 999ms"},
      {"dhpt-scheduler", "--suggestion_threads=-1", 2,
       "--suggestion_threads must be between 0 and 1024 (0: one per core); got -1"},
      {"dhpt-scheduler", "--suggestion_threads=1025", 2, "got 1025"},
      {"dhpt-scheduler", "--worker_stream_nice=-1", 2,
       "--worker_stream_nice must be between 0 and 19 (0: all alike); got -1"},
      {"dhpt-scheduler", "--worker_stream_nice=20", 2, "got 20"},
      {"dhpt-scheduler", "--client_lease=999ms", 2,
       "--client_lease must be between 1s and 720h; got 999ms"},
      {"dhpt-scheduler", "--client_lease=721h", 2, "got 721h"},
      {"dhpt-scheduler", "--duplicate_margin=101", 2,
       "--duplicate_margin must be between 0 and 100 (0: no duplicates, else at least 1); got 101"},
      {"dhpt-scheduler", "--duplicate_margin=0.5 --db=:memory:", 2,
       "--duplicate_margin must be 0 (no duplicates) or at least 1; got 0.5"},
      {"dhpt-scheduler", "--worker_log_interval=-1s", 2,
       "--worker_log_interval must be between 0s and 24h (0: every line); got -1s"},
      {"dhpt-scheduler", "--worker_log_interval=inf", 2, "got inf"},
      // The dashboard.
      {"dhpt-dashboard", "--max_event_streams=0", 2,
       "dhpt-dashboard: --max_event_streams must be between 1 and 1024; got 0"},
      {"dhpt-dashboard", "--max_event_streams=1025", 2, "got 1025"},
      {"dhpt-dashboard", "--max_connections=8", 2, "--max_connections must be between 9 and 4096; got 8"},
      {"dhpt-dashboard", "--max_connections=4097", 2, "got 4097"},
      {"dhpt-dashboard", "--max_connections=20 --max_event_streams=20", 2,
       "--max_connections must be at least --max_event_streams + 8 (28); got 20"},
      {"dhpt-dashboard", "--per_address_share=0", 2,
       "--per_address_share must be above 0 and at most 1; got 0"},
      {"dhpt-dashboard", "--per_address_share=1.5", 2, "got 1.5"},
      // The CLI.
      {"dhpt", "local --workers=-2", 2,
       "dhpt local: --workers must be between -1 and 256 (-1: the default, 2, or 0 for an "
       "AUTOENCODER study); got -2"},
      {"dhpt", "compare --workers=257", 2, "got 257"},
      {"dhpt", "local --gpu-workers=-2", 2, "--gpu_workers must be between -1 and 256"},
      {"dhpt", "local --slots=0", 2, "--slots must be between 1 and 1024; got 0"},
      {"dhpt", "local --threads-per-trial=-1", 2,
       "--threads_per_trial must be between 0 and 1024 (0: cores / (workers x slots)); got -1"},
      {"dhpt", "ask x --count=0", 2, "--count must be between 1 and 100; got 0"},
      {"dhpt", "ask x --count=101", 2, "got 101"},
      {"dhpt", "importance x --objective=-1", 2,
       "--objective must be at least 0 (0: the first); got -1"},
      // Words that do not parse are refused before anything is sent (they exited 1, tagged
      // as if the scheduler had refused them: hostile review); port 1 has no scheduler.
      {"dhpt", "--scheduler=127.0.0.1:1 tell s abc loss=1", 2,
       "TRIAL: \"abc\" is not a trial number"},
      {"dhpt", "--scheduler=127.0.0.1:1 tell s 0 loss=nan", 2,
       "metric loss: \"nan\" is not a finite decimal number"},
      {"dhpt", "--scheduler=127.0.0.1:1 enqueue s nox", 2,
       "\"nox\" is not parameter=value (e.g. lr=0.01)"},
  };
  ExpectEach(rows);
  // From the environment: the same checks, the same status, and the variable named.
  struct FromEnvironment {
    const char* command;  // Variables, then the binary and its flags.
    std::vector<const char*> said;
  };
  const FromEnvironment from_environment[] = {
      {"DHPT_SLOTS=0 " DHPT_BIN_DIR "/dhpt-cpu-worker", {"--slots must be between 1 and 1024; got 0"}},
      // The CLI's scheduler, a port gRPC would have wrapped to another one.
      {"DHPT_SCHEDULER=127.0.0.1:103097 " DHPT_BIN_DIR "/dhpt studies",
       {"got '127.0.0.1:103097' (from DHPT_SCHEDULER="}},
      // The dashboard reads every flag of its own (a list kept by hand had missed --plot_view,
      // so DHPT_PLOT_VIEW was ignored).
      {"DHPT_PLOT_VIEW=sometimes " DHPT_BIN_DIR
       "/dhpt-dashboard --scheduler=127.0.0.1:1 --listen=127.0.0.1:0",
       {"invalid DHPT_PLOT_VIEW=sometimes"}},
      // Start-up errors beyond ranges name the variable too (they named only the --flag:
      // hostile review).
      {"DHPT_ALLOWED_HOSTS='dash lab' " DHPT_BIN_DIR
       "/dhpt-dashboard --scheduler=127.0.0.1:1 --listen=127.0.0.1:0",
       {"--allowed_hosts: \"dash lab\" is not NAME or NAME:PORT",
        "(--allowed_hosts from DHPT_ALLOWED_HOSTS='dash lab')"}},
      {"DHPT_LABELS=gpu " DHPT_BIN_DIR "/dhpt-cpu-worker --scheduler=127.0.0.1:1",
       {"(--labels from DHPT_LABELS='gpu')"}},
      {"DHPT_TLS_CERT=/nonexistent/cert.pem DHPT_TLS_KEY=/nonexistent/key.pem " DHPT_BIN_DIR
       "/dhpt-scheduler --listen=127.0.0.1:0 --db=:memory:",
       {"(--tls_cert from DHPT_TLS_CERT='/nonexistent/cert.pem')"}},
  };
  for (const FromEnvironment& row : from_environment) {
    const auto [status, output] =
        RunCommandLine(absl::StrCat("timeout 20 env ", row.command, " </dev/null"));
    EXPECT_EQ(status, 2) << row.command << "\n" << output;
    for (const char* said : row.said) EXPECT_THAT(output, HasSubstr(said)) << row.command;
  }
}

// Found by a hostile review: the scheduler read DHPT_<FLAG> from a list kept by hand, which
// missed these three (set, they were ignored). Now every flag of its main.cc is read: a value
// that does not parse, or is out of range, stops it naming the variable or the range, and the
// documented 16 MiB (docs/deployment.md) as a number starts it.
TEST(CommandLineTest, TheSchedulerReadsEveryFlagFromTheEnvironment) {
  const std::string scheduler =
      " timeout 20 " DHPT_BIN_DIR "/dhpt-scheduler --listen=127.0.0.1:0 --db=:memory: </dev/null";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"DHPT_ENDED_STUDY_CACHE_BYTES=16MiB", "invalid DHPT_ENDED_STUDY_CACHE_BYTES=16MiB"},
      {"DHPT_ENDED_STUDY_CACHE_BYTES=-1", "--ended_study_cache_bytes must be at least 0"},
      {"DHPT_MAX_MEMORY_BYTES=lots", "invalid DHPT_MAX_MEMORY_BYTES=lots"},
      {"DHPT_MAX_MEMORY_BYTES=-2", "--max_memory_bytes must be at least -1"},
      {"DHPT_WORKER_LOG_INTERVAL=often", "invalid DHPT_WORKER_LOG_INTERVAL=often"},
      {"DHPT_WORKER_LOG_INTERVAL=25h", "--worker_log_interval must be between"},
  };
  for (const auto& [variable, wanted] : refused) {
    const auto [status, output] = RunCommandLine(variable + scheduler);
    EXPECT_EQ(status, 2) << variable << ": " << output;
    EXPECT_THAT(output, HasSubstr(wanted)) << variable;
  }
  OutputReader output;
  std::unique_ptr<cli::ChildProcess> started = StartProcess(
      {"/usr/bin/env", "DHPT_ENDED_STUDY_CACHE_BYTES=16777216", "DHPT_MAX_MEMORY_BYTES=0",
       "DHPT_WORKER_LOG_INTERVAL=10s", DHPT_BIN_DIR "/dhpt-scheduler", "--listen=127.0.0.1:0",
       "--db=:memory:"},
      output.write_fd());
  output.Started();
  EXPECT_TRUE(output.WaitForText("listening on 127.0.0.1:")) << output.text();
}

// The edges themselves are accepted: each service starts with them (status 124 below: it runs
// until stopped); the CLI goes on to its next step.
TEST(CommandLineTest, TheEdgeValuesStillStart) {
  const std::vector<Refusal> rows = {
      {"dhpt-cpu-worker",
       "--scheduler=127.0.0.1:1 --models=FUNCTION --slots=1 --threads_per_trial=0 "
       "--metrics_port=-1 --max_dataset_file_bytes=1 --max_dataset_bytes=0 --keepalive_time=1s "
       "--keepalive_timeout=24h --max_reconnect_backoff=100ms --command_grace_seconds=0 "
       "--command_max_output_bytes=0",
       124, "runs FUNCTION; 1 slots x"},
      {"dhpt-cpu-worker",
       "--scheduler=127.0.0.1:1 --models=FUNCTION --slots=1024 --threads_per_trial=1024 "
       "--metrics_port=0 --keepalive_time=24h --keepalive_timeout=1s --max_reconnect_backoff=1h "
       "--command_grace_seconds=3600",
       124, "runs FUNCTION; 1024 slots x 1024 threads"},
      {"dhpt-scheduler",
       "--listen=127.0.0.1:0 --db=:memory: --metrics_port=-1 --max_db_bytes=0 --shutdown_grace=0s "
       "--max_studies=1 --max_parameters=1 --max_dataset_bytes=1 --max_message_bytes=1024 "
       "--max_spec_bytes_total=1 --max_reply_bytes_in_flight=1048576 --ended_study_cache_bytes=0 "
       "--max_memory_bytes=0 --watch_journal_events=1 --heartbeat_interval=10ms "
       "--missed_heartbeats=1 --keepalive_time=1s --keepalive_timeout=1s "
       "--keepalive_min_ping_interval=1s --suggestion_threads=0 --client_lease=1s "
       "--duplicate_margin=0 --worker_log_interval=0s --worker_stream_nice=0",
       124, "listening on 127.0.0.1:"},
      {"dhpt-scheduler",
       "--listen=127.0.0.1:0 --db=:memory: --metrics_port=0 --metrics_listen=127.0.0.1 "
       "--max_memory_bytes=-1 --shutdown_grace=10m --heartbeat_interval=1h --keepalive_time=24h "
       "--keepalive_timeout=24h --keepalive_min_ping_interval=24h --client_lease=720h "
       "--duplicate_margin=100 --worker_log_interval=24h --suggestion_threads=4 "
       "--worker_stream_nice=19",
       124, "metrics on :"},
      {"dhpt-dashboard",
       "--scheduler=127.0.0.1:1 --listen=127.0.0.1:0 --max_event_streams=1 --max_connections=9 "
       "--per_address_share=1",
       124, "dashboard at http://127.0.0.1:"},
      {"dhpt-dashboard",
       "--scheduler=127.0.0.1:1 --listen=127.0.0.1:0 --max_event_streams=1024 "
       "--max_connections=4096 --per_address_share=0.001",
       124, "dashboard at http://127.0.0.1:"},
      // Past the flags: no study file, no scheduler (status 1, not 2).
      {"dhpt",
       "local --study=/nonexistent/study.yaml --workers=256 --gpu-workers=-1 --slots=1024 "
       "--threads-per-trial=1024",
       1, "/nonexistent/study.yaml"},
      {"dhpt", "ask x --count=100 --scheduler=127.0.0.1:1", 1, "failed to connect"},
      {"dhpt", "ask x --count=1 --scheduler=127.0.0.1:1", 1, "failed to connect"},
  };
  for (const Refusal& row : rows) {
    SCOPED_TRACE(absl::StrCat(row.binary, " ", row.args));
    if (row.status != 124) {
      const auto [status, output] = RunRow(row);
      EXPECT_EQ(status, row.status) << output;
      EXPECT_THAT(output, HasSubstr(row.said));
      continue;
    }
    // A service runs until it is stopped: it started once it says so.
    std::vector<std::string> argv = {absl::StrCat(DHPT_BIN_DIR "/", row.binary)};
    for (absl::string_view arg : absl::StrSplit(row.args, ' ', absl::SkipEmpty())) {
      argv.emplace_back(arg);
    }
    OutputReader output;
    std::unique_ptr<cli::ChildProcess> service = StartProcess(argv, output.write_fd());
    output.Started();
    EXPECT_TRUE(output.WaitForText(row.said)) << output.text();
  }
}

// A study file that is a device or a FIFO, or larger than a spec (an export) can be, is refused
// before it is read, exit 2: /dev/zero was read until the kernel's OOM killer fired, a FIFO
// waited for a writer for ever. The address space is capped (ulimit -v) so that a regression
// fails here instead of exhausting the machine; `timeout` ends one that waits.
TEST(CommandLineTest, StudyFilesThatAreNotRegularOrTooLargeExit2BeforeBeingRead) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/study_files_", getpid());
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/fifo", big = dir + "/big.yaml", huge = dir + "/huge.json";
  ASSERT_EQ(RunCommandLine(absl::StrCat("mkfifo ", fifo, " && truncate -s 4194305 ", big,
                                        " && truncate -s 268435457 ", huge)).first, 0);
  const struct {
    std::string args;
    std::string said;
  } rows[] = {
      {"validate /dev/zero", "/dev/zero is a character device, not a regular file"},
      {"submit /dev/zero", "/dev/zero is a character device, not a regular file"},
      {"import /dev/urandom", "/dev/urandom is a character device"},
      {"validate " + fifo, fifo + " is a FIFO, not a regular file"},
      {"submit " + fifo, fifo + " is a FIFO"},
      {"import " + fifo, fifo + " is a FIFO"},
      {"local --study=" + fifo, fifo + " is a FIFO"},
      {"validate " + dir, dir + " is a directory"},
      {"submit " + big, big + " has 4194305 bytes, more than the 4194304 a file here may hold "
                        "(4 MiB, the scheduler's default --max_message_bytes)"},
      {"import " + huge, "more than the 268435456"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.args);
    const auto [status, output] = RunCommandLine(absl::StrCat(
        "ulimit -v 2000000; timeout 20 " DHPT_BIN_DIR "/dhpt ", row.args,
        " --scheduler=127.0.0.1:1 </dev/null"));
    EXPECT_EQ(status, 2) << output;
    EXPECT_THAT(output, HasSubstr(row.said));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dhpt::testing
