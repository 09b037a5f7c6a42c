// Quality on a real model choice (issue 33): XGBoost or Random Forest, each with its own
// parameters (bench/model_choice/diabetes.yaml), tuned by DHPT's optimisers in this process
// with the workers' own trainer (TrainXgboost on the worker's dataset cache and split), against
// the same space written flat (every parameter drawn every time, those of the other kind
// dropped before training: what a user without conditions gets) and against Optuna 3.1's
// define-by-run TPE on the same rows (bench/optuna_model_choice_peer.py).
//
//   /usr/bin/python3 bench/pruning/make_datasets.py /tmp/dhpt-mc-data
//   build/bin/model_choice_quality_bench --data_root=/tmp/dhpt-mc-data
//       --export_dir=/tmp/dhpt-mc-split --regrets_out=/tmp/dhpt-mc.tsv [--curves_out=FILE]
//   /usr/bin/python3 bench/optuna_model_choice_peer.py --data=/tmp/dhpt-mc-split
//       --regrets-out=/tmp/optuna-mc.tsv
//   /usr/bin/python3 bench/quality_significance.py /tmp/dhpt-mc.tsv /tmp/optuna-mc.tsv
//       "TPE=TPESampler" "TPE=TPESampler(group)" "BAYESIAN=TPESampler"
//   /usr/bin/python3 bench/quality_significance.py /tmp/dhpt-mc.tsv /tmp/dhpt-mc.tsv
//       "TPE=TPE flat" "BAYESIAN=BAYESIAN flat"
//
// The loss of a trial is 1 - validation r2; each seed's best loss after 50 and 100 trials goes
// to --regrets_out as "model_choice@BUDGET<TAB>label<TAB>v1,v2,...". The trainer is seeded
// (XGBoost's seed 0, the forest's chunk seeds), so a point always scores the same: a point seen
// before is not trained again.
//
// A forest of few trees on 442 rows scores with a large seed noise (neighbours 0.001 apart in
// subsample differ by 0.015 in r2, bench/model_choice_noise.py), so the best r2 of a run is partly the luck
// of seed 0's draw. --reseeds=N (default 5) also trains each run's best point at each budget
// with seeds 1..N and writes the mean loss as model_choice_reseeded@BUDGET: the r2 a user gets
// from the configuration the run chose.
//
// --objective_seeds=K (default 1: the measure above) makes each trial's loss the mean of 1 - r2
// over the trainer's seeds 0..K-1, the same K for every optimiser and the Optuna peer
// (--objective-seeds): the configuration's expected r2 rather than one draw's, so a run's best
// is the best configuration found and not the luckiest draw. The reseeds then use the seeds
// K..K+N-1, which no trial saw.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"
#include "bench/tpe_settings.h"
#include "services/cli/study_file.h"
#include "services/common/param_values.h"
#include "services/study/model_choice.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"
#include "services/worker/datasets.h"
#include "services/worker/xgboost_trainer.h"

ABSL_FLAG(std::string, study, "bench/model_choice/diabetes.yaml", "the model-choice study file");
ABSL_FLAG(std::string, data_root, "/tmp/dhpt-mc-data",
          "the directory holding the study's CSV (bench/pruning/make_datasets.py writes it)");
ABSL_FLAG(int, seeds, 10, "Seeds per optimiser (first_seed..first_seed+seeds-1).");
ABSL_FLAG(int, first_seed, 0,
          "the first seed, so that one optimiser's seeds can be split over several processes "
          "(each run is a function of its seed; --curves_out files can be joined)");
ABSL_FLAG(std::string, budgets, "50,100", "Trial counts at which the best loss is recorded.");
ABSL_FLAG(std::vector<std::string>, optimisers,
          std::vector<std::string>({"TPE", "TPE multivariate", "TPE flat", "BAYESIAN",
                                    "BAYESIAN flat", "RANDOM"}),
          "which to run: TPE, BAYESIAN or RANDOM with their defaults, each optionally followed "
          "by modifiers: 'flat' (no conditions), and for TPE 'multivariate', 'conditioned' "
          "(condition_on_parent), and KEY=VALUE settings (bench/tpe_settings.h)");
