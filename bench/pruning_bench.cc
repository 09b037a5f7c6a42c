// Early stopping, measured: the TPE study of a file (bench/pruning/*.yaml) run sequentially in
// this process, as `dhpt compare` runs its sequential side, once per seed and rule (none,
// median, asha, hyperband), with the worker's own trainers and the scheduler's own rules.
// --csv swaps the study's data for a CSV file (bench/pruning/make_datasets.py writes several). One JSON line
// per study goes to --out; bench/optuna_pruning_peer.py writes the same lines for Optuna 3.1's
// pruners on the same data (exported here), and bench/pruning_report.py puts them side by side.
//
//   build/bin/pruning_bench --study=bench/pruning/xgboost.yaml --export_dir=/tmp/dhpt-pruning
//       --asha_min_resource=10 --out=bench/results/pruning.jsonl
//   /usr/bin/python3 bench/optuna_pruning_peer.py --study=bench/pruning/xgboost.yaml
//       --data=/tmp/dhpt-pruning --out=bench/results/pruning.jsonl
//   /usr/bin/python3 bench/pruning_report.py bench/results/pruning.jsonl
//
// CPU seconds are each trial's own (ResourceMeter), pruned trials' included; one trial runs at
// a time, on --threads threads.
//
// --equal_compute runs each pruned study on past its max_trials until its trials have trained as
// many steps (rounds, trees, epochs) as the unpruned study's max_trials full-length trials (up to
// --equal_compute_max_trials): what a user buys with pruning is more trials for the same compute.
// Its lines carry "mode":"equal_compute" and the step budget; bench/pruning_report.py
// --equal_compute reads them.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_common.h"
#include "services/cli/study_file.h"
#include "services/common/model_catalog.h"
#include "services/common/status_macros.h"
#include "services/study/early_stopping_defaults.h"
#include "services/study/spec_validation.h"
#include "services/worker/datasets.h"
#include "services/worker/sequential_study.h"
#ifdef DHPT_WITH_TORCH
#include "services/worker/autoencoder_trainer.h"
#endif

ABSL_FLAG(std::string, study, "bench/pruning/xgboost.yaml", "the study file");
ABSL_FLAG(int, seeds, 5, "seeds 1..N of the study's TPE");
ABSL_FLAG(int, first_seed, 1,
          "start at this seed (seeds first_seed..N): completes a cell that was stopped part way");
ABSL_FLAG(std::vector<std::string>, rules,
          std::vector<std::string>({"none", "median", "asha", "hyperband"}),
          "early-stopping rules, each with its defaults: none, median, asha, hyperband; a rule "
          "may set some of its fields after a slash, as hyperband/min_resource=40/"
          "reduction_factor=3 (a JSON line's rule is this whole string)");
ABSL_FLAG(std::string, csv, "",
          "a CSV file (target column y) in place of the study's dataset; the study's name gets "
          "the file's stem, as bench/optuna_pruning_peer.py --name expects");
ABSL_FLAG(int64_t, asha_min_resource, 0,
          "asha's first rung, in the trials' steps; 0 keeps the default (1). Optuna's "
          "SuccessiveHalvingPruner takes 1% of a full trial's steps ('auto')");
ABSL_FLAG(int, threads, 1, "threads per trial");
ABSL_FLAG(std::string, export_dir, "",
          "also write the study's train.csv and validation.csv here, for the peer");
ABSL_FLAG(std::string, out, "", "append one JSON line per study here (default: stdout)");
ABSL_FLAG(bool, equal_compute, false,
          "run each pruned study until its trials have trained the steps of the study's "
          "max_trials full-length trials (the unpruned study's compute), not max_trials trials");
ABSL_FLAG(int, equal_compute_max_trials, 240,
          "--equal_compute: at most this many trials per study (4 times the matrix's 60)");

