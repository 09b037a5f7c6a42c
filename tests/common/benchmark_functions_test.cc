#include "services/common/benchmark_functions.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dhpt