ABSL_FLAG(std::string, regrets_out, "", "Write every seed's best loss per budget here.");
ABSL_FLAG(std::string, export_dir, "",
          "also write the study's train.csv and validation.csv here, for the Optuna peer");
ABSL_FLAG(std::string, curves_out, "",
          "Write every trial of every run here (label, seed, then each trial's model kind and "
          "loss), for bench/model_choice_curves.py");
ABSL_FLAG(int, reseeds, 5,
          "also train each run's best point at every budget again with the trainer's seeds "
          "1..N and record its mean r2 (model_choice_reseeded@BUDGET): the r2 the chosen "
          "configuration gives, not the luck of seed 0's draw; 0 = off");
ABSL_FLAG(int, objective_seeds, 1,
          "each trial's loss is the mean of 1 - r2 over the trainer's seeds 0..K-1 (1 = seed 0 "
          "only, the first measure); the reseeds then use seeds K..K+N-1");
ABSL_FLAG(int, threads, 1, "threads per trial");
ABSL_FLAG(bool, trace, false,
          "print each trained point and its loss to stderr (to check the peer's trainer)");

namespace dhpt::bench {
namespace {

using optimizer::Point;
using optimizer::SearchSpace;

// The space with no conditions: every parameter always drawn.
SearchSpace Flat(const SearchSpace& space) {
  std::vector<optimizer::ParameterSpec> parameters = space.parameters();
  for (optimizer::ParameterSpec& p : parameters) {
    p.parent = -1;
    p.active_values.clear();
  }
  return SearchSpace(std::move(parameters));
}

class Evaluator {
 public:
  Evaluator(const v1::StudySpec& spec, const SearchSpace& space,
            std::shared_ptr<const worker::SplitDataset> data)
      : spec_(spec), space_(space), data_(std::move(data)) {}

  // 1 - r2 of the point's canonical form (what the conditional space makes of it: a flat
  // point's parameters of the other kind dropped); 2 for a failed trial. `seed` is the
  // trainer's (the forest's chunk seeds; XGBoost's own, which changes nothing here: nothing
  // it tunes subsamples).
  double Loss(Point point, int seed = 0) {
    last_kind_.clear();
    for (int i : space_.order()) {
      if (!space_.Active(point, i)) point[i] = optimizer::Inactive{};
    }
    const std::string key = absl::StrCat(space_.Key(point), "/", seed);
    v1::Model model;
    study::ParamMap params;
    study::ModelForTrial(spec_, study::ToParamMap(space_, point), &model, &params);
    last_kind_ = v1::Model::Kind_Name(model.kind());
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    worker::XgboostRequest request;
    request.random_forest = model.kind() == v1::Model::RANDOM_FOREST;
    for (const auto& [name, value] : model.fixed()) {
      request.params.emplace_back(name, FormatFixedValue(value));
    }
    for (const auto& [name, value] : params) {
      request.params.emplace_back(name, FormatParameterValueExact(value));
    }
    if (seed != 0) request.params.emplace_back("seed", absl::StrCat(seed));
    request.threads = absl::GetFlag(FLAGS_threads);
    absl::StatusOr<worker::XgboostResult> trained = worker::TrainXgboost(*data_, request);
    if (!trained.ok()) std::fprintf(stderr, "trial failed: %s\n", trained.status().ToString().c_str());
    const double loss = trained.ok() ? 1 - trained->r2 : 2;
    if (absl::GetFlag(FLAGS_trace)) {
      std::string line = v1::Model::Kind_Name(model.kind());
      for (const auto& [name, value] : params) {
        absl::StrAppend(&line, " ", name, "=", FormatParameterValueExact(value));
      }
      std::fprintf(stderr, "%s loss=%.9g\n", line.c_str(), loss);
    }
    cache_[key] = loss;
    return loss;
  }

  // What a trial scores: the mean loss over the trainer's seeds 0..K-1 (--objective_seeds).
  double Objective(const Point& point) {
    const int k = absl::GetFlag(FLAGS_objective_seeds);
    double sum = 0;
    for (int seed = 0; seed < k; ++seed) sum += Loss(point, seed);
    return sum / k;
  }

