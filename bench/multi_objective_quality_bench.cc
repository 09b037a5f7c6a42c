// Multi-objective optimiser quality: DHPT's multi-objective algorithms on ZDT1 and ZDT2 (10
// variables) and DTLZ2 (3 objectives, 8 variables), `--seeds` seeds x `--trials` sequential
// trials, reporting the hypervolume of all trials so far after 100 and 200 trials (median and
// interquartile range). Reference points: (11, 11) for ZDT1 and ZDT2, the usual choice (f2 of a
// random point reaches about 10); (1.5, 1.5, 1.5) for DTLZ2, which counts every trial with
// g < 0.5 (a (1.1, 1.1, 1.1) box would leave most early trials outside).
// bench/optuna_mo_quality_peer.py runs the same protocol on Optuna's samplers;
// bench/mo_quality_significance.py compares the two files.
//
//   build/bin/multi_objective_quality_bench [--seeds=10] [--trials=200] [--only=TPE]
//       [--out=bench/results/multi-objective-dhpt.jsonl]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/quality_bench.h"
#include "services/optimizer/function_runs.h"
#include "services/optimizer/pareto.h"

ABSL_FLAG(int, seeds, 10, "seeds per algorithm and problem");
ABSL_FLAG(int, trials, 200, "trials per run");
ABSL_FLAG(std::string, only, "", "run only the algorithms whose label contains this");
ABSL_FLAG(std::string, problems, "zdt1-10,zdt2-10,dtlz2-8", "problems to run");
ABSL_FLAG(std::string, out, "", "append one JSON line per run and checkpoint to this file");

namespace dhpt::optimizer {
namespace {

struct Problem {
  std::string label;
  const char* function;
  int dims;
  std::vector<double> reference;
};

}  // namespace
}  // namespace dhpt::optimizer

int main(int argc, char** argv) {
  using namespace dhpt::optimizer;
  absl::ParseCommandLine(argc, argv);
  const int seeds = absl::GetFlag(FLAGS_seeds);
  const int trials = absl::GetFlag(FLAGS_trials);
  const std::vector<Problem> problems = {
      {"zdt1-10", "zdt1", 10, {11, 11}},
      {"zdt2-10", "zdt2", 10, {11, 11}},
      {"dtlz2-8", "dtlz2", 8, {1.5, 1.5, 1.5}},
  };
  const std::vector<Contender> contenders = {
      {"dhpt RANDOM", {.algorithm = Algorithm::kRandom}},
      {"dhpt NSGA2", {.algorithm = Algorithm::kNsga2}},
      {"dhpt TPE", {.algorithm = Algorithm::kTpe}},
      {"dhpt TPE multivariate", {.algorithm = Algorithm::kTpe, .tpe = {.multivariate = true}}},
      {"dhpt BAYESIAN",
       {.algorithm = Algorithm::kBayesian, .bayesian = {.max_fit_points = kParEgoMaxFitPoints}}},
  };
  std::vector<int> checkpoints;
  for (int c : {100, 200}) {
    if (c <= trials) checkpoints.push_back(c);
  }
  FILE* out = nullptr;
  if (!absl::GetFlag(FLAGS_out).empty()) {
    out = std::fopen(absl::GetFlag(FLAGS_out).c_str(), "a");
    if (out == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", absl::GetFlag(FLAGS_out).c_str());
      return 1;
    }
  }
  std::printf("| problem | algorithm |");
  for (int c : checkpoints) std::printf(" hypervolume @%d median [IQR] |", c);
  std::printf(" seconds per run |\n|---|---|");
  for (size_t c = 0; c <= checkpoints.size(); ++c) std::printf("---|");
  std::printf("\n");
  for (const Problem& problem : problems) {
    if (absl::GetFlag(FLAGS_problems).find(problem.label) == std::string::npos) continue;
    const dhpt::MultiObjectiveFunction& f = *dhpt::FindMultiObjectiveFunction(problem.function);
    for (Contender contender : contenders) {
      if (contender.label.find(absl::GetFlag(FLAGS_only)) == std::string::npos) continue;
      std::vector<std::vector<double>> volumes(checkpoints.size());
      double seconds = 0;
      for (int s = 0; s < seeds; ++s) {
        contender.config.seed = static_cast<uint64_t>(s);
        const auto started = std::chrono::steady_clock::now();
        const std::vector<std::vector<double>> values =
            ObjectivesRun(contender.config, f, problem.dims, trials);
        const double run_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        seconds += run_seconds;
        for (size_t c = 0; c < checkpoints.size(); ++c) {
          const size_t at = std::min<size_t>(checkpoints[c], values.size());
          const std::vector<std::vector<double>> prefix(values.begin(), values.begin() + at);
          volumes[c].push_back(Hypervolume(prefix, problem.reference));
          if (out != nullptr) {
            std::fprintf(out,
                         "{\"problem\": \"%s\", \"sampler\": \"%s\", \"seed\": %d, \"trials\": %d, "
                         "\"hypervolume\": %.17g, \"reference\": [%s], \"seconds\": %.2f}\n",
                         problem.label.c_str(), contender.label.c_str(), s, checkpoints[c],
                         volumes[c].back(), absl::StrJoin(problem.reference, ", ").c_str(),
                         run_seconds);
            std::fflush(out);
          }
        }
      }
      std::printf("| %s | %s |", problem.label.c_str(), contender.label.c_str());
      for (const auto& v : volumes) {
        std::printf(" %.5g [%.5g, %.5g] |", Quantile(v, 0.5), Quantile(v, 0.25), Quantile(v, 0.75));
      }
      std::printf(" %.2f |\n", seconds / seeds);
      std::fflush(stdout);
    }
  }
  if (out != nullptr) std::fclose(out);
  return 0;
}
