#include "services/worker/worker_main.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dhpt/v1/study_service.pb.h"
#include "google/protobuf/util/json_util.h"
#include "absl/time/time.h"
#include "services/common/channel_options.h"
#include "services/common/client_security_flags.h"
#include "services/common/env_flags.h"
#include "services/common/flag_ranges.h"
#include "services/common/labels.h"
#include "services/common/logging.h"
#include "services/common/metrics_endpoint.h"
#include "services/common/signals.h"
#include "services/common/worker_limits.h"
#include "services/worker/command_flags.h"
#include "services/worker/openmp_spin.h"
#include "services/worker/sequential_study.h"
#include "services/worker/power_rails.h"
#include "services/worker/trial_runner.h"
#include "services/worker/memory_cgroup.h"
#include "services/worker/worker_client.h"
#include "services/worker/worker_core.h"
#include "services/worker/worker_metrics.h"
#include "services/worker/worker_workdir.h"
#include "services/worker/xgboost_trainer.h"

ABSL_FLAG(std::string, scheduler, "localhost:50051", "the scheduler's HOST:PORT");
ABSL_FLAG(int, slots, 1, "trials this worker runs at once");
ABSL_FLAG(int, threads_per_trial, 0,
          "threads each trial's trainer uses; 0 = the machine's cores divided by --slots");
ABSL_FLAG(std::string, worker_id, "",
          "stable id of this worker across restarts; default HOSTNAME-PID");
ABSL_FLAG(std::string, node_name, "",
          "node reported with results; default $NODE_NAME (Kubernetes downward API), else "
          "the hostname");
ABSL_FLAG(std::string, sequential_study, "",
          "run the study in this JSON file (a dhpt.v1.StudySpec) here, with no scheduler, one "
          "trial after another, printing the study as it starts, each ended trial, then the "
          "study as it ended, as JSON lines (dhpt.v1.StudyEvent) on stdout; dhpt compare's "
          "sequential baseline");
ABSL_FLAG(std::vector<std::string>, data_root, {},
          "a directory this worker may read CSV datasets from (after resolving symlinks and "
          "'..'); repeat the flag or separate directories with commas. Without one, studies "
          "with a CSV dataset fail on this worker");
ABSL_FLAG(int64_t, max_dataset_file_bytes, dhpt::worker::kDefaultMaxDatasetFileBytes,
          "the largest CSV file a study may have this worker read, in bytes (default 1 GiB)");
ABSL_FLAG(int64_t, max_dataset_bytes, 0,
          "the most memory one dataset may take in this worker, in bytes, with its "
          "train/validation copies (about 8 bytes per cell); a study over it fails with "
          "RESOURCE_EXHAUSTED. 0 = half of this machine's physical memory");
ABSL_FLAG(std::string, labels, "",
          "labels this worker announces, KEY=VALUE separated by commas (Kubernetes label "
          "syntax), e.g. board=pi4,gpu=orin: studies choose workers by them "
          "(worker_selector), so a study's costs are measured on one kind of board");
ABSL_FLAG(std::vector<std::string>, models, {},
          "the model kinds this worker announces, of those it can run, comma-separated (e.g. "
          "XGBOOST), each once; left out: all it can. A board too small or slow for one kind runs the "
          "others; a model-choice study still gives it the trials of its kinds");
// Keepalive (docs/deployment.md, "Flaky links and small boards"): a dead link to the scheduler
// is noticed after --keepalive_time + --keepalive_timeout of silence, and the worker reconnects.
ABSL_FLAG(absl::Duration, keepalive_time, absl::Milliseconds(dhpt::KeepaliveOptions{}.ping_interval_ms),
          "ping the scheduler after this long without traffic; at least the scheduler's "
          "--keepalive_min_ping_interval");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Milliseconds(dhpt::KeepaliveOptions{}.ping_timeout_ms),
          "reconnect when a ping is not answered within this long");
ABSL_FLAG(absl::Duration, max_reconnect_backoff, dhpt::worker::WorkerClientOptions{}.max_backoff,
          "the longest wait between reconnect attempts (they double from 100ms, with jitter): "
          "after a link comes back the worker reconnects within about this long");
ABSL_FLAG(int, metrics_port, -1,
          "serve Prometheus metrics on this port at /metrics; 0 picks a free port (logged as "
          "'metrics on :PORT'); -1 = off");

