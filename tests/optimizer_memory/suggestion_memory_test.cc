// A property test of the suggestion memory budget: random specs that spec validation accepts, at
// the edges of its limits (100 parameters, 1,000-value categoricals, the largest candidate and
// fit settings), with histories of up to 20,000 trials, each optimiser's Suggest measured by
// the bytes it has allocated at its peak. A spec that passes validation must stay within
// kSuggestionMemoryBudgetBytes, and BAYESIAN within its own bound (BayesianSuggestionBytes).
//
// The bytes are counted by replacing malloc and friends for this binary (glibc's __libc_*
// functions do the work): operator new and Eigen's matrices both come through here.

#include <malloc.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/optimizer/bayesian_optimization.h"
#include "services/optimizer/optimizer.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* pointer, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* pointer);
}

namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

void Allocated(void* pointer) {
  if (pointer == nullptr) return;
  const int64_t now = live_bytes.fetch_add(static_cast<int64_t>(malloc_usable_size(pointer))) +
                      static_cast<int64_t>(malloc_usable_size(pointer));
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}

void Freed(void* pointer) {
  if (pointer != nullptr) live_bytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(pointer)));
}

}  // namespace

extern "C" {
void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  Allocated(p);
  return p;
}
void* calloc(size_t count, size_t size) {
  void* p = __libc_calloc(count, size);
  Allocated(p);
  return p;
}
void* realloc(void* pointer, size_t size) {
  Freed(pointer);
  void* p = __libc_realloc(pointer, size);
  // A failed realloc leaves the old block in place.
  Allocated(p == nullptr && size > 0 ? pointer : p);
  return p;
}
void free(void* pointer) {
  Freed(pointer);
  __libc_free(pointer);
}
void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  Allocated(p);
  return p;
}
void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }
int posix_memalign(void** out, size_t alignment, size_t size) {
  *out = memalign(alignment, size);
  return *out == nullptr ? ENOMEM : 0;
}
void* valloc(size_t size) { return memalign(4096, size); }
void* pvalloc(size_t size) { return memalign(4096, (size + 4095) & ~size_t{4095}); }
}

