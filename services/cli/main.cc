// dhpt: the command line of DHPT. `dhpt local` runs a whole study on this machine; the other
// commands talk to a scheduler (--scheduler, default $DHPT_SCHEDULER or localhost:50051).

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "services/analysis/importance.h"
#include "services/analysis/plot_data.h"
#include "services/cli/ask_tell.h"
#include "services/cli/cli_json.h"
#include "services/cli/compare_command.h"
#include "services/cli/compare_report.h"
#include "services/cli/demo_studies.h"
#include "services/cli/extend_command.h"
#include "services/cli/insight_command.h"
#include "services/cli/local_cluster.h"
#include "services/cli/pareto_report.h"
#include "services/cli/report.h"
#include "services/cli/study_client.h"
#include "services/cli/study_file.h"
#include "services/cli/validate_command.h"
#include "services/cli/watch_progress.h"
#include "services/cli/terminal_text.h"
#include "services/cli/trial_view.h"
#include "services/common/client_security_flags.h"
#include "services/common/env_flags.h"
#include "services/common/flag_ranges.h"
#include "services/common/input_file.h"
#include "services/common/status_macros.h"
#include "services/scheduler/scheduler_core.h"

ABSL_FLAG(std::string, scheduler, "",
          "the scheduler's HOST:PORT (default localhost:50051); compare: run the framework "
          "side on this scheduler instead of a local one");
ABSL_FLAG(std::string, study, "", "local, compare: the study file (YAML or JSON) to run");
ABSL_FLAG(std::optional<int>, max_trials, std::nullopt,
          "extend: the study's new max_trials (the trials it has made count towards it)");
ABSL_FLAG(std::optional<int>, parallel_trials, std::nullopt,
          "extend: the study's new parallel_trials (0: no limit)");
ABSL_FLAG(std::optional<std::string>, max_failed_trials, std::nullopt,
          "extend: the study's new max_failed_trials, or none for no limit");
ABSL_FLAG(std::optional<std::string>, trial_timeout, std::nullopt,
          "extend: the study's new trial_timeout (600s, 10m, 1h30m), or none");
ABSL_FLAG(std::string, demo, "xgboost",
          "local, compare: the built-in study to run when --study is not set");
ABSL_FLAG(std::string, early_stopping, "",
          "local, compare: off, median, asha or hyperband (with their defaults) in place of the study's "
          "early_stopping; unset keeps the study's");
ABSL_FLAG(int, workers, -1,
          "local: CPU workers to start (default 2, or 0 for an AUTOENCODER study)");
ABSL_FLAG(int, gpu_workers, -1,
          "local: GPU workers (dhpt-gpu-worker) to start (default 1 for an AUTOENCODER study, "
          "else 0); without a CUDA device they train on the CPU, for studies that set "
          "allow_cpu_fallback");
ABSL_FLAG(int, slots, 1, "local: trials each worker runs at once");
ABSL_FLAG(int, threads_per_trial, 0, "local: threads per trial; 0 = cores / (workers * slots)");
ABSL_FLAG(std::vector<std::string>, data_root, {},
          "local, compare: directories the workers may read CSV datasets from (the workers' "
          "--data_root), comma separated; default: the current directory");
ABSL_FLAG(bool, dashboard, true,
          "local: also start the web dashboard (dhpt-dashboard, beside dhpt) and print its address");
ABSL_FLAG(std::string, log, "", "local: file for the services' logs (default: a temp file)");
ABSL_FLAG(std::vector<std::string>, command, {},
          "local: register a program for COMMAND studies with every worker it starts, as "
          "dhpt-cpu-worker --command takes it: NAME=PATH [ARG ...], quoted when it has "
          "arguments; repeat the flag for more");
ABSL_FLAG(std::string, labels, "",
          "local: labels its workers announce, KEY=VALUE separated by commas, for a study with a "
          "worker_selector");
ABSL_FLAG(bool, json, false, "trials, best, pareto, studies, workers: print JSON instead of a table");
ABSL_FLAG(std::string, matrix, "", "compare: a file of studies x algorithms to compare, cell by cell");
ABSL_FLAG(std::string, out, "",
          "compare: the folder for report.md, report.json and the plots (default "
          "compare-<study> or compare-<matrix file name>); plot, report: the folder for the "
          "plots and report.html (default plots-<study>, report-<study>)");
ABSL_FLAG(std::string, evaluator, "ped-anova",
          "importance, plot, report: how parameter importance is computed (ped-anova or fanova)");
ABSL_FLAG(std::string, kind, "all",
          "plot: history, history-time, importance, parallel, slice, contour, intermediate, edf, "
          "timeline, pareto, hypervolume, or all");
ABSL_FLAG(std::vector<std::string>, params, {},
          "importance, plot: only these parameters (contour: exactly two)");
ABSL_FLAG(int, objective, 0,
          "importance, plot: which objective of a multi-objective study (0 is the first)");
ABSL_FLAG(bool, watch, false, "submit: watch the study until it ends");
ABSL_FLAG(std::string, plot, "",
          "pareto, local, submit --watch: draw a multi-objective study's front into this folder "
          "(pareto.svg, .png)");
ABSL_FLAG(bool, force, false, "delete: stop the study first if it is still running");
ABSL_FLAG(std::string, client, "",
          "ask, tell: who evaluates the trials (SuggestTrials' client_id; default: this host's "
          "name). Use the same one after a restart to get unfinished trials back");
ABSL_FLAG(int, count, 1, "ask: trials to ask for at once");
ABSL_FLAG(std::string, infeasible, "",
          "tell: the trial could not be evaluated, for this reason (instead of metrics)");
ABSL_FLAG(bool, dry_run, false,
          "submit: check the study file (every error at once, as dhpt validate) and create "
          "nothing");
ABSL_FLAG(std::string, warm_start, "",
          "submit: first add the completed trials of this earlier study (same parameters)");