namespace dhpt::worker {
namespace {

std::string Hostname() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

void PrintEvent(const v1::StudyEvent& event) {
  std::string line;
  google::protobuf::util::JsonPrintOptions json;
  json.preserve_proto_field_names = true;
  if (const auto written = google::protobuf::util::MessageToJsonString(event, &line, json);
      !written.ok()) {
    // Never an empty line where a reader expects an event: the event is left out, and said so.
    DHPT_LOG_WARNING("an event at position %d has no JSON form, left out: %s", event.position(),
                     written.ToString());
    return;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// --sequential_study: the whole study in this process. Exit status 0 when the study ran to
// its end (whatever its trials did), 1 when interrupted, 2 for a bad file or spec.
int RunSequentialStudy(const std::string& path, TrialRunner& runner, SequentialOptions options) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  v1::StudySpec spec;
  if (!file || !google::protobuf::util::JsonStringToMessage(text.str(), &spec).ok()) {
    std::fprintf(stderr, "--sequential_study: %s is not a readable JSON study spec\n",
                 path.c_str());
    return 2;
  }
  std::atomic<bool> cancelled = false;
  // A signal stops the study after its running trial; the waiter dies with the process.
  std::thread([&cancelled] {
    WaitForTerminationSignal();
    cancelled = true;
  }).detach();
  options.cancelled = &cancelled;
  options.on_start = [](const v1::Study& study) {
    v1::StudyEvent event;
    *event.mutable_study() = study;
    PrintEvent(event);
  };
  options.on_trial_end = [](const v1::Trial& trial) {
    v1::StudyEvent event;
    *event.mutable_trial() = trial;
    PrintEvent(event);
  };
  absl::StatusOr<SequentialRun> run = RunStudySequentially(spec, runner, options);
  if (!run.ok()) {
    std::fprintf(stderr, "--sequential_study: %s\n", std::string(run.status().message()).c_str());
    return 2;
  }
  v1::StudyEvent event;
  *event.mutable_study() = run->study;
  PrintEvent(event);
  return cancelled ? 1 : 0;
}

// The dataset flags, checked: a data root that is not a directory stops the worker at start.
absl::StatusOr<DatasetOptions> DatasetOptionsFromFlags(int argc, char** argv) {
  DatasetOptions options;
  std::vector<std::string> roots = RepeatedFlagValues(argc, argv, "data_root");
  if (roots.empty()) roots = absl::GetFlag(FLAGS_data_root);
  absl::StatusOr<std::vector<std::string>> resolved = ResolveDataRoots(roots);
  if (!resolved.ok()) return resolved.status();
  options.data_roots = *std::move(resolved);
  // In range: WorkerFlagRanges.
  options.max_dataset_file_bytes = absl::GetFlag(FLAGS_max_dataset_file_bytes);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_dataset_bytes);
  options.max_dataset_bytes = max_bytes > 0 ? max_bytes : DefaultMaxDatasetBytes();
  return options;
}

// A start-up step's verdict: nullopt to go on, else the status to exit with (the step printed
// why): 2 for a bad flag, 1 when this node cannot host the worker.
using StopWith = std::optional<int>;

// The values the numeric flags take (docs/deployment.md, "Flag ranges").
std::vector<FlagRange> WorkerFlagRanges() {
  std::vector<FlagRange> ranges = {
      FlagRange::Address("scheduler", 1),
      FlagRange::Integer("slots", 1, 1024),
      FlagRange::Integer("threads_per_trial", 0, 1024, "0: the machine's cores divided by --slots"),
      FlagRange::Integer("metrics_port", -1, 65535, "-1: off, 0: any free port"),
      FlagRange::Integer("max_dataset_file_bytes", 1, FlagRange::kNoMax),
      FlagRange::Integer("max_dataset_bytes", 0, FlagRange::kNoMax,
                         "0: half of this machine's physical memory"),
      // gRPC takes keepalive times in milliseconds as an int: 24 days would overflow it.
      FlagRange::Duration("keepalive_time", absl::Seconds(1), absl::Hours(24)),
      FlagRange::Duration("keepalive_timeout", absl::Seconds(1), absl::Hours(24)),
      FlagRange::Duration("max_reconnect_backoff", WorkerClientOptions{}.initial_backoff,
                          absl::Hours(1)),
  };
  for (FlagRange& range : CommandFlagRanges()) ranges.push_back(std::move(range));
  return ranges;
}

// Step 1: usage, --version, DHPT_<FLAG> variables, then the command line.
void ParseWorkerFlags(int argc, char** argv, const WorkerKind& kind) {
  absl::SetProgramUsageMessage(absl::StrCat(
      kind.binary, " --scheduler=HOST:PORT [--slots=N]\n\n", kind.purpose,
      "\nConnects to dhpt-scheduler, runs the trials it assigns and streams results back;\n"
      "reconnects with backoff when the scheduler goes away. Every flag can also be set as\n"
      "DHPT_<FLAG> in the environment (e.g. DHPT_SCHEDULER)."));
  absl::FlagsUsageConfig usage;
  // The libraries too: a comparison's report.json records what ran. Built only for --version:
  // XGBoost's version is asked of a child process that loads libdhpt_xgboost.so.
  static const WorkerKind* version_kind = &kind;
  usage.version_string = [] {
    absl::StatusOr<std::string> xgboost = ProbeXgboostVersion();
    return absl::StrCat(version_kind->binary, " " DHPT_VERSION " (grpc ", grpc::Version(),
                        ", xgboost ", xgboost.ok() ? *xgboost : "not loadable",
                        version_kind->library_versions, ")\n");
  };
  usage.contains_helpshort_flags = [](absl::string_view file) { return absl::StrContains(file, "services/"); };
  usage.contains_help_flags = usage.contains_helpshort_flags;
  absl::SetFlagsUsageConfig(usage);
  ApplyEnvironmentToFlags({"scheduler", "slots", "threads_per_trial", "worker_id", "node_name",
                           "labels", "metrics_port", "data_root", "max_dataset_file_bytes",
                           "max_dataset_bytes", "keepalive_time", "keepalive_timeout",
                           "max_reconnect_backoff", "models"});
  ApplyEnvironmentToFlags(CommandFlagNames());
  ApplyEnvironmentToFlags(ClientSecurityFlagNames());
  for (absl::string_view flag : kind.own_flags) ApplyEnvironmentToFlags({flag});
  ParseFlagsOnly(kind.binary, argc, argv, WorkerFlagRanges());
}

// Who this worker is and what it may use, from its flags.
struct WorkerIdentity {
  int slots = 1;
  int metrics_port = -1;
  int threads = 1;
  std::string worker_id;
  std::string node;
  std::string arch;
  std::map<std::string, std::string> labels;
  DatasetOptions datasets;
};

// Step 2: the flags every worker kind shares, checked.
StopWith CheckFlags(int argc, char** argv, const WorkerKind& kind, WorkerIdentity& identity) {
  // In range: WorkerFlagRanges.
  identity.slots = absl::GetFlag(FLAGS_slots);
  identity.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  identity.threads = absl::GetFlag(FLAGS_threads_per_trial);
  if (identity.threads == 0) {
    identity.threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / identity.slots);
  }
  identity.worker_id = absl::GetFlag(FLAGS_worker_id);
  if (identity.worker_id.empty()) identity.worker_id = absl::StrCat(Hostname(), "-", getpid());
  if (identity.worker_id.size() > kMaxWorkerIdBytes) {
    return ReportFlagError(kind.binary,
                           absl::StrFormat("--worker_id: %zu bytes, more than the %zu a "
                                           "scheduler takes",
                                           identity.worker_id.size(), kMaxWorkerIdBytes));
  }
  identity.node = absl::GetFlag(FLAGS_node_name);
  if (identity.node.empty() && std::getenv("NODE_NAME") != nullptr) {
    identity.node = std::getenv("NODE_NAME");
  }
  if (identity.node.empty()) identity.node = Hostname();
  if (identity.node.size() > kMaxWorkerTextBytes) {
    return ReportFlagError(kind.binary,
                           absl::StrFormat("--node_name (or $NODE_NAME): %zu bytes, more than "
                                           "the %zu a scheduler takes",
                                           identity.node.size(), kMaxWorkerTextBytes));
  }
  utsname machine{};
  uname(&machine);
  identity.arch = machine.machine;
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels(absl::GetFlag(FLAGS_labels));
  if (!labels.ok()) {
    // The message names the field ("labels: ..."); bad input exits 2 like any bad flag.
    return ReportFlagError(kind.binary, absl::StrCat("--", labels.status().message()));
  }
  identity.labels = *std::move(labels);
  absl::StatusOr<DatasetOptions> datasets = DatasetOptionsFromFlags(argc, argv);
  if (!datasets.ok()) {
    return ReportFlagError(kind.binary, datasets.status().message());
  }
  identity.datasets = *std::move(datasets);
  return std::nullopt;
}

// --models: of the kinds `setup` can run, those named, each once.
StopWith KeepNamedModels(int argc, char** argv, const WorkerKind& kind, WorkerSetup& setup) {
  // Given but empty (`--models=`, DHPT_MODELS=""): absl reads that as the default, all kinds,
  // which is not what someone naming kinds meant; refused like a name given twice or blank.
  const bool models_given = std::getenv("DHPT_MODELS") != nullptr ||
                            std::any_of(argv + 1, argv + argc, [](const char* argument) {
                              const absl::string_view a = argument;
                              return absl::StartsWith(a, "--models") || absl::StartsWith(a, "-models");
                            });
  const std::vector<std::string> only = absl::GetFlag(FLAGS_models);
  if (!models_given && only.empty()) return std::nullopt;
  std::vector<std::string> can;
  for (v1::Model::Kind known : setup.models) can.push_back(v1::Model::Kind_Name(known));
  std::vector<v1::Model::Kind> kept;
  std::string problem;
  for (const std::string& name : only) {
    v1::Model::Kind model;
    if (name.empty()) {
      problem = "an empty name (a comma at an end, or two in a row)";
    } else if (!v1::Model::Kind_Parse(name, &model) ||
               std::find(setup.models.begin(), setup.models.end(), model) == setup.models.end()) {
      problem = absl::StrCat(name, " is not a model kind this worker runs");
    } else if (std::find(kept.begin(), kept.end(), model) != kept.end()) {
      problem = absl::StrCat(name, " is named twice");
    }
    if (!problem.empty()) break;
    kept.push_back(model);
  }
  if (only.empty()) problem = "no model kind named (leave the flag out to run every kind)";
  if (!problem.empty()) {
    return ReportFlagError(kind.binary,
                           absl::StrCat("--models: ", problem,
                                        "; name each kind once, comma-separated, of ",
                                        absl::StrJoin(can, ", ")));
  }
  setup.models = std::move(kept);
  return std::nullopt;
}

// What the worker runs, and how it announces it.
struct Trainers {
  WorkerSetup setup;
  std::vector<std::string> command_names;  // --command programs; COMMAND is in setup.models.
  std::string command_workdir;             // Where their trials work (made at start).
  std::string command_workdir_made;        // The --command_workdir, if made at start.
  std::string energy_telemetry;            // The power rails' source, or empty.
};

// Step 3: the binary's own setup (device, trainers), --models, the XGBoost library, the
// datasets, --command programs and the board's power rails.
StopWith SetUpTrainers(int argc, char** argv, const WorkerKind& kind, const WorkerIdentity& identity,
                       Trainers& trainers) {
  absl::StatusOr<WorkerSetup> setup = kind.setup();
  if (!setup.ok()) {
    std::fprintf(stderr, "%s: %s\n", kind.binary, std::string(setup.status().message()).c_str());
    return absl::IsFailedPrecondition(setup.status()) ? 1 : 2;
  }
  trainers.setup = *std::move(setup);
  WorkerSetup& worker = trainers.setup;
  if (StopWith stop = KeepNamedModels(argc, argv, kind, worker)) return stop;
  // Checked once, in a child process, and only when this worker announces a kind that needs it:
  // it maps no XGBoost until its first such trial, and one whose library cannot be loaded would
  // announce XGBoost and fail every such trial.
  if (absl::c_any_of(worker.models, [](v1::Model::Kind model) {
        return model == v1::Model::XGBOOST || model == v1::Model::RANDOM_FOREST;
      })) {
    if (absl::Status xgboost = CheckXgboostModule(); !xgboost.ok()) {
      std::fprintf(stderr, "%s: %s\n", kind.binary, std::string(xgboost.message()).c_str());
      return 1;
    }
  }
  worker.runner.datasets = identity.datasets;
  if (absl::Status commands = CommandsFromFlags(RepeatedFlagValues(argc, argv, "command"),
                                                RepeatedFlagValues(argc, argv, "command_env"),
                                                std::string(kind.label) == "gpu", worker.runner);
      !commands.ok()) {
    return ReportFlagError(kind.binary, commands.message());
  }
  trainers.command_workdir = worker.runner.command_options.workdir_root;
  trainers.command_workdir_made = worker.runner.command_options.workdir_made;
  if (worker.runner.commands != nullptr) {
    trainers.command_names = worker.runner.commands->Names();
    worker.models.push_back(v1::Model::COMMAND);
  }
  worker.runner.command_options.node_name = identity.node;
  // Power rails are the board's, whichever worker binary runs on it.
  if (absl::StatusOr<std::unique_ptr<PowerRails>> rails = OpenPowerRails(); rails.ok()) {
    DHPT_LOG_INFO("trial energy from the %s power rails: %s", (*rails)->source(),
                  (*rails)->description());
    trainers.energy_telemetry = (*rails)->source();
    worker.runner.power = *std::move(rails);
  }
  return std::nullopt;
}

// This worker's own directory in the --command_workdir, and that one if this process made it
// (remembered, not judged by its name): once its trials are done, each goes if empty, however
// the worker ends. A directory the worker did not make stays.
class OwnCommandWorkdir {
 public:
  explicit OwnCommandWorkdir(const Trainers& trainers)
      : own_(trainers.command_names.empty() ? "" : trainers.command_workdir),
        made_(trainers.command_names.empty() ? "" : trainers.command_workdir_made) {}
  ~OwnCommandWorkdir() {
    if (!own_.empty()) RemoveOwnWorkdir(own_);
    if (!made_.empty()) rmdir(made_.c_str());
  }
  OwnCommandWorkdir(const OwnCommandWorkdir&) = delete;
  OwnCommandWorkdir& operator=(const OwnCommandWorkdir&) = delete;