namespace dhpt::bench {
namespace {

absl::Status ExportData(const v1::StudySpec& spec, const std::string& dir,
                        const worker::DatasetOptions& options) {
  worker::DatasetCache cache(options);
  absl::StatusOr<std::shared_ptr<const worker::SplitDataset>> split = cache.Get(spec.dataset());
  if (!split.ok()) return split.status();
  WriteSplitCsv(dir, **split);
  return absl::OkStatus();
}

// Sets the integer or double field `name` of the rule's message to `value`.
absl::Status SetRuleField(google::protobuf::Message& rule, absl::string_view name,
                          absl::string_view value) {
  const google::protobuf::FieldDescriptor* field =
      rule.GetDescriptor()->FindFieldByName(std::string(name));
  const google::protobuf::Reflection* reflection = rule.GetReflection();
  int64_t integer = 0;
  double number = 0;
  if (field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(rule.GetTypeName(), " has no field ", name));
  } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT32 &&
             absl::SimpleAtoi(value, &integer)) {
    reflection->SetInt32(&rule, field, static_cast<int32_t>(integer));
  } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64 &&
             absl::SimpleAtoi(value, &integer)) {
    reflection->SetInt64(&rule, field, integer);
  } else if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE &&
             absl::SimpleAtod(value, &number)) {
    reflection->SetDouble(&rule, field, number);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", value, ": not a number it takes"));
  }
  return absl::OkStatus();
}

absl::Status SetRule(const std::string& rule_and_fields, v1::StudySpec& spec) {
  const std::vector<std::string> parts = absl::StrSplit(rule_and_fields, '/');
  const std::string& rule = parts[0];
  if (rule == "none") return cli::OverrideEarlyStopping("off", spec);
  RETURN_IF_ERROR(cli::OverrideEarlyStopping(rule, spec));
  v1::EarlyStopping& stopping = *spec.mutable_early_stopping();
  const google::protobuf::FieldDescriptor* oneof_field =
      stopping.GetReflection()->GetOneofFieldDescriptor(stopping,
                                                        stopping.GetDescriptor()->oneof_decl(0));
  google::protobuf::Message* message =
      stopping.GetReflection()->MutableMessage(&stopping, oneof_field);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::pair<std::string, std::string> field = absl::StrSplit(parts[i], '=');
    RETURN_IF_ERROR(SetRuleField(*message, field.first, field.second));
  }
  if (rule == "asha" && absl::GetFlag(FLAGS_asha_min_resource) > 0) {
    spec.mutable_early_stopping()->mutable_asha()->set_min_resource(
        absl::GetFlag(FLAGS_asha_min_resource));
  }
  return absl::OkStatus();
}

double Metric(const v1::Trial& trial, absl::string_view name) {
  auto it = trial.metrics().find(std::string(name));
  return it == trial.metrics().end() ? 0 : it->second;
}

// The steps a finished trial trained: its last judged step if pruned, else the full budget.
int64_t StepsOf(const v1::Trial& trial, int64_t max_steps) {
  return trial.state() == v1::Trial::PRUNED
             ? static_cast<int64_t>(Metric(trial, kMetricPrunedStep))
             : max_steps;
}

// {"system":"dhpt","study":...,"rule":...,"seed":...,"wall_seconds":...,
// "pruned_within_reach":...,"trials":[...]}: each trial's state, objective (the last reported
// value when pruned), CPU and wall seconds; under --equal_compute also "mode" and
// "budget_steps".
std::string JsonLine(const v1::StudySpec& spec, const std::string& rule, int seed, double wall,
                     const worker::SequentialRun& run, int64_t budget_steps) {
  std::string line = absl::StrFormat(
      R"({"system":"dhpt","study":"%s","rule":"%s","seed":%d,"wall_seconds":%.3f,)"
      R"("pruned_within_reach":%d,)",
      spec.name(), rule, seed, wall, run.study.trials_pruned_within_reach());
  if (budget_steps > 0) {
    absl::StrAppendFormat(&line, R"("mode":"equal_compute","budget_steps":%d,)", budget_steps);
  }
  line += R"("trials":[)";
  const std::string& metric = spec.objective().metric();
  for (size_t i = 0; i < run.trials.size(); ++i) {
    const v1::Trial& trial = run.trials[i];
    const double value = trial.state() == v1::Trial::COMPLETED ? trial.objective_value()
                                                               : Metric(trial, metric);
    absl::StrAppendFormat(&line, R"(%s{"state":"%s","value":%.6f,"cpu_seconds":%.4f,)"
                                 R"("wall_seconds":%.4f,"pruned_step":%d})",
                          i == 0 ? "" : ",", v1::Trial::State_Name(trial.state()),
                          std::isfinite(value) ? value : -1e9, Metric(trial, kMetricCpuSeconds),
                          Metric(trial, kMetricWallSeconds),
                          static_cast<int64_t>(Metric(trial, kMetricPrunedStep)));
  }
  return line + "]}";
}