namespace dhpt::cli {
namespace {

struct Command {
  const char* usage;
  const char* help;
};

const std::map<std::string, Command>& Commands() {
  static const auto* const kCommands = new std::map<std::string, Command>{
      {"local",
       {"dhpt local [--study=FILE | --demo=NAME] [--workers=N] [--gpu-workers=M] [--slots=N]\n"
        "           [--threads-per-trial=N] [--data-root=DIR,...]\n"
        "           [--early-stopping=off|median|asha|hyperband]\n"
        "           [--command='NAME=PATH [ARG...]']... [--labels=KEY=VALUE,...] [--plot=DIR]\n"
        "           [--log=FILE] [--dashboard=false]",
        "Starts a scheduler, N CPU workers and M GPU workers on this machine, runs the study (the "
        "demo\nXGBoost study when none is given), shows live progress, prints the results, and "
        "stops every\nprocess it started (Ctrl-C included). AUTOENCODER studies get one GPU worker "
        "and no CPU\nworkers unless told otherwise. Demos: xgboost, random-forest, autoencoder, "
        "branin,\nxgboost-edge (r2 against inference time and model size, within a latency and size "
        "budget;\n--plot=DIR draws its front).\nWorkers read CSV datasets only under --data-root (default: the current "
        "directory).\n--command registers your own program with every worker, for a COMMAND study (quote it: "
        "--command='gbr=/usr/bin/python3\ntrain.py'); --labels gives the workers labels for a study's "
        "worker_selector. A study that none\nof the workers started can run (no such command, no "
        "matching labels, no CUDA device for an\nAUTOENCODER without allow_cpu_fallback) is refused "
        "with what to change, rather than left waiting.\nThe services' logs go to --log (default "
        "/tmp/dhpt-local-PID.log). The web dashboard (dhpt-dashboard) starts too,\nits address "
        "printed, while the study runs (--dashboard=false: not)."}},
      {"compare",
       {"dhpt compare [--study=FILE | --demo=NAME] [--workers=N] [--gpu-workers=M] [--slots=N]\n"
        "             [--threads-per-trial=N] [--data-root=DIR,...] [--scheduler=HOST:PORT]\n"
        "             [--early-stopping=off|median|asha|hyperband] [--out=DIR]\n"
        "  dhpt compare --matrix=FILE [--out=DIR] [same options]",
        "Runs the study twice with the same seed and budget: sequentially (one process, trial "
        "after\ntrial, the same trainers, no scheduler) and through the framework (a local "
        "scheduler and N\nworkers, or the scheduler given with --scheduler), then prints wall "
        "time and speedup, CPU\ntime and utilisation, peak memory, GPU use, best and median "
        "objective, trials and overhead\nside by side, and writes report.md, report.json and "
        "plots (SVG and PNG, by gnuplot) to --out.\nThreads per trial and early stopping are the same in both runs. "
        "--matrix runs every study of FILE with every\nalgorithm (one cell each) and a summary; "
        "run it again to resume an interrupted matrix.\nMatrix file: studies: [{demo: xgboost}, "
        "{file: my-study.yaml}], algorithms: [RANDOM, TPE],\nmax_trials: 20, seed: 1 (see "
        "README). Workers read CSV datasets only under --data-root\n(default: the current "
        "directory)."}},
      {"workers",
       {"dhpt workers [--json] [--scheduler=HOST:PORT]",
        "Lists the workers connected to the scheduler: device, models, slots, running trials, "
        "node."}},
      {"submit",
       {"dhpt submit FILE [--watch] [--warm-start=STUDY] [--dry-run] [--scheduler=HOST:PORT]",
        "Submits the study in FILE (YAML or JSON, as for grpcurl). Submitting the same spec "
        "again is\nharmless; a different spec under the same name is refused. --warm-start "
        "first adds the\ncompleted trials of an earlier study with the same parameters, for the "
        "algorithm to learn\nfrom (they do not count towards max_trials; run twice, it adds "
        "nothing more).\n--dry-run checks the file as dhpt validate does and submits nothing."}},
      {"validate",
       {"dhpt validate FILE",
        "Checks the study in FILE as the scheduler would and lists every error at once "
        "(each model's\nhyperparameter ranges included, from the catalogue the workers train "
        "by), without a\nscheduler and without creating anything. Exit status 0: valid; 1: "
        "errors. The same as\ndhpt submit FILE --dry-run."}},
      {"ask",
       {"dhpt ask STUDY [--count=N] [--client=ID] [--json] [--scheduler=HOST:PORT]",
        "Asks an EXTERNAL study for trials to evaluate and prints one line per trial: its number, "
        "then\nits parameters as --name=value. The trials are leased to --client until told or "
        "the lease\nruns out; asking again with the same client gives its unfinished trials "
        "back first. Exit\nstatus 3: the study has ended; 4: no trial now (parallel_trials "
        "reached), ask again later."}},
      {"tell",
       {"dhpt tell STUDY TRIAL METRIC=VALUE... [--client=ID] [--infeasible=REASON]",
        "Completes trial number TRIAL of an EXTERNAL study with its metrics (every objective's), "
        "or\nmarks it FAILED with --infeasible. Repeating the same tell is harmless."}},
      {"enqueue",
       {"dhpt enqueue STUDY NAME=VALUE... [--scheduler=HOST:PORT]",
        "Asks the study to evaluate this point before its algorithm's own suggestions (every "
        "parameter,\nby name). It counts towards max_trials."}},
      {"watch",
       {"dhpt watch STUDY [--scheduler=HOST:PORT]",
        "Shows a live progress line until the study ends, then its summary; a line for each "
        "trial that\nfails, with its reason."}},
      {"trials",
       {"dhpt trials STUDY [--json] [--scheduler=HOST:PORT]",
        "Lists the study's trials with parameters and measurements, and why the failed ones "
        "failed\n(cut to fit; dhpt trial STUDY NUMBER shows the whole error)."}},
      {"trial",
       {"dhpt trial STUDY NUMBER [--json] [--scheduler=HOST:PORT]",
        "Shows one trial in full: state, parameters, objective and every measurement, each "
        "attempt and\nwhere it ran, times, the last values of its progress curve, and the whole "
        "error of a failed\ntrial (a command's stderr tail included)."}},
      {"best",
       {"dhpt best STUDY [--json] [--scheduler=HOST:PORT]", "Shows the best completed trial."}},
      {"pareto",
       {"dhpt pareto STUDY [--json] [--plot=DIR] [--scheduler=HOST:PORT]",
        "Shows the Pareto front of a study with several objectives: its non-dominated feasible "
        "trials,\ntheir objectives, constrained metrics and parameters, and the front's "
        "hypervolume. --plot=DIR\nalso draws DIR/pareto.svg and .png (gnuplot): every completed "
        "trial, the infeasible ones and\nthe front, one panel per pair of objectives."}},
      {"importance",
       {"dhpt importance STUDY [--evaluator=ped-anova|fanova] [--objective=N] [--params=a,b]\n"
        "                [--json] [--scheduler=HOST:PORT]",
        "Shows which hyperparameters mattered: each parameter's share of how the objective "
        "varied over\nthe completed trials, as a table with bars. PED-ANOVA (the default) "
        "compares where the best\n10% of trials lie with where all lie; fANOVA fits a random "
        "forest and measures each\nparameter's main effect (docs/importance.md)."}},
      {"plot",
       {"dhpt plot STUDY [--kind=KIND|all] [--out=DIR] [--params=a,b] [--objective=N]\n"
        "          [--evaluator=ped-anova|fanova] [--scheduler=HOST:PORT]",
        "Draws the study's plots as SVG and PNG (gnuplot) into DIR (default plots-STUDY): "
        "history,\nhistory-time, importance, parallel, slice, contour (two parameters: --params, "
        "else the two\nmost important), intermediate, edf, timeline, and for several objectives "
        "pareto and\nhypervolume. The data and gnuplot scripts stay next to them."}},
      {"report",
       {"dhpt report STUDY [--out=DIR] [--evaluator=ped-anova|fanova] [--scheduler=HOST:PORT]",
        "Writes DIR/report.html (default report-STUDY): one self-contained page with the "
        "study's summary,\nbest trial, parameter importance, every plot (inline SVG) and the "
        "trial table with each\nfailed trial's reason. It needs no network to open."}},
      {"studies",
       {"dhpt studies [--json] [--scheduler=HOST:PORT]", "Lists the scheduler's studies."}},
      {"stop",
       {"dhpt stop STUDY [--scheduler=HOST:PORT]",
        "Stops the study: no new trials, running ones are cancelled."}},
      {"extend", {kExtendUsage, kExtendHelp}},
      {"delete",
       {"dhpt delete STUDY [--force] [--scheduler=HOST:PORT]",
        "Deletes the study and all its trials from the scheduler and its database. A running "
        "study\nis refused unless --force (which stops it first). Export it first to keep "
        "a copy."}},
      {"export",
       {"dhpt export STUDY [--scheduler=HOST:PORT] > STUDY.json",
        "Prints the study (spec, state), every trial and every intermediate value as one JSON "
        "document:\na backup to restore with dhpt import, or the history to analyse elsewhere "
        "(see docs/storage.md)."}},
      {"import",
       {"dhpt import STUDY.json [--scheduler=HOST:PORT]",
        "Restores a study from a dhpt export file: trial numbers, states, attempts, workers, "
        "times,\nerrors and intermediate values come back; the scheduler gives the trials new "
        "ids, and\ntrials that were pending or running wait for a worker again. Refused, with "
        "nothing imported,\nwhen the scheduler has a study of that name with another spec or "
        "other trials (see\ndocs/storage.md)."}},
  };
  return *kCommands;
}

void PrintUsage() {
  std::cout << "dhpt " DHPT_VERSION " - distributed hyperparameter tuning\n\nUsage:\n";
  for (const auto& [name, command] : Commands()) std::cout << "  " << command.usage << "\n";
  std::cout << "\nA scheduler serving TLS: --tls_ca=CA.pem [--tls_cert=C --tls_key=K] "
               "[--auth_token_file=F] [--tls_server_name=N].\n";
  std::cout << "\n'dhpt COMMAND --help' explains a command. Flags may also be set as DHPT_<FLAG>"
               " in the environment.\n";
}

int Fail(const absl::Status& status) {
  PrintRefusal(std::cerr, status);
  // A plaintext client to a TLS scheduler sees only a closed socket.
  if (absl::IsUnavailable(status) && absl::StrContains(status.message(), "failed to connect") &&
      ClientSecurityFromFlags().tls_ca_file.empty()) {
    std::cerr << "dhpt: is a scheduler listening at --scheduler? One that serves TLS needs "
                 "--tls_ca (and --auth_token_file if it asks for a token)\n";
  }
  return 1;
}

// Words that do not fit the command: what was expected, then the command's usage. Exit status
// 2, as for a flag that does not parse.
int FailUsage(const std::string& command, absl::string_view expected) {
  PrintRefusal(std::cerr, absl::InvalidArgumentError(expected), Commands().at(command).usage);
  return 2;
}

// The values the numeric flags take (docs/cli.md, "Flags").
std::vector<FlagRange> CliFlagRanges() {
  return {
      FlagRange::Integer("workers", -1, 256, "-1: the default, 2, or 0 for an AUTOENCODER study"),
      FlagRange::Integer("gpu_workers", -1, 256,
                         "-1: the default, 1 for an AUTOENCODER study, else 0"),
      FlagRange::Integer("slots", 1, 1024),
      FlagRange::Integer("threads_per_trial", 0, 1024, "0: cores / (workers x slots)"),
      FlagRange::Integer("count", 1, scheduler::kMaxSuggestCount),
      FlagRange::Integer("objective", 0, FlagRange::kNoMax, "0: the first"),
      // gRPC takes port 103097 as 37561 (16 bits): the CLI reached another port in silence.
      FlagRange::OptionalAddress("scheduler", 1,
                                 "empty: localhost:50051, or for compare a scheduler of its own"),
  };
}

// Draws the front into --plot's folder, when given.
absl::Status DrawPlotIfAsked(const v1::Study& study, const std::vector<v1::Trial>& trials,
                             const v1::GetParetoFrontResponse& front) {
  const std::string dir = absl::GetFlag(FLAGS_plot);
  if (dir.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<std::string> plots, DrawParetoPlot(study, trials, front, dir));
  std::cerr << "plots: " << absl::StrJoin(plots, ", ") << " in " << dir << "\n";
  return absl::OkStatus();
}

int PrintResults(StudyClient& client, const std::string& name) {
  absl::StatusOr<v1::Study> study = client.GetStudy(name);
  if (!study.ok()) return Fail(study.status());
  absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(name);
  if (!trials.ok()) return Fail(trials.status());
  std::cout << "\n" << TrialsTable(study->spec(), *trials) << "\n" << StudySummary(*study);
  if (study->spec().objectives_size() >= 2) {
    absl::StatusOr<v1::GetParetoFrontResponse> front = client.GetParetoFront(name);
    if (!front.ok()) return Fail(front.status());
    std::cout << "\n" << ParetoTable(*study, *front);
    if (absl::Status drawn = DrawPlotIfAsked(*study, *trials, *front); !drawn.ok()) return Fail(drawn);
  }
  return study->state() == v1::Study::COMPLETED ? 0 : 1;
}

// Runs `body` with SIGINT/SIGTERM turned into a call of `on_signal` on a helper thread.
// Returns whether a signal arrived.
// The signals are blocked from the start of main, so one that arrives earlier waits for it.
sigset_t InterruptSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

bool WithInterrupts(const std::function<void()>& on_signal, const std::function<void()>& body) {
  const sigset_t set = InterruptSignals();
  std::atomic<bool> interrupted = false;
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&set, &signal);
    if (signal != SIGUSR1) {
      interrupted = true;
      on_signal();
    }
  });
  body();
  pthread_kill(waiter.native_handle(), SIGUSR1);
  waiter.join();
  return interrupted;
}