 private:
  const std::string own_;
  const std::string made_;
};

// Step 4: the connection flags, and the Hello the worker announces itself with.
StopWith ConnectionFromFlags(const WorkerIdentity& identity, const Trainers& trainers,
                             WorkerClientOptions& options) {
  options.scheduler_address = absl::GetFlag(FLAGS_scheduler);
  options.keepalive.ping_interval_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_time));
  options.keepalive.ping_timeout_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_timeout));
  options.max_backoff = absl::GetFlag(FLAGS_max_reconnect_backoff);  // In range: WorkerFlagRanges.
  const WorkerSetup& setup = trainers.setup;
  v1::Hello& hello = options.hello;
  hello.set_worker_id(identity.worker_id);
  v1::WorkerCapabilities& caps = *hello.mutable_capabilities();
  caps.set_device_kind(setup.device_kind);
  caps.set_device_name(setup.device_name);
  caps.set_device_memory_bytes(setup.device_memory_bytes);
  caps.set_gpu_telemetry(setup.gpu_telemetry);
  caps.set_energy_telemetry(trainers.energy_telemetry);
  caps.mutable_labels()->insert(identity.labels.begin(), identity.labels.end());
  for (v1::Model::Kind model : setup.models) caps.add_models(model);
  for (const std::string& name : trainers.command_names) caps.add_commands(name);
  caps.set_slots(identity.slots);
  caps.set_node_name(identity.node);
  // What its trials may use: the pod's (cgroup's) limit, else the machine's memory.
  const std::optional<int64_t> memory_limit = MemoryCgroup::OfThisProcess().Limit();
  caps.set_memory_bytes(memory_limit ? static_cast<uint64_t>(*memory_limit)
                                     : static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                                           static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  // The CPU one trial may get, for the scheduler's speed prior: the quota (else the CPUs)
  // shared by its slots, and no more than the threads it trains with.
  const double cpus = CpuQuotaCoresOfThisProcess().value_or(
      static_cast<double>(std::max(1u, std::thread::hardware_concurrency())));
  caps.set_trial_cpu_cores(std::min(static_cast<double>(identity.threads), cpus / identity.slots));
  caps.set_arch(identity.arch);
  caps.set_version(DHPT_VERSION);
  return std::nullopt;
}

