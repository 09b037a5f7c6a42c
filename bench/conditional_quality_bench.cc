// Quality on a conditional search space (issue 33): DHPT's optimisers on
// ConditionalBenchmarkSpace (services/optimizer/conditional_benchmark.h, optimum 0 known), the
// same problem written flat (every parameter always drawn, the loss ignoring the inactive
// ones), against Optuna 3.1's define-by-run TPE on the same problem
// (bench/optuna_conditional_peer.py).
//
//   build/bin/conditional_quality_bench --seeds=10 --budgets=50,100 --regrets_out=/tmp/dhpt.tsv
//   /usr/bin/python3 bench/optuna_conditional_peer.py --seeds 10 --regrets-out /tmp/optuna.tsv
//   /usr/bin/python3 bench/quality_significance.py /tmp/dhpt.tsv /tmp/optuna.tsv
//       "TPE=TPESampler" "TPE=TPESampler(group)" "TPE conditioned=TPESampler"   (one line)
//   /usr/bin/python3 bench/quality_significance.py /tmp/dhpt.tsv /tmp/dhpt.tsv "TPE=TPE flat"
//
// --tpe_variants="startup=5,prior=2 startup=5" adds TPE with those settings (bench/tpe_settings.h);
// --first_seed checks a variant chosen on some seeds on others.
//
// Prints the median best loss (= regret) per optimiser and budget; --regrets_out writes every
// seed's best at each budget as "conditional@BUDGET<TAB>label<TAB>v1,v2,...".

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_common.h"
#include "bench/tpe_settings.h"
#include "services/optimizer/conditional_benchmark.h"
#include "services/optimizer/optimizer.h"

ABSL_FLAG(int, seeds, 10, "Seeds per optimiser (first_seed..first_seed+seeds-1).");
ABSL_FLAG(int, first_seed, 0,
          "the first seed: a variant chosen on seeds 0-29 is checked on seeds it was not chosen on");
ABSL_FLAG(std::string, budgets, "50,100", "Trial counts at which the best loss is recorded.");
ABSL_FLAG(std::string, regrets_out, "", "Write every seed's best loss per budget here.");
ABSL_FLAG(std::vector<std::string>, only, {},
          "run only the optimisers with these labels (default: every one)");
ABSL_FLAG(std::vector<std::string>, tpe_variants, {},
          "also run TPE with these settings, each a space-separated list of KEY=VALUE "
          "(bench/tpe_settings.h), labelled 'TPE SETTINGS'");

namespace dhpt::optimizer {
namespace {

struct Contender {
  std::string label;
  OptimizerConfig config;
  bool flat = false;
};

// The best loss after each trial of one run.
std::vector<double> Run(const Contender& c, uint64_t seed, int budget) {
  const SearchSpace space = ConditionalBenchmarkSpace(c.flat);
  OptimizerConfig config = c.config;
  config.seed = seed;
  auto optimizer = MakeOptimizer(space, config);
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  std::vector<double> best;
  for (int t = 0; t < budget; ++t) {
    auto next = (*optimizer)->Suggest({trials, keys});
    if (!next.ok() || !next->has_value()) break;
    const double loss = ConditionalBenchmarkLoss(**next);
    keys.insert(space.Key(**next));
    trials.push_back({**next, TrialStatus::kCompleted, loss});
    best.push_back(std::min(loss, best.empty() ? loss : best.back()));
  }
  return best;
}

}  // namespace
}  // namespace dhpt::optimizer

int main(int argc, char** argv) {
  using namespace dhpt::optimizer;
  absl::ParseCommandLine(argc, argv);
  const std::vector<int> budgets = dhpt::bench::ParseBudgets(absl::GetFlag(FLAGS_budgets));
  const int max_budget = *std::max_element(budgets.begin(), budgets.end());
  auto config = [](Algorithm a) {
    OptimizerConfig c;
    c.algorithm = a;
    return c;
  };
  std::vector<Contender> contenders = {{"TPE", config(Algorithm::kTpe)},
                                       {"TPE conditioned", config(Algorithm::kTpe)},
                                       {"TPE multivariate", config(Algorithm::kTpe)},
                                       {"TPE flat", config(Algorithm::kTpe), true},
                                       {"BAYESIAN", config(Algorithm::kBayesian)},
                                       {"BAYESIAN flat", config(Algorithm::kBayesian), true},
                                       {"BAYESIAN refit every trial", config(Algorithm::kBayesian)},
                                       {"RANDOM", config(Algorithm::kRandom)},
                                       {"RANDOM flat", config(Algorithm::kRandom), true}};
  contenders[1].config.tpe.condition_on_parent = true;
  contenders[2].config.tpe.multivariate = true;
  contenders[6].config.bayesian.refit_growth = 0;  // The rule before FitPrefix.
  for (const std::string& variant : absl::GetFlag(FLAGS_tpe_variants)) {
    Contender c{"TPE " + variant, config(Algorithm::kTpe)};
    for (absl::string_view word : absl::StrSplit(variant, ' ', absl::SkipEmpty())) {
      if (!dhpt::bench::ApplyTpeSetting(word, &c.config.tpe)) {
        std::fprintf(stderr, "--tpe_variants: unknown setting %s\n", std::string(word).c_str());
        return 2;
      }
    }
    contenders.push_back(std::move(c));
  }
  std::ofstream out;
  if (!absl::GetFlag(FLAGS_regrets_out).empty()) out.open(absl::GetFlag(FLAGS_regrets_out));
  std::printf("| optimiser |");
  for (int b : budgets) std::printf(" median best @%d |", b);
  std::printf("\n|---|");
  for (size_t k = 0; k < budgets.size(); ++k) std::printf("---|");
  std::printf("\n");
  const std::vector<std::string> only = absl::GetFlag(FLAGS_only);
  for (const Contender& c : contenders) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.label) == only.end()) continue;
    std::vector<std::vector<double>> at(budgets.size());
    const int first_seed = absl::GetFlag(FLAGS_first_seed);
    for (int seed = first_seed; seed < first_seed + absl::GetFlag(FLAGS_seeds); ++seed) {
      const std::vector<double> best = Run(c, static_cast<uint64_t>(seed), max_budget);
      for (size_t k = 0; k < budgets.size(); ++k) {
        at[k].push_back(best[std::min<size_t>(best.size(), budgets[k]) - 1]);
      }
    }
    std::printf("| %s |", c.label.c_str());
    for (size_t k = 0; k < budgets.size(); ++k) {
      std::printf(" %.4f |", dhpt::bench::Median(at[k]));
      if (out.is_open()) {
        out << "conditional@" << budgets[k] << "\t" << c.label << "\t" << absl::StrJoin(at[k], ",")
            << "\n";
      }
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