// Every --command of the command line (absl keeps only the last one), set by main.
std::vector<std::string>& CommandFlagValues() {
  static auto* const values = new std::vector<std::string>();
  return *values;
}

LocalClusterRequest LocalClusterFlags() {
  return {.cpu_workers = absl::GetFlag(FLAGS_workers),
          .gpu_workers = absl::GetFlag(FLAGS_gpu_workers),
          .slots = absl::GetFlag(FLAGS_slots),
          .threads_per_trial = absl::GetFlag(FLAGS_threads_per_trial),
          .data_roots = absl::GetFlag(FLAGS_data_root),
          .commands = CommandFlagValues().empty() ? absl::GetFlag(FLAGS_command)
                                                  : CommandFlagValues(),
          .labels = absl::GetFlag(FLAGS_labels)};
}

// Waits until every worker of the local cluster is connected, then refuses a study none of
// them can run: it would wait for ever.
absl::Status CheckLocalWorkers(LocalCluster& cluster, StudyClient& client, int workers,
                               const v1::StudySpec& spec, const std::string& log_file) {
  const absl::Time deadline = absl::Now() + kLocalWorkersConnectTimeout;
  while (true) {
    if (std::string exited = cluster.ExitedChild(); !exited.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(exited, " exited at start: see its message in ", log_file));
    }
    ASSIGN_OR_RETURN(std::vector<v1::Worker> connected, client.ListWorkers());
    if (static_cast<int>(connected.size()) >= workers) {
      std::vector<v1::WorkerCapabilities> capabilities;
      for (const v1::Worker& worker : connected) capabilities.push_back(worker.capabilities());
      return CheckLocalWorkersCanRun(spec, capabilities);
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          connected.size(), " of ", workers, " workers connected in ",
          absl::FormatDuration(kLocalWorkersConnectTimeout), ": see ", log_file));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// The study of --study or --demo, with --early_stopping applied.
