#include "services/common/benchmark_functions.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace dhpt {
namespace {

double At(absl::string_view name, std::vector<double> x) {
  return FindBenchmarkFunction(name)->evaluate(x);
}

TEST(BenchmarkFunctionsTest, KnownOptimaAreReached) {
  EXPECT_NEAR(At("branin", {-std::numbers::pi, 12.275}), 0.397887, 1e-5);
  EXPECT_NEAR(At("branin", {std::numbers::pi, 2.275}), 0.397887, 1e-5);
  EXPECT_NEAR(At("hartmann6", {0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}),
              -3.32237, 1e-4);
  EXPECT_DOUBLE_EQ(At("rosenbrock", {1, 1, 1, 1}), 0);
  EXPECT_NEAR(At("ackley", {0, 0, 0, 0, 0}), 0, 1e-12);
  EXPECT_NEAR(At("levy", {1, 1, 1}), 0, 1e-12);
  EXPECT_NEAR(At("styblinski_tang", {-2.903534, -2.903534}), -39.16617 * 2, 1e-4);
}

TEST(BenchmarkFunctionsTest, OptimaAreMinimaNearby) {
  for (const BenchmarkFunction& f : AllBenchmarkFunctions()) {
    const int d = f.dims ? f.dims : 3;
    const double minimum = f.minimum(d);
    // Any point of the domain is no better than the global minimum.
    for (int k = 0; k < 50; ++k) {
      std::vector<double> x(d);
      for (int i = 0; i < d; ++i) {
        auto [lo, hi] = f.bounds(i, d);
        x[i] = lo + (hi - lo) * ((k * 37 + i * 11) % 50) / 49.0;
      }
      EXPECT_GE(f.evaluate(x), minimum - 1e-6) << f.name;
    }
  }
}

TEST(BenchmarkFunctionsTest, DimensionsAndLookup) {
  EXPECT_TRUE(FindBenchmarkFunction("branin")->AcceptsDims(2));
  EXPECT_FALSE(FindBenchmarkFunction("branin")->AcceptsDims(3));
  EXPECT_FALSE(FindBenchmarkFunction("rosenbrock")->AcceptsDims(1));
  EXPECT_TRUE(FindBenchmarkFunction("ackley")->AcceptsDims(7));
  EXPECT_EQ(FindBenchmarkFunction("nope"), nullptr);
  EXPECT_NE(BenchmarkFunctionNames().find("hartmann6"), std::string::npos);
}

std::vector<double> Objectives(absl::string_view name, std::vector<double> x) {
  const MultiObjectiveFunction* f = FindMultiObjectiveFunction(name);
  std::vector<double> values(static_cast<size_t>(f->objectives));
  f->evaluate(x, values);
  return values;
}

TEST(MultiObjectiveFunctionsTest, HandComputedValues) {
  // ZDT1 at x = (0.25, 0.5, 0.5): g = 1 + 9 * 0.5 = 5.5, f2 = 5.5 (1 - sqrt(0.25 / 5.5)).
  std::vector<double> f = Objectives("zdt1", {0.25, 0.5, 0.5});
  EXPECT_DOUBLE_EQ(f[0], 0.25);
  EXPECT_NEAR(f[1], 5.5 * (1 - std::sqrt(0.25 / 5.5)), 1e-12);
  // On the front (x2..xd = 0): f2 = 1 - sqrt(f1) for ZDT1, 1 - f1^2 for ZDT2.
  EXPECT_NEAR(Objectives("zdt1", {0.36, 0, 0, 0})[1], 0.4, 1e-12);
  EXPECT_NEAR(Objectives("zdt2", {0.5, 0, 0})[1], 0.75, 1e-12);
  f = Objectives("zdt2", {1, 1});  // g = 10, f2 = 10 (1 - 0.01).
  EXPECT_NEAR(f[1], 9.9, 1e-12);
  // DTLZ2: on the front (x3..xd = 0.5) the objectives lie on the unit sphere.
  f = Objectives("dtlz2", {0.3, 0.7, 0.5, 0.5, 0.5});
  EXPECT_NEAR(f[0] * f[0] + f[1] * f[1] + f[2] * f[2], 1, 1e-12);
  f = Objectives("dtlz2", {0, 0, 1, 0});  // g = 0.5: (1.5, 0, 0).
  EXPECT_NEAR(f[0], 1.5, 1e-12);
  EXPECT_NEAR(f[1], 0, 1e-12);
  EXPECT_NEAR(f[2], 0, 1e-12);
  f = Objectives("dtlz2", {1, 0, 0.5});
  EXPECT_NEAR(f[2], 1, 1e-12);
}

TEST(MultiObjectiveFunctionsTest, LookupAndShape) {
  ASSERT_NE(FindMultiObjectiveFunction("zdt1"), nullptr);
  EXPECT_EQ(FindMultiObjectiveFunction("zdt2")->objectives, 2);
  EXPECT_EQ(FindMultiObjectiveFunction("dtlz2")->objectives, 3);
  EXPECT_EQ(FindMultiObjectiveFunction("dtlz2")->min_dims, 3);
  EXPECT_EQ(FindMultiObjectiveFunction("branin"), nullptr);
  EXPECT_EQ(FindBenchmarkFunction("zdt1"), nullptr);  // Not a single-objective function.
  for (const MultiObjectiveFunction& f : AllMultiObjectiveFunctions()) {
    EXPECT_EQ(f.bounds(0, 10), (std::pair{0.0, 1.0})) << f.name;
  }
  EXPECT_EQ(MultiObjectiveMetric(0), "f1");
  EXPECT_EQ(MultiObjectiveMetric(2), "f3");
}

}  // namespace
}  // namespace dhpt
