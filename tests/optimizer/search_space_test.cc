#include "services/optimizer/search_space.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace dhpt::optimizer {
namespace {

ParameterSpec Double(double min, double max, bool log = false, double step = 0) {
  ParameterSpec p;
  p.name = "d";
  p.kind = ParameterKind::kDouble;
  p.min = min;
  p.max = max;
  p.log = log;
  p.step = step;
  return p;
}

ParameterSpec Int(double min, double max, bool log = false, double step = 0) {
  ParameterSpec p = Double(min, max, log, step);
  p.name = "i";
  p.kind = ParameterKind::kInt;
  return p;
}

TEST(SearchSpaceTest, DoubleMapsUnitIntervalOntoRange) {
  SearchSpace space({Double(2, 4)});
  EXPECT_DOUBLE_EQ(std::get<double>(space.FromUnit(0, 0.0)), 2);
  EXPECT_DOUBLE_EQ(std::get<double>(space.FromUnit(0, 0.5)), 3);
}

TEST(SearchSpaceTest, LogRangeIsUniformInLogSpace) {
  SearchSpace space({Double(1e-3, 1e1, /*log=*/true)});
  EXPECT_NEAR(std::get<double>(space.FromUnit(0, 0.5)), 0.1, 1e-12);
  EXPECT_NEAR(std::get<double>(space.FromUnit(0, 0.25)), 0.01, 1e-12);
}

TEST(SearchSpaceTest, StepsRoundToTheLattice) {
  SearchSpace space({Double(0, 1, false, 0.25)});
  EXPECT_DOUBLE_EQ(std::get<double>(space.FromUnit(0, 0.3)), 0.25);
  EXPECT_EQ(space.ValueCount(0), 5);
}

// A max off the lattice (2 to 500 by 50) is not a value: the last point is 452. Rounding then
// clamping to max gave 500, which the scheduler refused when it came back as a value (found
// by fuzz/spec_fuzzer).
TEST(SearchSpaceTest, AMaxOffTheLatticeIsNeverSuggested) {
  SearchSpace space({Int(2, 500, false, 50), Double(0, 1.05, false, 0.1)});
  EXPECT_EQ(std::get<int64_t>(space.FromUnit(0, 1.0)), 452);
  EXPECT_EQ(std::get<int64_t>(space.FromInternal(0, 500)), 452);
  EXPECT_EQ(std::get<int64_t>(space.FromInternal(0, -100)), 2);
  EXPECT_EQ(space.ValueCount(0), 10);
  EXPECT_NEAR(std::get<double>(space.FromUnit(1, 1.0)), 1.0, 1e-12);
  EXPECT_NEAR(std::get<double>(space.FromInternal(1, 1.05)), 1.0, 1e-12);
  EXPECT_NEAR(std::get<double>(space.FromInternal(1, 0.3)), 0.3, 1e-12);
}

TEST(SearchSpaceTest, IntsAreEquallyLikelyIncludingTheEnds) {
  SearchSpace space({Int(1, 4)});
  std::map<int64_t, int> counts;
  for (int k = 0; k < 4000; ++k) counts[std::get<int64_t>(space.FromUnit(0, (k + 0.5) / 4000))]++;
  ASSERT_EQ(counts.size(), 4u);
  for (auto [value, count] : counts) EXPECT_EQ(count, 1000) << value;
}

TEST(SearchSpaceTest, LogIntsStayInRange) {
  SearchSpace space({Int(1, 1000, /*log=*/true)});
  for (double u : {0.0, 0.1, 0.5, 0.999999}) {
    const int64_t v = std::get<int64_t>(space.FromUnit(0, u));
    EXPECT_GE(v, 1);
    EXPECT_LE(v, 1000);
  }
}

TEST(SearchSpaceTest, ChoicesAndFiniteSize) {
  ParameterSpec c;
  c.name = "c";
  c.kind = ParameterKind::kCategorical;
  c.categories = {"a", "b", "c"};
  SearchSpace space({c, Int(0, 9)});
  EXPECT_EQ(std::get<std::string>(space.FromUnit(0, 0.99)), "c");
  EXPECT_EQ(space.FiniteSize(), 30);
  EXPECT_EQ(SearchSpace({Double(0, 1)}).FiniteSize(), std::nullopt);
}

TEST(SearchSpaceTest, KeysIdentifyPoints) {
  SearchSpace space({Double(0, 1), Int(0, 3)});
  EXPECT_EQ(space.Key({0.5, int64_t{1}}), space.Key({0.5, int64_t{1}}));
  EXPECT_NE(space.Key({0.5, int64_t{1}}), space.Key({0.5, int64_t{2}}));
  EXPECT_EQ(space.Key({0.0, int64_t{1}}), space.Key({-0.0, int64_t{1}}));
}

}  // namespace
}  // namespace dhpt::optimizer