absl::StatusOr<v1::StudySpec> StudyFromFlags() {
  absl::StatusOr<v1::StudySpec> spec = absl::GetFlag(FLAGS_study).empty()
                                           ? DemoStudy(absl::GetFlag(FLAGS_demo))
                                           : ReadStudyFile(absl::GetFlag(FLAGS_study));
  if (!spec.ok()) return spec.status();
  RETURN_IF_ERROR(OverrideEarlyStopping(absl::GetFlag(FLAGS_early_stopping), *spec));
  return spec;
}

int RunLocal() {
  absl::StatusOr<v1::StudySpec> spec = StudyFromFlags();
  if (IsUnusableInputFile(spec.status())) return FailUsage("local", spec.status().message());
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<LocalClusterOptions> resolved = ResolveLocalCluster(*spec, LocalClusterFlags());
  if (!resolved.ok()) return Fail(resolved.status());
  LocalClusterOptions& options = *resolved;
  options.binary_dir = ExecutableDir();
  const int workers = options.cpu_workers + options.gpu_workers;
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  options.log_file = absl::GetFlag(FLAGS_log).empty()
                         ? absl::StrCat("/tmp/dhpt-local-", getpid(), ".log")
                         : absl::GetFlag(FLAGS_log);
  if (workers * options.slots > cores) {
    std::cerr << "warning: " << workers * options.slots << " trial slots on " << cores
              << " cores: trials will compete for CPU\n";
  }

  options.dashboard = absl::GetFlag(FLAGS_dashboard);
  absl::StatusOr<LocalCluster> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) return Fail(cluster.status());
  std::cout << "scheduler on " << cluster->scheduler_address() << ", " << options.cpu_workers
            << " CPU workers, " << options.gpu_workers << " GPU workers, each " << options.slots
            << " slots x " << options.threads_per_trial << " threads; logs in "
            << options.log_file << "\n";
  if (!cluster->dashboard_url().empty()) {
    std::cout << "dashboard at " << cluster->dashboard_url() << " (while the study runs)\n";
  }
  auto client = std::make_unique<StudyClient>(cluster->scheduler_address());
  int exit_code = 0;
  const bool interrupted = WithInterrupts([&] { client->Cancel(); }, [&] {
    if (absl::Status usable = CheckLocalWorkers(*cluster, *client, workers, *spec, options.log_file);
        !usable.ok()) {
      exit_code = Fail(usable);
      return;
    }
    absl::StatusOr<v1::Study> created = client->CreateStudy(*spec);
    if (!created.ok()) {
      exit_code = Fail(created.status());
      return;
    }
    absl::Status watched = WatchToEnd(*client, spec->name());
    if (!watched.ok() && !absl::IsCancelled(watched)) {
      exit_code = Fail(watched);
      return;
    }
    if (absl::IsCancelled(watched)) return;
    exit_code = PrintResults(*client, spec->name());
  });
  client.reset();
  cluster->Stop();
  if (interrupted) {
    std::cout << "\ninterrupted: stopped the scheduler and workers\n";
    return 130;
  }
  return exit_code;
}