namespace dhpt::optimizer {
namespace {

// The bytes Suggest allocates at its peak beyond what was live before it.
int64_t PeakBytesOf(Optimizer& optimizer, const History& history) {
  const int64_t before = live_bytes.load();
  peak_bytes.store(before);
  absl::StatusOr<std::optional<Point>> point = optimizer.Suggest(history);
  EXPECT_TRUE(point.ok()) << point.status();
  return peak_bytes.load() - before;
}

// A random parameter; at the limits half the time.
v1::Parameter RandomParameter(std::mt19937_64& random, int index, bool large) {
  v1::Parameter p;
  p.set_name(absl::StrCat("p", index));
  auto coin = [&](double probability) { return std::uniform_real_distribution<>(0, 1)(random) < probability; };
  switch (random() % 4) {
    case 0: {
      v1::DoubleRange& r = *p.mutable_double_range();
      r.set_min(coin(0.5) ? 1e-6 : -1e6);
      r.set_max(1e6);
      if (r.min() > 0 && coin(0.5)) r.set_log(true);
      else if (coin(0.3)) r.set_step(0.5);
      break;
    }
    case 1: {
      v1::IntRange& r = *p.mutable_int_range();
      r.set_min(1);
      r.set_max(coin(0.5) ? int64_t{1} << 53 : 10);
      if (coin(0.3)) r.set_log(true);
      break;
    }
    case 2: {
      const int values = large ? study::kMaxChoices : 1 + static_cast<int>(random() % 20);
      for (int v = 0; v < values; ++v) {
        // Long values now and then: a point holds every one it takes.
        p.mutable_categorical()->add_values(absl::StrCat(coin(0.1) ? std::string(200, 'v') : "v", v));
      }
      break;
    }
    default: {
      const int values = large ? study::kMaxChoices : 1 + static_cast<int>(random() % 20);
      for (int v = 0; v < values; ++v) p.mutable_discrete()->add_values(v * 0.5);
      break;
    }
  }
  return p;
}

struct Case {
  v1::StudySpec spec;
  int trials = 0;
};

// A random spec for `algorithm`: up to 100 parameters, often large ones, and settings at
// either end of their ranges.
v1::StudySpec RandomSpec(std::mt19937_64& random, v1::Algorithm::Name algorithm, bool multi) {
  v1::StudySpec spec;
  spec.set_name("memory");
  spec.mutable_model()->set_kind(v1::Model::EXTERNAL);
  if (multi) {
    for (const char* metric : {"a", "b"}) {
      v1::Objective& o = *spec.add_objectives();
      o.set_metric(metric);
      o.set_goal(v1::Objective::MINIMIZE);
    }
  } else {
    spec.mutable_objective()->set_metric("loss");
    spec.mutable_objective()->set_goal(v1::Objective::MINIMIZE);
  }
  spec.set_max_trials(study::kMaxTrialsLimit);
  v1::Algorithm& a = *spec.mutable_algorithm();
  a.set_name(algorithm);
  a.set_seed(random());
  const int shape = static_cast<int>(random() % 4);  // Few or many parameters, small or large.
  const int dims = shape % 2 == 0 ? 1 + static_cast<int>(random() % 8) : study::kDefaultMaxParameters;
  for (int i = 0; i < dims; ++i) *spec.add_parameters() = RandomParameter(random, i, shape >= 2 && random() % 2 == 0);
  // Either end of a setting's range, or log-uniform between.
  auto pick = [&](int low, int high) {
    const int end = static_cast<int>(random() % 3);
    if (end < 2) return end == 0 ? low : high;
    return static_cast<int>(std::exp(std::uniform_real_distribution<>(std::log(low), std::log(high))(random)));
  };
  switch (algorithm) {
    case v1::Algorithm::BAYESIAN:
      a.mutable_bayesian()->set_n_startup_trials(2);
      a.mutable_bayesian()->set_candidates(pick(512, 100000));
      a.mutable_bayesian()->set_max_fit_points(pick(128, 2000));
      break;
    case v1::Algorithm::TPE:
      a.mutable_tpe()->set_n_startup_trials(2);
      a.mutable_tpe()->set_multivariate(random() % 2 == 0);
      a.mutable_tpe()->set_n_ei_candidates(pick(24, 1000));
      break;
    case v1::Algorithm::NSGA2:
      a.mutable_nsga2()->set_population_size(pick(50, 10000));
      break;
    case v1::Algorithm::GRID:
      spec.clear_parameters();
      for (int i = 0; i < 5; ++i) *spec.add_parameters() = RandomParameter(random, i, false);
      break;
    default:
      break;
  }
  return spec;
}

// `trials` random points of the space, most completed with random objectives, some pruned,
// failed or running.
struct RandomHistory {
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  History view() const { return {trials, keys}; }
};

RandomHistory MakeHistory(const SearchSpace& space, int trials, bool multi, std::mt19937_64& random) {
  RandomHistory history;
  std::vector<double> unit(static_cast<size_t>(space.dims()));
  std::uniform_real_distribution<> uniform(0, 1);
  for (int t = 0; t < trials; ++t) {
    for (double& u : unit) u = uniform(random);
    TrialRecord record{.point = space.FromUnitPoint(unit), .status = TrialStatus::kCompleted};
    const int kind = static_cast<int>(random() % 20);
    if (kind == 0) record.status = TrialStatus::kRunning;
    if (kind == 1) record.status = TrialStatus::kFailed;
    if (kind == 2) record.status = TrialStatus::kPruned;
    if (record.status != TrialStatus::kRunning && record.status != TrialStatus::kFailed) {
      if (multi && record.status == TrialStatus::kCompleted) record.values = {uniform(random), uniform(random)};
      else record.value = uniform(random);
    }
    if (!history.keys.insert(space.Key(record.point)).second) continue;
    history.trials.push_back(std::move(record));
  }
  return history;
}

void CheckAlgorithm(v1::Algorithm::Name algorithm, bool multi, int specs, uint64_t seed) {
  std::mt19937_64 random(seed);
  int accepted = 0;
  for (int s = 0; s < specs; ++s) {
    absl::StatusOr<v1::StudySpec> spec = study::NormalizeStudySpec(RandomSpec(random, algorithm, multi));
    if (!spec.ok()) {
      EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
      std::printf("refused: %s\n", std::string(spec.status().message()).c_str());
      continue;
    }
    ++accepted;
    const SearchSpace space = study::ToSearchSpace(*spec);
    const OptimizerConfig config = study::ToOptimizerConfig(*spec);
    // Small, then large histories (20,000 trials: an AddTrials warm start).
    for (int trials : {40, s % 3 == 0 ? 20000 : 2000}) {
      RandomHistory history = MakeHistory(space, trials, multi, random);
      absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(space, config);
      ASSERT_TRUE(optimizer.ok()) << optimizer.status();
      const absl::Time start = absl::Now();
      const int64_t peak = PeakBytesOf(**optimizer, history.view());
      const absl::Duration took = absl::Now() - start;
      const std::string what = absl::StrCat(v1::Algorithm::Name_Name(algorithm), multi ? " (2 objectives)" : "",
                                            ", ", space.dims(), " parameters, ", EncodedWidth(space),
                                            " encoded columns, ", history.trials.size(), " trials: ",
                                            spec->algorithm().ShortDebugString());
      EXPECT_LE(peak, kSuggestionMemoryBudgetBytes) << what;
      if (algorithm == v1::Algorithm::BAYESIAN) {
        // The bound validation trusts holds, but for a few numbers per trial (ParEGO's
        // scalarised record of each).
        EXPECT_LE(peak, BayesianSuggestionBytes(space, config.bayesian) +
                            kBayesianBytesPerTrial * int64_t{trials})
            << what;
      }
      std::printf("%s: %.1f MB, %s\n", what.c_str(), static_cast<double>(peak) / 1e6,
                  absl::FormatDuration(took).c_str());
    }
  }
  EXPECT_GT(accepted, 0) << "no random spec passed validation";
}

TEST(SuggestionMemoryTest, BayesianStaysWithinItsBound) { CheckAlgorithm(v1::Algorithm::BAYESIAN, false, 16, 1); }
TEST(SuggestionMemoryTest, ParEgoStaysWithinTheBudget) { CheckAlgorithm(v1::Algorithm::BAYESIAN, true, 4, 2); }
TEST(SuggestionMemoryTest, TpeStaysWithinTheBudget) { CheckAlgorithm(v1::Algorithm::TPE, false, 6, 3); }
TEST(SuggestionMemoryTest, MotpeStaysWithinTheBudget) { CheckAlgorithm(v1::Algorithm::TPE, true, 4, 4); }
TEST(SuggestionMemoryTest, Nsga2StaysWithinTheBudget) { CheckAlgorithm(v1::Algorithm::NSGA2, true, 4, 5); }
TEST(SuggestionMemoryTest, OthersStayWithinTheBudget) {
  for (v1::Algorithm::Name algorithm : {v1::Algorithm::RANDOM, v1::Algorithm::GRID, v1::Algorithm::HILL_CLIMBING}) {
    CheckAlgorithm(algorithm, false, 4, 6);
  }
}

}  // namespace
}  // namespace dhpt::optimizer