int Main() {
  absl::StatusOr<v1::StudySpec> study = cli::ReadStudyFile(absl::GetFlag(FLAGS_study));
  worker::DatasetOptions datasets;
  if (const std::string csv = absl::GetFlag(FLAGS_csv); study.ok() && !csv.empty()) {
    const std::filesystem::path path = std::filesystem::absolute(csv);
    datasets.data_roots = {path.parent_path().string()};
    study->mutable_dataset()->clear_friedman1();
    study->mutable_dataset()->mutable_csv()->set_path(path.string());
    study->mutable_dataset()->mutable_csv()->set_target("y");
    study->set_name(absl::StrCat(study->name(), "-", path.stem().string()));
  }
  if (study.ok()) study = study::NormalizeStudySpec(*study);
  if (!study.ok()) {
    std::fprintf(stderr, "%s\n", study.status().ToString().c_str());
    return 2;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_export_dir); !dir.empty()) {
    if (absl::Status exported = ExportData(*study, dir, datasets); !exported.ok()) {
      std::fprintf(stderr, "--export_dir: %s\n", exported.ToString().c_str());
      return 2;
    }
  }
  worker::TrialRunnerOptions runner_options;
  runner_options.datasets = datasets;
#ifdef DHPT_WITH_TORCH
  if (auto trainer = worker::AutoencoderTrainer::Create(worker::DevicePreference::kCpu); trainer.ok()) {
    runner_options.autoencoder = std::move(*trainer);
  }
#endif
  // One runner for every study: the dataset is made once, as on a long-lived worker.
  worker::TrialRunner runner(std::move(runner_options));
  std::FILE* out = stdout;
  if (const std::string path = absl::GetFlag(FLAGS_out); !path.empty()) {
    out = std::fopen(path.c_str(), "a");
    if (out == nullptr) {
      std::fprintf(stderr, "--out: cannot open %s\n", path.c_str());
      return 2;
    }
  }
  const std::optional<study::TrainerBudget> trainer_budget = study::TrainerBudgetOf(*study);
  if (absl::GetFlag(FLAGS_equal_compute) && !trainer_budget) {
    std::fprintf(stderr, "--equal_compute: the study's trainer reports no known steps\n");
    return 2;
  }
  for (int seed = absl::GetFlag(FLAGS_first_seed); seed <= absl::GetFlag(FLAGS_seeds); ++seed) {
    for (const std::string& rule : absl::GetFlag(FLAGS_rules)) {
      v1::StudySpec spec = *study;
      spec.mutable_algorithm()->set_seed(static_cast<uint64_t>(seed));
      if (absl::Status set = SetRule(rule, spec); !set.ok()) {
        std::fprintf(stderr, "--rules: %s\n", set.ToString().c_str());
        return 2;
      }
      // Equal compute: the unpruned study's steps (every one of its trials runs them all).
      int64_t budget_steps = 0;
      std::atomic<bool> spent = false;
      worker::SequentialOptions options{.threads_per_trial = absl::GetFlag(FLAGS_threads)};
      if (absl::GetFlag(FLAGS_equal_compute) && rule != "none") {
        budget_steps = spec.max_trials() * trainer_budget->max_resource;
        spec.set_max_trials(absl::GetFlag(FLAGS_equal_compute_max_trials));
        options.cancelled = &spent;
        options.on_trial_end = [&, steps = int64_t{0}](const v1::Trial& trial) mutable {
          steps += StepsOf(trial, trainer_budget->max_resource);
          if (steps >= budget_steps) spent = true;  // The study stops before its next trial.
        };
      }
      const absl::Time start = absl::Now();
      absl::StatusOr<worker::SequentialRun> run =
          worker::RunStudySequentially(spec, runner, options);
      if (!run.ok()) {
        std::fprintf(stderr, "%s\n", run.status().ToString().c_str());
        return 1;
      }
      const double wall = absl::ToDoubleSeconds(absl::Now() - start);
      std::fprintf(out, "%s\n", JsonLine(spec, rule, seed, wall, *run, budget_steps).c_str());
      std::fflush(out);
      std::fprintf(stderr, "%s seed %d %s: %.0f s, %d completed, %d pruned\n", spec.name().c_str(),
                   seed, rule.c_str(), wall, run->study.trials_completed(),
                   run->study.trials_pruned());
    }
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace
}  // namespace dhpt::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dhpt::bench::Main();
}