// Progress lines of a comparison: rewritten in place on a terminal, only the final ones
// otherwise.
std::function<void(const std::string&, bool)> CompareProgress() {
  const bool tty = isatty(STDOUT_FILENO);
  return [tty](const std::string& line, bool final) {
    if (tty) {
      std::cout << "\r\033[K" << line << (final ? "\n" : "") << std::flush;
    } else if (final) {
      std::cout << line << std::endl;
    }
  };
}

int RunCompare() {
  CompareOptions options;
  options.binary_dir = ExecutableDir();
  options.scheduler = absl::GetFlag(FLAGS_scheduler);
  absl::StatusOr<ChannelSecurity> security = MakeChannelSecurity(ClientSecurityFromFlags());
  if (!security.ok()) return Fail(security.status());
  options.security = *security;
  options.local = LocalClusterFlags();
  options.log_file = absl::GetFlag(FLAGS_log).empty()
                         ? absl::StrCat("/tmp/dhpt-compare-", getpid(), ".log")
                         : absl::GetFlag(FLAGS_log);
  options.progress = CompareProgress();
  Comparison comparison(options);
  int exit_code = 0;
  const std::string matrix_file = absl::GetFlag(FLAGS_matrix);
  const bool interrupted = WithInterrupts([&] { comparison.Cancel(); }, [&] {
    if (!matrix_file.empty()) {
      absl::StatusOr<v1::CompareMatrix> matrix = ReadMatrixFile(matrix_file);
      if (!matrix.ok()) {
        exit_code = Fail(matrix.status());
        return;
      }
      const std::filesystem::path path(matrix_file);
      const std::string out = absl::GetFlag(FLAGS_out).empty()
                                  ? absl::StrCat("compare-", path.stem().string())
                                  : absl::GetFlag(FLAGS_out);
      std::cout << "matrix " << matrix_file << " -> " << out << " (logs in " << options.log_file
                << ")\n";
      absl::StatusOr<v1::MatrixReport> report =
          comparison.RunMatrix(*matrix, path.parent_path().string(), out);
      if (!report.ok()) {
        exit_code = Fail(report.status());
        return;
      }
      std::cout << "\n" << MatrixTable(*report) << "\nreport: " << out << "/report.md\n";
      return;
    }
    absl::StatusOr<v1::StudySpec> spec = StudyFromFlags();
    if (!spec.ok()) {
      exit_code = Fail(spec.status());
      return;
    }
    const std::string out = absl::GetFlag(FLAGS_out).empty()
                                ? absl::StrCat("compare-", spec->name())
                                : absl::GetFlag(FLAGS_out);
    std::cout << "comparing " << spec->name() << " -> " << out << " (logs in "
              << options.log_file << ")\n";
    absl::StatusOr<v1::CompareReport> report = comparison.Run(*spec, out);
    if (!report.ok()) {
      exit_code = Fail(report.status());
      return;
    }
    std::cout << "\n" << RunsLines(*report) << "\n" << ComparisonTable(*report);
    for (const std::string& warning : report->warnings()) {
      std::cout << "warning: " << warning << "\n";
    }
    std::cout << "\nreport: " << out << "/report.md (and report.json, plots)\n";
  });
  if (interrupted) {
    std::cout << "\ninterrupted: stopped every process the comparison started\n";
    return 130;
  }
  return exit_code;
}

std::string ClientId() {
  if (std::string client = absl::GetFlag(FLAGS_client); !client.empty()) return client;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host[0] != '\0' ? host : "dhpt-cli";
}

