// Optimiser quality: every DHPT algorithm on Branin, Hartmann-6, Rosenbrock-4 and Ackley-5,
// `--seeds` seeds x `--trials` sequential trials, reporting the median and interquartile range
// of simple regret (best value found minus the known optimum) after 25, 50 and 100 trials.
// bench/optuna_quality_peer.py runs the same protocol on Optuna's samplers.
//
//   build/bin/optimizer_quality_bench [--seeds=10] [--trials=100]

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "bench/quality_bench.h"
#include "bench/tpe_settings.h"
#include "services/optimizer/function_runs.h"

ABSL_FLAG(int, seeds, 10, "seeds per algorithm and function");
ABSL_FLAG(int, trials, 100, "trials per run");
ABSL_FLAG(std::string, only, "", "run only the algorithms whose label contains this");
ABSL_FLAG(std::vector<std::string>, tpe_variants, {},
          "also run TPE with these settings, each a space-separated list of KEY=VALUE "
          "(bench/tpe_settings.h), labelled 'dhpt TPE SETTINGS'");
ABSL_FLAG(std::string, regrets_out, "",
          "also write every seed's regret at the last checkpoint to this file, one line per "
          "function and algorithm (function<TAB>algorithm<TAB>comma-separated regrets), for "
          "bench/quality_significance.py");

namespace dhpt::optimizer {
namespace {

struct Problem {
  const char* function;
  int dims;
};

}  // namespace
}  // namespace dhpt::optimizer

int main(int argc, char** argv) {
  using namespace dhpt::optimizer;
  absl::ParseCommandLine(argc, argv);
  const int seeds = absl::GetFlag(FLAGS_seeds);
  const int trials = absl::GetFlag(FLAGS_trials);
  const std::vector<Problem> problems = {
      {"branin", 2}, {"hartmann6", 6}, {"rosenbrock", 4}, {"ackley", 5}};
  std::vector<Contender> contenders = {
      {"dhpt RANDOM", {.algorithm = Algorithm::kRandom}},
      {"dhpt GRID", {.algorithm = Algorithm::kGrid}},
      {"dhpt TPE", {.algorithm = Algorithm::kTpe}},
      {"dhpt TPE exact densities",
       {.algorithm = Algorithm::kTpe, .tpe = {.bandwidth_weighted = false}}},
      {"dhpt TPE multivariate",
       {.algorithm = Algorithm::kTpe, .tpe = {.multivariate = true}}},
      {"dhpt HILL_CLIMBING", {.algorithm = Algorithm::kHillClimbing}},
      {"dhpt BAYESIAN", {.algorithm = Algorithm::kBayesian}},
      {"dhpt BAYESIAN unwarped", {.algorithm = Algorithm::kBayesian, .bayesian = {.warp_objective = false}}},
      // The fit redone on every suggestion (before FitPrefix), beside the default's every 10%.
      {"dhpt BAYESIAN refit every trial", {.algorithm = Algorithm::kBayesian, .bayesian = {.refit_growth = 0}}},
  };
  for (const std::string& variant : absl::GetFlag(FLAGS_tpe_variants)) {
    Contender c{"dhpt TPE " + variant, {.algorithm = Algorithm::kTpe}};
    for (absl::string_view word : absl::StrSplit(variant, ' ', absl::SkipEmpty())) {
      if (!dhpt::bench::ApplyTpeSetting(word, &c.config.tpe)) {
        std::fprintf(stderr, "--tpe_variants: unknown setting %s\n", std::string(word).c_str());
        return 2;
      }
    }
    contenders.push_back(std::move(c));
  }
  const std::vector<int> checkpoints = {25, 50, 100};
  FILE* regrets_out = nullptr;
  if (!absl::GetFlag(FLAGS_regrets_out).empty()) {
    regrets_out = std::fopen(absl::GetFlag(FLAGS_regrets_out).c_str(), "w");
    if (regrets_out == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", absl::GetFlag(FLAGS_regrets_out).c_str());
      return 1;
    }
  }
  std::printf("| function | algorithm |");
  for (int c : checkpoints) std::printf(" regret @%d median [IQR] |", c);
  std::printf("\n|---|---|---|---|---|\n");
  for (const Problem& problem : problems) {
    const dhpt::BenchmarkFunction& f = *dhpt::FindBenchmarkFunction(problem.function);
    for (Contender contender : contenders) {
      if (contender.label.find(absl::GetFlag(FLAGS_only)) == std::string::npos) continue;
      // A grid of at least `trials` points, walked in its shuffled order.
      contender.config.grid_points =
          static_cast<int>(std::ceil(std::pow(trials, 1.0 / problem.dims) - 1e-9));
      std::vector<std::vector<double>> regrets(checkpoints.size());
      for (int s = 0; s < seeds; ++s) {
        contender.config.seed = static_cast<uint64_t>(s);
        std::vector<double> best = BestSoFar(contender.config, f, problem.dims, trials);
        for (size_t c = 0; c < checkpoints.size(); ++c) {
          const size_t at = std::min<size_t>(checkpoints[c], best.size()) - 1;
          regrets[c].push_back(best[at] - f.minimum(problem.dims));
        }
      }
      std::printf("| %s-%d | %s |", problem.function, problem.dims, contender.label.c_str());
      for (const auto& r : regrets) {
        std::printf(" %.4g [%.3g, %.3g] |", Quantile(r, 0.5), Quantile(r, 0.25), Quantile(r, 0.75));
      }
      std::printf("\n");
      std::fflush(stdout);
      if (regrets_out != nullptr) {
        std::fprintf(regrets_out, "%s-%d\t%s\t", problem.function, problem.dims,
                     contender.label.c_str());
        for (size_t s = 0; s < regrets.back().size(); ++s) {
          std::fprintf(regrets_out, "%s%.17g", s ? "," : "", regrets.back()[s]);
        }
        std::fprintf(regrets_out, "\n");
        std::fflush(regrets_out);
      }
    }
  }
  if (regrets_out != nullptr) std::fclose(regrets_out);
  return 0;
}
