// Optimiser cost: wall time of one suggestion against the number of finished trials, in 10
// dimensions (Styblinski-Tang values on uniformly random points; ZDT1's two objectives for
// the multi-objective optimisers). bench/optuna_cost_peer.py times Optuna's TPESampler on the
// same points.
//
//   build/bin/optimizer_cost_bench

#include <benchmark/benchmark.h>

#include "services/optimizer/function_runs.h"

namespace dhpt::optimizer {
namespace {

constexpr int kDims = 10;

struct Fixture {
  SearchSpace space;
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
};

// `finished` uniformly random points of `space` (the same ones for every optimiser), each with
// its coordinates, for the caller to evaluate and record.
template <typename Record>
Fixture RandomHistory(SearchSpace space, int finished, const Record& record) {
  Fixture fixture{std::move(space), {}, {}};
  std::mt19937_64 generator = SeededGenerator(7, 0, 0);
  for (int t = 0; t < finished; ++t) {
    std::vector<double> unit(kDims);
    for (double& u : unit) u = UniformUnit(generator);
    Point point = fixture.space.FromUnitPoint(unit);
    std::vector<double> x;
    for (const ParameterValue& v : point) x.push_back(std::get<double>(v));
    fixture.keys.insert(fixture.space.Key(point));
    fixture.trials.push_back(record(std::move(point), x));
  }
  return fixture;
}

Fixture History(int finished) {
  const BenchmarkFunction& f = *FindBenchmarkFunction("styblinski_tang");
  return RandomHistory(FunctionSpace(f, kDims), finished, [&](Point point, const std::vector<double>& x) {
    return TrialRecord{point, TrialStatus::kCompleted, f.evaluate(x)};
  });
}

void Suggest(benchmark::State& state, Algorithm algorithm) {
  const Fixture fixture = History(static_cast<int>(state.range(0)));
  OptimizerConfig config{.algorithm = algorithm, .seed = 1};
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
  for (auto _ : state) {
    auto point = optimizer->Suggest({fixture.trials, fixture.keys});
    benchmark::DoNotOptimize(point);
  }
}

// TPE as in a running study: its last suggestion saw the history one trial shorter, so the
// sorted columns it keeps need one trial merged in (the shorter call is not timed).
void BM_TpeSuggest(benchmark::State& state) {
  const Fixture fixture = History(static_cast<int>(state.range(0)));
  std::vector<TrialRecord> shorter(fixture.trials.begin(), fixture.trials.end() - 1);
  absl::flat_hash_set<std::string> shorter_keys;
  for (const TrialRecord& trial : shorter) shorter_keys.insert(fixture.space.Key(trial.point));
  OptimizerConfig config{.algorithm = Algorithm::kTpe, .seed = 1};
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
  for (auto _ : state) {
    state.PauseTiming();
    benchmark::DoNotOptimize(optimizer->Suggest({shorter, shorter_keys}));
    state.ResumeTiming();
    auto point = optimizer->Suggest({fixture.trials, fixture.keys});
    benchmark::DoNotOptimize(point);
  }
}

// TPE's first suggestion after a scheduler restart: nothing kept, every column sorted afresh.
void BM_TpeSuggestCold(benchmark::State& state) {
  const Fixture fixture = History(static_cast<int>(state.range(0)));
  OptimizerConfig config{.algorithm = Algorithm::kTpe, .seed = 1};
  for (auto _ : state) {
    std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
    auto point = optimizer->Suggest({fixture.trials, fixture.keys});
    benchmark::DoNotOptimize(point);
  }
}
// Multi-objective: ZDT1's two objectives on the same kind of random points, in 10 dimensions.
Fixture MultiObjectiveHistory(int finished) {
  const MultiObjectiveFunction& f = *FindMultiObjectiveFunction("zdt1");
  return RandomHistory(FunctionSpace(f, kDims), finished, [&](Point point, const std::vector<double>& x) {
    std::vector<double> values(2);
    f.evaluate(x, values);
    return TrialRecord{.point = std::move(point), .status = TrialStatus::kCompleted, .values = values};
  });
}

// As in a running study: the optimiser saw the history one trial shorter just before (TPE
// keeps its sorted columns; the others keep nothing).
void MultiObjectiveSuggest(benchmark::State& state, Algorithm algorithm) {
  const Fixture fixture = MultiObjectiveHistory(static_cast<int>(state.range(0)));
  std::vector<TrialRecord> shorter(fixture.trials.begin(), fixture.trials.end() - 1);
  absl::flat_hash_set<std::string> shorter_keys;
  for (const TrialRecord& trial : shorter) shorter_keys.insert(fixture.space.Key(trial.point));
  // As the scheduler runs multi-objective studies (ParEGO's default fit cap).
  OptimizerConfig config{.algorithm = algorithm, .seed = 1, .objectives_minimize = {true, true},
                         .bayesian = {.max_fit_points = kParEgoMaxFitPoints}};
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
  for (auto _ : state) {
    state.PauseTiming();
    benchmark::DoNotOptimize(optimizer->Suggest({shorter, shorter_keys}));
    state.ResumeTiming();
    auto point = optimizer->Suggest({fixture.trials, fixture.keys});
    benchmark::DoNotOptimize(point);
  }
}
void BM_MotpeSuggest(benchmark::State& state) { MultiObjectiveSuggest(state, Algorithm::kTpe); }
void BM_Nsga2Suggest(benchmark::State& state) { MultiObjectiveSuggest(state, Algorithm::kNsga2); }
void BM_ParEgoSuggest(benchmark::State& state) { MultiObjectiveSuggest(state, Algorithm::kBayesian); }

// BAYESIAN as in a running study: kBayesianRun suggestions in a row, each with one more finished
// trial than the last (the optimiser saw the history one trial shorter just before, untimed);
// the mean includes the hyperparameter fits redone within the run (FitPrefix).
constexpr int kBayesianRun = 50;
void BM_BayesianSuggest(benchmark::State& state) {
  const int first = static_cast<int>(state.range(0));
  const Fixture fixture = History(first + kBayesianRun - 1);
  std::vector<std::vector<TrialRecord>> histories;
  std::vector<absl::flat_hash_set<std::string>> keys;
  for (int n = first - 1; n < first + kBayesianRun; ++n) {
    histories.emplace_back(fixture.trials.begin(), fixture.trials.begin() + n);
    keys.emplace_back();
    for (const TrialRecord& trial : histories.back()) keys.back().insert(fixture.space.Key(trial.point));
  }
  OptimizerConfig config{.algorithm = Algorithm::kBayesian, .seed = 1};
  std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
  benchmark::DoNotOptimize(optimizer->Suggest({histories[0], keys[0]}));
  size_t next = 1;
  for (auto _ : state) {
    auto point = optimizer->Suggest({histories[next], keys[next]});
    benchmark::DoNotOptimize(point);
    ++next;
  }
}
// BAYESIAN's first suggestion after a scheduler restart (or at a step of FitPrefix): the
// hyperparameters fitted afresh.
void BM_BayesianSuggestCold(benchmark::State& state) {
  const Fixture fixture = History(static_cast<int>(state.range(0)));
  OptimizerConfig config{.algorithm = Algorithm::kBayesian, .seed = 1};
  for (auto _ : state) {
    std::unique_ptr<Optimizer> optimizer = *MakeOptimizer(fixture.space, config);
    auto point = optimizer->Suggest({fixture.trials, fixture.keys});
    benchmark::DoNotOptimize(point);
  }
}
void BM_HillClimbingSuggest(benchmark::State& state) { Suggest(state, Algorithm::kHillClimbing); }
void BM_RandomSuggest(benchmark::State& state) { Suggest(state, Algorithm::kRandom); }

BENCHMARK(BM_RandomSuggest)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TpeSuggest)->Arg(100)->Arg(300)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TpeSuggestCold)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HillClimbingSuggest)->Arg(100)->Arg(300)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BayesianSuggest)->Arg(100)->Arg(300)->Arg(500)->Iterations(kBayesianRun)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BayesianSuggestCold)->Arg(100)->Arg(500)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MotpeSuggest)->Arg(100)->Arg(300)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Nsga2Suggest)->Arg(100)->Arg(300)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ParEgoSuggest)->Arg(100)->Arg(300)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dhpt::optimizer

BENCHMARK_MAIN();