// ask, tell and enqueue.
int RunAskTell(StudyClient& client, const std::string& name, const std::vector<std::string>& args) {
  const size_t fixed = name == "tell" ? 2 : 1;
  if (args.size() < fixed || (name == "ask" && args.size() != 1)) {
    return FailUsage(name, absl::StrCat("expected ", fixed == 2 ? "a study and a trial number"
                                                                : "a study"));
  }
  const std::vector<std::string> words(args.begin() + fixed, args.end());
  if (name == "ask") {
    v1::SuggestTrialsRequest request;
    request.set_study(args[0]);
    request.set_count(absl::GetFlag(FLAGS_count));
    request.set_client_id(ClientId());
    absl::StatusOr<v1::SuggestTrialsResponse> response = client.SuggestTrials(request);
    // RESOURCE_EXHAUSTED passes: the scheduler near its memory cap, or too many calls already
    // waiting for the study's next trial. Asking again later is the answer, as for a full study.
    if (absl::IsResourceExhausted(response.status())) {
      std::cerr << "no trial for now (ask again later): " << response.status().message() << "\n";
      return kExitNoTrialNow;
    }
    if (!response.ok()) return Fail(response.status());
    if (absl::GetFlag(FLAGS_json)) {
      std::cout << CliJson(*response);
    } else {
      for (const v1::Trial& trial : response->trials()) std::cout << AskLine(trial) << "\n";
    }
    if (response->trials_size() > 0) return 0;
    const v1::Study::State state = response->study_state();
    if (state == v1::Study::COMPLETED || state == v1::Study::STOPPED ||
        state == v1::Study::FAILED) {
      std::cerr << "study " << args[0] << " has ended (" << v1::Study::State_Name(state) << ")\n";
      return kExitStudyEnded;
    }
    std::cerr << "no trial for now (parallel_trials reached, or all are given out); ask again "
                 "later\n";
    return kExitNoTrialNow;
  }
  if (name == "tell") {
    v1::CompleteTrialRequest request;
    request.set_study(args[0]);
    int64_t number = 0;
    // Words that do not parse are usage errors, found before anything is sent (exit 2).
    if (!absl::SimpleAtoi(args[1], &number)) {
      return FailUsage(name, absl::StrCat("TRIAL: \"", args[1],
                                          "\" is not a trial number (dhpt ask prints it first)"));
    }
    request.set_trial(number);
    request.set_client_id(ClientId());
    request.set_infeasible_reason(absl::GetFlag(FLAGS_infeasible));
    absl::StatusOr<google::protobuf::Map<std::string, double>> metrics = ParseMetricWords(words);
    if (!metrics.ok()) return FailUsage(name, metrics.status().message());
    if (metrics->empty() == request.infeasible_reason().empty()) {
      return FailUsage(name, "give the trial's metrics as METRIC=VALUE words, or --infeasible=REASON "
                             "when it could not be evaluated (not both)");
    }
    *request.mutable_metrics() = *std::move(metrics);
    absl::StatusOr<v1::Trial> trial = client.CompleteTrial(request);
    if (const std::optional<std::string> oversized =
            OversizedTellReason(trial.status(), request)) {
      // Refused before the scheduler read it: failed with the reason, the trial would
      // otherwise stay RUNNING until its lease ran out. Marked FAILED as the Python client
      // does; a later tell of this trial is then refused.
      request.set_infeasible_reason(OversizedTellFailure(*oversized, request));
      request.clear_metrics();
      const absl::StatusOr<v1::Trial> failed = client.CompleteTrial(request);
      std::cerr << "dhpt tell: " << *oversized << "\n"
                << (failed.ok() ? absl::StrCat("trial ", number, " is marked FAILED with this reason")
                                : absl::StrCat("trial ", number, " could not be marked FAILED either (",
                                               failed.status().message(), ")"))
                << "\n";
      return 1;
    }
    if (!trial.ok()) return Fail(trial.status());
    std::cout << "trial " << trial->number() << " " << v1::Trial::State_Name(trial->state())
              << (trial->error().empty() ? "" : ": " + trial->error()) << "\n";
    return 0;
  }
  v1::EnqueueTrialRequest request;
  request.set_study(args[0]);
  absl::StatusOr<google::protobuf::Map<std::string, google::protobuf::Value>> params =
      ParseParameterWords(words);
  if (!params.ok()) return FailUsage(name, params.status().message());
  if (params->empty()) return FailUsage(name, "give the trial's parameters as NAME=VALUE words");
  *request.mutable_params() = *std::move(params);
  absl::StatusOr<v1::Trial> trial = client.EnqueueTrial(request);
  if (!trial.ok()) return Fail(trial.status());
  std::cout << "enqueued as trial " << trial->number() << "\n";
  return 0;
}

// dhpt trial STUDY NUMBER. The trial and its curves come from the study's export (the one
// call that returns curves).
int RunTrialCommand(StudyClient& client, const std::vector<std::string>& args, bool json) {
  int64_t number = -1;
  if (args.size() != 2 || !absl::SimpleAtoi(args[1], &number) || number < 0) {
    return FailUsage("trial",
                     "expected a study and a trial number (dhpt trials STUDY lists them)");
  }
  absl::StatusOr<v1::StudyExport> exported = client.ExportStudy(args[0]);
  if (!exported.ok()) return Fail(exported.status());
  for (const v1::Trial& trial : exported->trials()) {
    if (trial.number() != number) continue;
    if (json) {  // As dhpt trials --json prints each trial (it printed the export's form).
      std::cout << CliJson(trial);
      return 0;
    }
    const std::vector<v1::TrialCurve> curves(exported->curves().begin(), exported->curves().end());
    std::cout << TrialView(exported->study().spec(), trial, curves);
    return 0;
  }
  return Fail(absl::NotFoundError(absl::StrCat("study ", args[0], " has no trial ", number, " (it has ",
                                               exported->trials_size(), "; dhpt trials ", args[0],
                                               " lists them)")));
}