// Step 5: metrics, the trial slots and the connection, until SIGTERM or SIGINT; then running
// trials go back to the scheduler. The exit status.
int RunUntilSignal(const WorkerKind& kind, const WorkerIdentity& identity, const Trainers& trainers,
                   const WorkerClientOptions& options, TrialRunner& runner, bool gpu_observed) {
  WorkerMetrics metrics(kind.label, identity.node, identity.slots, gpu_observed);
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (identity.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint = MetricsEndpoint::Start(
        "0.0.0.0", identity.metrics_port,
        {{"component", absl::StrCat(kind.label, "-worker")}, {"kind", kind.label}, {"node", identity.node}},
        {metrics.registry()});
    if (!endpoint.ok()) {
      std::fprintf(stderr, "%s: %s\n", kind.binary, std::string(endpoint.status().message()).c_str());
      return 1;
    }
    metrics_endpoint = std::move(*endpoint);
    DHPT_LOG_INFO("metrics on :%d", metrics_endpoint->port());
  }
  WorkerCore core({.slots = identity.slots,
                   .threads_per_trial = identity.threads,
                   .observer = identity.metrics_port >= 0 ? &metrics : nullptr},
                  &runner);
  core.Start();
  WorkerClient client(options, &core);
  std::thread connection([&client] { client.Run(); });
  const WorkerSetup& setup = trainers.setup;
  std::vector<std::string> model_names;
  for (v1::Model::Kind model : setup.models) model_names.push_back(v1::Model::Kind_Name(model));
  DHPT_LOG_INFO("%s %s: %s device %s, runs %s; %d slots x %d threads, scheduler %s, labels %s",
                kind.binary, identity.worker_id,
                v1::WorkerCapabilities::DeviceKind_Name(setup.device_kind), setup.device_name,
                absl::StrJoin(model_names, ", "), identity.slots, identity.threads,
                options.scheduler_address,
                identity.labels.empty()
                    ? "none"
                    : absl::StrJoin(identity.labels, ",", absl::PairFormatter("=")));
  const DatasetOptions& data = identity.datasets;
  DHPT_LOG_INFO("CSV datasets: %s; at most %d bytes per file, %d bytes per dataset in memory",
                data.data_roots.empty() ? "none (no --data_root)"
                                        : absl::StrCat("under ", absl::StrJoin(data.data_roots, ", ")),
                data.max_dataset_file_bytes, data.max_dataset_bytes);
  if (!trainers.command_names.empty()) {
    DHPT_LOG_INFO("commands: %s; trials work in %s", absl::StrJoin(trainers.command_names, ", "),
                  trainers.command_workdir);
  }

  const int signal = WaitForTerminationSignal();
  DHPT_LOG_INFO("received %s; giving back running trials and stopping", strsignal(signal));
  core.Drain(absl::StrCat("received ", strsignal(signal)));  // Nothing new for us.
  core.Stop();    // Running trials end CANCELLED and go back, costing no attempt.
  client.Stop();
  connection.join();
  return 0;
}

}  // namespace