  // The model kind of the last point scored.
  const std::string& last_kind() const { return last_kind_; }

 private:
  const v1::StudySpec& spec_;
  const SearchSpace& space_;
  std::shared_ptr<const worker::SplitDataset> data_;
  absl::flat_hash_map<std::string, double> cache_;
  std::string last_kind_;
};

// What one run gives: its trials in order, and after each one the best loss and point.
struct RunTrace {
  std::vector<double> best;  // The best loss after each trial.
  std::vector<std::string> trials;  // "KIND:loss".
  std::vector<Point> best_point;  // The best point after each trial.
};

RunTrace Run(const SearchSpace& space, const optimizer::OptimizerConfig& config,
             Evaluator& evaluator, int budget) {
  auto optimizer = optimizer::MakeOptimizer(space, config);
  if (!optimizer.ok()) {
    std::fprintf(stderr, "%s\n", optimizer.status().ToString().c_str());
    std::exit(2);
  }
  std::vector<optimizer::TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  RunTrace trace;
  std::vector<double>& best = trace.best;
  for (int t = 0; t < budget; ++t) {
    auto next = (*optimizer)->Suggest({trials, keys});
    if (!next.ok() || !next->has_value()) break;
    const double loss = evaluator.Objective(**next);
    keys.insert(space.Key(**next));
    // The optimiser sees the objective as the study states it (r2, maximised).
    trials.push_back({**next, optimizer::TrialStatus::kCompleted, config.minimize ? loss : 1 - loss});
    const bool better = best.empty() || loss < best.back();
    best.push_back(better ? loss : best.back());
    trace.best_point.push_back(better ? **next : trace.best_point.back());
    trace.trials.push_back(absl::StrCat(evaluator.last_kind(), ":", loss));
  }
  return trace;
}

int Main() {
  absl::StatusOr<v1::StudySpec> read = cli::ReadStudyFile(absl::GetFlag(FLAGS_study));
  if (!read.ok()) {
    std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
    return 2;
  }
  worker::DatasetOptions datasets;
  datasets.data_roots = {std::filesystem::absolute(absl::GetFlag(FLAGS_data_root)).string()};
  worker::DatasetCache cache(datasets);
  absl::StatusOr<std::shared_ptr<const worker::SplitDataset>> data = cache.Get(read->dataset());
  if (!data.ok()) {
    std::fprintf(stderr, "dataset: %s\n", data.status().ToString().c_str());
    return 2;
  }
  if (const std::string dir = absl::GetFlag(FLAGS_export_dir); !dir.empty()) {
    WriteSplitCsv(dir, **data);
  }
  const std::vector<int> budgets = ParseBudgets(absl::GetFlag(FLAGS_budgets));
  const int max_budget = *std::max_element(budgets.begin(), budgets.end());
  std::ofstream out;
  if (!absl::GetFlag(FLAGS_regrets_out).empty()) out.open(absl::GetFlag(FLAGS_regrets_out));
  std::ofstream curves;
  if (!absl::GetFlag(FLAGS_curves_out).empty()) curves.open(absl::GetFlag(FLAGS_curves_out));
  std::printf("| optimiser |");
  const int reseeds = absl::GetFlag(FLAGS_reseeds);
  for (int b : budgets) std::printf(" median best r2 @%d |", b);
  const int first_reseed = absl::GetFlag(FLAGS_objective_seeds);
  if (first_reseed < 1) {
    std::fprintf(stderr, "--objective_seeds must be at least 1\n");
    return 2;
  }
  if (reseeds > 0) {
    for (int b : budgets) {
      std::printf(" its r2 over seeds %d-%d @%d |", first_reseed, first_reseed + reseeds - 1, b);
    }
  }
  std::printf("\n|---|");
  for (size_t k = 0; k < budgets.size() * (reseeds > 0 ? 2 : 1); ++k) std::printf("---|");
  std::printf("\n");
  for (const std::string& label : absl::GetFlag(FLAGS_optimisers)) {
    const std::vector<std::string> words = absl::StrSplit(label, ' ');
    v1::StudySpec spec = *read;
    v1::Algorithm::Name name;
    if (!v1::Algorithm::Name_Parse(words[0], &name)) {
      std::fprintf(stderr, "--optimisers: unknown %s\n", label.c_str());
      return 2;
    }
    spec.mutable_algorithm()->Clear();
    spec.mutable_algorithm()->set_name(name);
    bool flat = false;
    optimizer::TpeOptions tpe_settings;  // What KEY=VALUE words set; the rest from the spec.
    std::vector<std::string> tpe_words;
    for (size_t w = 1; w < words.size(); ++w) {
      if (name == v1::Algorithm::TPE && ApplyTpeSetting(words[w], &tpe_settings)) {
        tpe_words.push_back(words[w]);
      } else if (words[w] == "flat") {
        flat = true;
      } else if (name == v1::Algorithm::TPE && words[w] == "multivariate") {
        spec.mutable_algorithm()->mutable_tpe()->set_multivariate(true);
      } else if (name == v1::Algorithm::TPE && words[w] == "conditioned") {
        spec.mutable_algorithm()->mutable_tpe()->set_condition_on_parent(true);
      } else {
        std::fprintf(stderr, "--optimisers: unknown modifier %s\n", words[w].c_str());
        return 2;
      }
    }
    absl::StatusOr<v1::StudySpec> normal = study::NormalizeStudySpec(spec);
    if (!normal.ok()) {
      std::fprintf(stderr, "%s\n", normal.status().ToString().c_str());
      return 2;
    }
    const SearchSpace space = study::ToSearchSpace(*normal);
    const SearchSpace flat_space = Flat(space);
    Evaluator evaluator(*normal, space, *data);
    std::vector<std::vector<double>> at(budgets.size()), reseeded(budgets.size());
    const int first_seed = absl::GetFlag(FLAGS_first_seed);
    for (int seed = first_seed; seed < first_seed + absl::GetFlag(FLAGS_seeds); ++seed) {
      optimizer::OptimizerConfig config = study::ToOptimizerConfig(*normal);
      config.seed = static_cast<uint64_t>(seed);
      for (const std::string& word : tpe_words) ApplyTpeSetting(word, &config.tpe);
      const RunTrace trace = Run(flat ? flat_space : space, config, evaluator, max_budget);
      const std::vector<double>& best = trace.best;
      if (curves.is_open()) {
        curves << label << "\t" << seed << "\t" << absl::StrJoin(trace.trials, ",") << "\n";
        curves.flush();
      }
      for (size_t k = 0; k < budgets.size(); ++k) {
        const size_t last = std::min<size_t>(best.size(), budgets[k]) - 1;
        at[k].push_back(best[last]);
        double sum = 0;
        const int first = absl::GetFlag(FLAGS_objective_seeds);  // Seeds no trial saw.
        for (int r = first; r < first + reseeds; ++r) {
          sum += evaluator.Loss(trace.best_point[last], r);
        }
        if (reseeds > 0) reseeded[k].push_back(sum / reseeds);
      }
      std::fprintf(stderr, "%s seed %d: best r2 %.4f\n", label.c_str(), seed, 1 - best.back());
    }
    std::printf("| %s |", label.c_str());
    for (size_t k = 0; k < budgets.size(); ++k) {
      std::printf(" %.4f |", 1 - Median(at[k]));
      if (out.is_open()) {
        out << "model_choice@" << budgets[k] << "\t" << label << "\t"
            << absl::StrJoin(at[k], ",") << "\n";
        if (reseeds > 0) {
          out << "model_choice_reseeded@" << budgets[k] << "\t" << label << "\t"
              << absl::StrJoin(reseeded[k], ",") << "\n";
        }
        out.flush();
      }
    }
    for (size_t k = 0; k < budgets.size() && reseeds > 0; ++k) {
      std::printf(" %.4f |", 1 - Median(reseeded[k]));
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace dhpt::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dhpt::bench::Main();
}