int RunCommand(const std::string& name, const std::vector<std::string>& args) {
  if (name == "local") return RunLocal();
  if (name == "compare") return RunCompare();
  if (name == "validate" || (name == "submit" && absl::GetFlag(FLAGS_dry_run))) {
    if (args.size() != 1) {
      return FailUsage(name, "expected one study file");
    }
    return RunValidate(args[0], std::cout, std::cerr);
  }
  const std::string scheduler = absl::GetFlag(FLAGS_scheduler);
  absl::StatusOr<ChannelSecurity> security = MakeChannelSecurity(ClientSecurityFromFlags());
  if (!security.ok()) return Fail(security.status());
  StudyClient client(scheduler.empty() ? "localhost:50051" : scheduler, *security);
  const bool json = absl::GetFlag(FLAGS_json);
  if (name == "studies") {
    absl::StatusOr<std::vector<v1::Study>> studies = client.ListStudies();
    if (!studies.ok()) return Fail(studies.status());
    if (json) {
      v1::ListStudiesResponse response;
      for (const v1::Study& s : *studies) *response.add_studies() = s;
      std::cout << CliJson(response);
    } else {
      std::cout << StudiesTable(*studies);
    }
    return 0;
  }
  if (name == "workers") {
    absl::StatusOr<std::vector<v1::Worker>> workers = client.ListWorkers();
    if (!workers.ok()) return Fail(workers.status());
    if (json) {
      v1::ListWorkersResponse response;
      for (const v1::Worker& w : *workers) *response.add_workers() = w;
      std::cout << CliJson(response);
    } else {
      std::cout << WorkersTable(*workers);
    }
    return 0;
  }
  if (name == "ask" || name == "tell" || name == "enqueue") return RunAskTell(client, name, args);
  if (name == "trial") return RunTrialCommand(client, args, json);
  if (args.size() != 1) {
    return FailUsage(name, name == "submit" || name == "import" ? "expected one study file"
                                                                : "expected one study name");
  }
  const std::string& arg = args[0];
  if (name == "submit") {
    absl::StatusOr<v1::StudySpec> spec = ReadStudyFile(arg);
    if (IsUnusableInputFile(spec.status())) return FailUsage(name, spec.status().message());
    if (!spec.ok()) return Fail(spec.status());
    // The scheduler adds the earlier study's completed trials before the first suggestion.
    const std::string from = absl::GetFlag(FLAGS_warm_start);
    if (!from.empty()) spec->set_warm_start_study(from);
    absl::StatusOr<v1::Study> study = client.CreateStudy(*spec);
    // The scheduler names the first error only; say when the file has more.
    if (const size_t errors = absl::IsInvalidArgument(study.status()) ? StudyFileErrors(arg).size() : 0;
        errors > 1) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(study.status().message(), " (and ",
                                                          errors - 1, " more: dhpt validate ",
                                                          arg, " lists them)")));
    }
    if (!study.ok()) return Fail(study.status());
    if (!from.empty()) {
      std::cout << "warm start: learnt from " << study->trials_added()
                << " completed trials of " << from << "\n";
    }
    const std::string line = ProgressLine(*study);
    std::cout << line << std::endl;  // Seen now through a pipe too: the watch may print no other.
    if (!absl::GetFlag(FLAGS_watch)) return 0;
    int exit_code = 0;
    WithInterrupts([&] { client.Cancel(); }, [&] {
      absl::Status watched = WatchToEnd(client, spec->name(), line);
      if (absl::IsCancelled(watched)) {
        exit_code = 130;  // Ctrl-C, as for dhpt watch: the study goes on.
        return;
      }
      exit_code = watched.ok() ? PrintResults(client, spec->name()) : Fail(watched);
    });
    return exit_code;
  }
  if (name == "watch") {
    int exit_code = 0;
    WithInterrupts([&] { client.Cancel(); }, [&] {
      absl::Status watched = WatchToEnd(client, arg);
      if (absl::IsCancelled(watched)) {
        exit_code = 130;  // Ctrl-C: the study goes on; nothing to report.
        return;
      }
      if (!watched.ok()) {
        exit_code = Fail(watched);
        return;
      }
      absl::StatusOr<v1::Study> study = client.GetStudy(arg);
      if (!study.ok()) {
        exit_code = Fail(study.status());
        return;
      }
      std::cout << StudySummary(*study);
      // As submit --watch: a study that ended FAILED or STOPPED is not done.
      exit_code = study->state() == v1::Study::COMPLETED ? 0 : 1;
    });
    return exit_code;
  }
  if (name == "trials") {
    absl::StatusOr<v1::Study> study = client.GetStudy(arg);
    if (!study.ok()) return Fail(study.status());
    absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(arg);
    if (!trials.ok()) return Fail(trials.status());
    if (json) {
      v1::ListTrialsResponse response;
      for (const v1::Trial& t : *trials) *response.add_trials() = t;
      std::cout << CliJson(response);
    } else {
      std::cout << TrialsTable(study->spec(), *trials);
    }
    return 0;
  }
  if (name == "best") {
    absl::StatusOr<v1::Study> study = client.GetStudy(arg);
    if (!study.ok()) return Fail(study.status());
    absl::StatusOr<v1::Trial> best = client.GetBestTrial(arg);
    if (!best.ok()) return Fail(best.status());
    std::cout << (json ? CliJson(*best) : StudySummary(*study));
    return 0;
  }
  if (name == "pareto") {
    absl::StatusOr<v1::Study> study = client.GetStudy(arg);
    if (!study.ok()) return Fail(study.status());
    absl::StatusOr<v1::GetParetoFrontResponse> front = client.GetParetoFront(arg);
    if (!front.ok()) return Fail(front.status());
    std::cout << (json ? CliJson(*front) : ParetoTable(*study, *front));
    if (absl::GetFlag(FLAGS_plot).empty()) return 0;
    absl::StatusOr<std::vector<v1::Trial>> trials = client.ListTrials(arg);
    if (!trials.ok()) return Fail(trials.status());
    if (absl::Status drawn = DrawPlotIfAsked(*study, *trials, *front); !drawn.ok()) return Fail(drawn);
    return 0;
  }
  if (name == "importance" || name == "plot" || name == "report") {
    InsightOptions options;
    options.evaluator = absl::GetFlag(FLAGS_evaluator);
    options.kind = absl::GetFlag(FLAGS_kind);
    options.params = absl::GetFlag(FLAGS_params);
    options.objective = absl::GetFlag(FLAGS_objective);
    options.out = absl::GetFlag(FLAGS_out);
    if (options.out.empty()) options.out = absl::StrCat(name == "plot" ? "plots-" : "report-", arg);
    // Flag values that name nothing are usage errors, found before any call.
    if (absl::StatusOr<analysis::Evaluator> evaluator = analysis::ParseEvaluator(options.evaluator);
        !evaluator.ok()) {
      return FailUsage(name, evaluator.status().message());
    }
    if (name == "plot" && options.kind != "all") {
      if (absl::StatusOr<analysis::PlotKind> kind = analysis::ParsePlotKind(options.kind); !kind.ok()) {
        return FailUsage(name, kind.status().message());
      }
    }
    if (name == "importance") {
      absl::StatusOr<v1::GetParamImportancesRequest> request = ImportanceRequest(arg, options);
      if (!request.ok()) return Fail(request.status());
      absl::StatusOr<v1::GetParamImportancesResponse> response =
          client.GetParamImportances(*request);
      if (!response.ok()) return Fail(response.status());
      std::cout << (json ? CliJson(*response) : ImportanceTable(*response));
      return 0;
    }
    if (name == "plot") {
      absl::StatusOr<std::vector<std::string>> files = DrawInsightPlots(client, arg, options);
      if (!files.ok()) return Fail(files.status());
      std::cout << "plots: " << absl::StrJoin(*files, ", ") << " in " << options.out << "\n";
      return 0;
    }
    absl::StatusOr<std::string> report = WriteStudyReport(client, arg, options);
    if (!report.ok()) return Fail(report.status());
    std::cout << "report: " << *report << "\n";
    return 0;
  }
  if (name == "stop") {
    absl::StatusOr<v1::Study> study = client.StopStudy(arg);
    if (!study.ok()) return Fail(study.status());
    std::cout << ProgressLine(*study) << "\n";
    return 0;
  }
  if (name == "extend") {
    return RunExtend(client, arg,
                     {absl::GetFlag(FLAGS_max_trials), absl::GetFlag(FLAGS_parallel_trials),
                      absl::GetFlag(FLAGS_max_failed_trials), absl::GetFlag(FLAGS_trial_timeout)},
                     std::cout, std::cerr);
  }
  if (name == "delete") {
    if (absl::Status deleted = client.DeleteStudy(arg, absl::GetFlag(FLAGS_force));
        !deleted.ok()) {
      return Fail(deleted);
    }
    std::cout << "deleted study " << arg << "\n";
    return 0;
  }
  if (name == "export") {
    absl::StatusOr<v1::StudyExport> exported = client.ExportStudy(arg);
    if (!exported.ok()) return Fail(exported.status());
    absl::StatusOr<std::string> text = ToJson(*exported);
    if (!text.ok()) return Fail(text.status());
    std::cout << *text;
    return 0;
  }
  if (name == "import") {
    absl::StatusOr<std::string> text = ReadTextFile(arg, kMaxExportFileBytes);
    if (IsUnusableInputFile(text.status())) return FailUsage(name, text.status().message());
    if (!text.ok()) return Fail(text.status());
    v1::StudyExport exported;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    if (auto parsed = google::protobuf::util::JsonStringToMessage(*text, &exported, options);
        !parsed.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          arg, " is not a dhpt export: ", std::string(parsed.message().data(),
                                                     parsed.message().size()))));
    }
    absl::StatusOr<v1::Study> study = client.ImportStudy(exported);
    if (!study.ok()) return Fail(study.status());
    std::cout << "imported study " << study->spec().name() << " with " << exported.trials_size()
              << " trials\n"
              << ProgressLine(*study) << "\n";
    return 0;
  }
  return Fail(absl::InvalidArgumentError(absl::StrCat("unknown command ", name)));
}

}  // namespace
}  // namespace dhpt::cli