int WorkerMain(int argc, char** argv, const WorkerKind& kind) {
  ReexecWithBoundedOpenMpSpin(argv);
  ParseWorkerFlags(argc, argv, kind);
  WorkerIdentity identity;
  if (StopWith stop = CheckFlags(argc, argv, kind, identity)) return *stop;
  Trainers trainers;
  if (StopWith stop = SetUpTrainers(argc, argv, kind, identity, trainers)) return *stop;
  const OwnCommandWorkdir workdir(trainers);

  BlockTerminationSignals();
  absl::StatusOr<ChannelSecurity> security = MakeChannelSecurity(ClientSecurityFromFlags());
  if (!security.ok()) {
    return ReportFlagError(kind.binary, security.status().message());
  }
  const std::shared_ptr<GpuReader> gpu = trainers.setup.runner.gpu;  // Also read by the heartbeats.
  // The runner takes the trainers' options; the rest of trainers.setup stays for the Hello.
  TrialRunner runner(std::move(trainers.setup.runner));
  if (const std::string study = absl::GetFlag(FLAGS_sequential_study); !study.empty()) {
    return RunSequentialStudy(study, runner,
                              {.threads_per_trial = identity.threads,
                               .worker_id = identity.worker_id,
                               .node_name = identity.node});
  }
  WorkerClientOptions options;
  options.security = *std::move(security);
  options.gpu = gpu.get();
  if (StopWith stop = ConnectionFromFlags(identity, trainers, options)) return *stop;
  return RunUntilSignal(kind, identity, trainers, options, runner, gpu != nullptr);
}

}  // namespace dhpt::worker
