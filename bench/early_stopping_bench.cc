// Early-stopping cost: the time of one decision (ShouldStop) against the number of other
// trials in the study, each with a 100-report curve, as the scheduler makes it on every
// progress report. bench/optuna_pruner_cost_peer.py times Optuna 3.1's report + should_prune
// on the same histories.
//
//   build/bin/early_stopping_bench
//   /usr/bin/python3 bench/optuna_pruner_cost_peer.py

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "services/study/early_stopping.h"

namespace dhpt::scheduler {
namespace {

constexpr int kReports = 100;

// `others` finished trials whose curves rise towards a level of their own, and a running trial
// at its `reports`th report: the 50th for the median rule; the 16th (step 160) for ASHA, where
// it reaches a rung (10, 40, 160, 640) and is ranked, since between rungs ASHA has nothing to do.
struct Fixture {
  std::vector<study::TrialCurve> others;
  study::TrialCurve running;
  std::vector<const study::TrialCurve*> pointers;
};

Fixture History(int others, int reports) {
  Fixture fixture;
  std::mt19937_64 generator(7);
  std::uniform_real_distribution<double> level(0.5, 1.0);
  auto curve = [&](int reports, bool completed) {
    study::TrialCurve c;
    c.completed = completed;
    const double top = level(generator);
    for (int r = 1; r <= reports; ++r) c.values.push_back({r * 10, top * (1 - 1.0 / (r + 1))});
    return c;
  };
  for (int t = 0; t < others; ++t) fixture.others.push_back(curve(kReports, true));
  fixture.running = curve(reports, false);
  for (const study::TrialCurve& c : fixture.others) fixture.pointers.push_back(&c);
  return fixture;
}

void Decide(benchmark::State& state, const study::EarlyStoppingRule& rule, int reports) {
  const Fixture fixture = History(static_cast<int>(state.range(0)), reports);
  for (auto _ : state) {
    benchmark::DoNotOptimize(study::ShouldStop(rule, /*maximize=*/true, fixture.running, fixture.pointers));
  }
}

void BM_Median(benchmark::State& state) { Decide(state, study::PercentileRule{}, 50); }
void BM_AshaAtARung(benchmark::State& state) { Decide(state, study::AshaRule{.min_resource = 10}, 16); }

BENCHMARK(BM_Median)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AshaAtARung)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dhpt::scheduler

BENCHMARK_MAIN();