int main(int argc, char** argv) {
  using dhpt::cli::Commands;
  // Help is per command, so it is answered before absl sees the flags.
  std::string command;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      help = true;
    } else if (arg == "--version") {
      std::cout << "dhpt " DHPT_VERSION "\n";
      return 0;
    } else if (command.empty() && arg[0] != '-') {
      command = arg;
    }
  }
  if (command.empty() || (help && !Commands().contains(command))) {
    dhpt::cli::PrintUsage();
    return command.empty() && !help ? 2 : 0;
  }
  if (!Commands().contains(command)) {
    std::cerr << "dhpt: unknown command \"" << command << "\"\n\n";
    dhpt::cli::PrintUsage();
    return 2;
  }
  if (help) {
    const auto& c = Commands().at(command);
    std::cout << "Usage: " << c.usage << "\n\n" << c.help << "\n";
    return 0;
  }
  if (command == "local" || command == "submit" || command == "watch" || command == "compare") {
    // Before any thread starts: Ctrl-C is handled in order (see WithInterrupts).
    const sigset_t interrupts = dhpt::cli::InterruptSignals();
    pthread_sigmask(SIG_BLOCK, &interrupts, nullptr);
  }
  absl::SetProgramUsageMessage(absl::StrCat("dhpt ", command, " (dhpt ", command,
                                            " --help explains it; its flags are below)"));
  dhpt::ApplyEnvironmentToFlags({"scheduler", "client"});
  dhpt::ApplyEnvironmentToFlags(dhpt::ClientSecurityFlagNames());
  dhpt::cli::CommandFlagValues() = dhpt::RepeatedFlagValues(argc, argv, "command");
  std::vector<char*> positional =
      dhpt::ParseCommandLineWithDashes("dhpt " + command, argc, argv, dhpt::cli::CliFlagRanges());
  std::vector<std::string> args;
  for (size_t i = 2; i < positional.size(); ++i) args.push_back(positional[i]);
  // Commands of flags only refuse words rather than drop them: a word is most often a flag's
  // value that the shell split at a space.
  if ((command == "local" || command == "compare" || command == "studies" ||
       command == "workers") && !args.empty()) {
    std::cerr << dhpt::StrayArgumentMessage("dhpt " + command, argc, argv, args[0])
              << "\nusage: " << Commands().at(command).usage << "\n";
    return 2;
  }
  return dhpt::cli::RunCommand(command, args);
}
