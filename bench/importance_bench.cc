// Cost and agreement of DHPT's parameter importance (services/analysis/importance.h):
// PED-ANOVA at 1,000 and 10,000 trials x 10 parameters and fANOVA at 1,000, on trials of a
// function whose parameters matter less and less (x0 most, x9 not at all; x1 a log range, x2
// an int, x3 categorical, x4 a stepped range). It writes the 1,000 trials and its importances
// for bench/optuna_importance_peer.py, which times Optuna 3.1's fANOVA on the same trials and
// checks the rank correlation.
//
//   build/bin/importance_bench --out=/tmp/importance
//   /usr/bin/python3 bench/optuna_importance_peer.py /tmp/importance

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "services/analysis/importance.h"
#include "services/common/random.h"

ABSL_FLAG(std::string, out, "/tmp/importance", "folder for trials.csv and dhpt_importances.csv");
ABSL_FLAG(int, repeats, 5, "timed runs per case (the median is reported)");

namespace dhpt::analysis {
namespace {

constexpr int kParams = 10;
// Each parameter's weight: the truth's ranking.
constexpr double kWeights[kParams] = {10, 6, 4, 3, 2, 1.5, 1, 0.5, 0.25, 0};
const std::vector<std::string> kColours = {"red", "green", "blue", "grey"};

StudyData MakeStudy(int trials, uint64_t seed) {
  StudyData study;
  study.name = "importance-bench";
  for (int p = 0; p < kParams; ++p) {
    optimizer::ParameterSpec param;
    param.name = absl::StrFormat("x%d", p);
    param.kind = optimizer::ParameterKind::kDouble;
    param.min = 0;
    param.max = 1;
    if (p == 1) {
      param.min = 1e-4;
      param.log = true;
    } else if (p == 2) {
      param.kind = optimizer::ParameterKind::kInt;
      param.max = 20;
    } else if (p == 3) {
      param.kind = optimizer::ParameterKind::kCategorical;
      param.categories = kColours;
    } else if (p == 4) {
      param.step = 0.1;
    }
    study.params.push_back(param);
  }
  study.objectives = {{"loss", false}};
  std::mt19937_64 generator = SeededGenerator(seed, 29, 0);
  for (int t = 0; t < trials; ++t) {
    TrialData trial;
    trial.number = t;
    trial.state = TrialState::kCompleted;
    double loss = 0;
    for (int p = 0; p < kParams; ++p) {
      const double u = UniformUnit(generator);
      double raw = u, effect = u;  // effect: the parameter's own shape, on [0, 1].
      if (p == 1) {
        raw = std::exp(std::log(1e-4) + u * -std::log(1e-4));
      } else if (p == 2) {
        raw = std::floor(u * 21);
        effect = raw / 20;
      } else if (p == 3) {
        raw = std::floor(u * 4);
        effect = raw == 0 ? 1 : 0;
      } else if (p == 4) {
        raw = std::round(u * 10) / 10;
        effect = raw;
      }
      if (p % 2 == 0 && p != 2) effect = std::sin(std::numbers::pi * effect);  // Non-monotone.
      trial.params.push_back(raw);
      loss += kWeights[p] * effect;
    }
    trial.values = {loss + 0.1 * StandardNormal(generator)};
    study.trials.push_back(std::move(trial));
  }
  return study;
}

// The median wall and CPU milliseconds of a run (CPU time too: on a shared machine the wall
// time says as much about the neighbours as about the code).
std::pair<double, double> MedianMs(const StudyData& study, const ImportanceOptions& options,
                                   int repeats, ImportanceResult* result) {
  std::vector<double> ms, cpu_ms;
  for (int r = 0; r < repeats; ++r) {
    const std::clock_t cpu_start = std::clock();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<ImportanceResult> computed = ComputeImportances(study, options);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    cpu_ms.push_back(1000.0 * static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    if (!computed.ok()) {
      std::cerr << computed.status() << "\n";
      std::exit(1);
    }
    *result = *computed;
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  return {ms[ms.size() / 2], cpu_ms[cpu_ms.size() / 2]};
}

int Main() {
  const std::filesystem::path out(absl::GetFlag(FLAGS_out));
  std::filesystem::create_directories(out);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  const StudyData small = MakeStudy(1'000, 1);
  const StudyData large = MakeStudy(10'000, 1);

  std::ofstream trials(out / "trials.csv");
  trials << "number";
  for (const optimizer::ParameterSpec& p : small.params) trials << "," << p.name;
  trials << ",loss\n";
  for (const TrialData& trial : small.trials) {
    trials << trial.number;
    for (int p = 0; p < kParams; ++p) {
      if (p == 3) {
        trials << "," << kColours[static_cast<int>(trial.params[p])];
      } else {
        trials << absl::StrFormat(",%.17g", trial.params[p]);
      }
    }
    trials << absl::StrFormat(",%.17g\n", trial.values[0]);
  }

  std::ofstream importances(out / "dhpt_importances.csv");
  importances << "evaluator,param,importance\n";
  std::cout << "| evaluator | trials x parameters | median wall (ms) | median CPU (ms) |\n"
               "|---|---|---|---|\n";
  struct Case {
    Evaluator evaluator;
    const StudyData* study;
  };
  for (const Case& c : {Case{Evaluator::kPedAnova, &small}, Case{Evaluator::kPedAnova, &large},
                        Case{Evaluator::kFanova, &small}}) {
    ImportanceOptions options;
    options.evaluator = c.evaluator;
    options.seed = 0;
    ImportanceResult result;
    const auto [ms, cpu_ms] = MedianMs(*c.study, options, repeats, &result);
    std::cout << absl::StrFormat("| DHPT %s | %d x %d | %.1f | %.1f |\n",
                                 EvaluatorName(c.evaluator), c.study->trials.size(), kParams, ms,
                                 cpu_ms);
    if (c.study == &small) {
      for (const ParamImportance& p : result.importances) {
        importances << EvaluatorName(c.evaluator) << "," << p.name << ","
                    << absl::StrFormat("%.9g", p.importance) << "\n";
      }
    }
  }
  std::cout << "\nwrote " << (out / "trials.csv").string() << " and "
            << (out / "dhpt_importances.csv").string() << "\n";
  return 0;
}

}  // namespace
}  // namespace dhpt::analysis

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return dhpt::analysis::Main();
}
