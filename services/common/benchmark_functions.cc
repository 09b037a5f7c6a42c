#include "services/common/benchmark_functions.h"

#include <cmath>
#include <numbers>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dhpt {
namespace {

constexpr double kPi = std::numbers::pi;

// Branin-Hoo on x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887 at three points.
double Branin(std::span<const double> x) {
  const double b = 5.1 / (4 * kPi * kPi), c = 5 / kPi, t = 1 / (8 * kPi);
  const double u = x[1] - b * x[0] * x[0] + c * x[0] - 6;
  return u * u + 10 * (1 - t) * std::cos(x[0]) + 10;
}

// Hartmann-6 on [0, 1]^6; minimum -3.32237.
double Hartmann6(std::span<const double> x) {
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                      {0.05, 10, 17, 0.1, 8, 14},
                                      {3, 3.5, 1.7, 10, 17, 8},
                                      {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double kP[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                      {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                      {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                      {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double sum = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += kA[i][j] * (x[j] - kP[i][j]) * (x[j] - kP[i][j]);
    sum += kAlpha[i] * std::exp(-inner);
  }
  return -sum;
}

// Rosenbrock on [-5, 10]^d; minimum 0 at (1, ..., 1).
double Rosenbrock(std::span<const double> x) {
  double sum = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    sum += 100 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1 - x[i], 2);
  }
  return sum;
}

// Ackley on [-32.768, 32.768]^d; minimum 0 at the origin.
double Ackley(std::span<const double> x) {
  const double d = static_cast<double>(x.size());
  double squares = 0, cosines = 0;
  for (double v : x) {
    squares += v * v;
    cosines += std::cos(2 * kPi * v);
  }
  return -20 * std::exp(-0.2 * std::sqrt(squares / d)) - std::exp(cosines / d) + 20 + std::exp(1.0);
}

// Levy on [-10, 10]^d; minimum 0 at (1, ..., 1).
double Levy(std::span<const double> x) {
  auto w = [&](size_t i) { return 1 + (x[i] - 1) / 4; };
  const size_t d = x.size();
  double sum = std::pow(std::sin(kPi * w(0)), 2);
  for (size_t i = 0; i + 1 < d; ++i) {
    sum += std::pow(w(i) - 1, 2) * (1 + 10 * std::pow(std::sin(kPi * w(i) + 1), 2));
  }
  sum += std::pow(w(d - 1) - 1, 2) * (1 + std::pow(std::sin(2 * kPi * w(d - 1)), 2));
  return sum;
}

// Styblinski-Tang on [-5, 5]^d; minimum -39.16617 d at x_i = -2.903534.
double StyblinskiTang(std::span<const double> x) {
  double sum = 0;
  for (double v : x) sum += v * v * v * v - 16 * v * v + 5 * v;
  return sum / 2;
}

std::pair<double, double> BraninBounds(int i, int) {
  return i == 0 ? std::pair{-5.0, 10.0} : std::pair{0.0, 15.0};
}

std::pair<double, double> UnitBounds(int, int) { return {0.0, 1.0}; }

// ZDT1 and ZDT2 (Zitzler, Deb, Thiele 2000) on [0, 1]^d, d >= 2: f1 = x1,
// g = 1 + 9 mean(x2..xd), f2 = g (1 - sqrt(f1 / g)) (ZDT1, convex front) or g (1 - (f1 / g)^2)
// (ZDT2, concave front). The front is g = 1 (x2..xd = 0).
double ZdtG(std::span<const double> x) {
  double sum = 0;
  for (size_t i = 1; i < x.size(); ++i) sum += x[i];
  return 1 + 9 * sum / static_cast<double>(x.size() - 1);
}

void Zdt1(std::span<const double> x, std::span<double> f) {
  const double g = ZdtG(x);
  f[0] = x[0];
  f[1] = g * (1 - std::sqrt(x[0] / g));
}

void Zdt2(std::span<const double> x, std::span<double> f) {
  const double g = ZdtG(x);
  f[0] = x[0];
  f[1] = g * (1 - (x[0] / g) * (x[0] / g));
}

// DTLZ2 (Deb, Thiele, Laumanns, Zitzler 2002) with 3 objectives on [0, 1]^d, d >= 3:
// g = sum over x3..xd of (x - 0.5)^2; the front is the positive octant of the unit sphere.
void Dtlz2(std::span<const double> x, std::span<double> f) {
  double g = 0;
  for (size_t i = 2; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
  const double a = x[0] * kPi / 2, b = x[1] * kPi / 2;
  f[0] = (1 + g) * std::cos(a) * std::cos(b);
  f[1] = (1 + g) * std::cos(a) * std::sin(b);
  f[2] = (1 + g) * std::sin(a);
}

}  // namespace

const std::vector<MultiObjectiveFunction>& AllMultiObjectiveFunctions() {
  static const auto* const kFunctions = new std::vector<MultiObjectiveFunction>{
      {"zdt1", 2, 2, Zdt1, UnitBounds},
      {"zdt2", 2, 2, Zdt2, UnitBounds},
      {"dtlz2", 3, 3, Dtlz2, UnitBounds},
  };
  return *kFunctions;
}

const MultiObjectiveFunction* FindMultiObjectiveFunction(absl::string_view name) {
  for (const MultiObjectiveFunction& function : AllMultiObjectiveFunctions()) {
    if (function.name == name) return &function;
  }
  return nullptr;
}

std::string MultiObjectiveMetric(int i) { return absl::StrCat("f", i + 1); }

const std::vector<BenchmarkFunction>& AllBenchmarkFunctions() {
  static const auto* const kFunctions = new std::vector<BenchmarkFunction>{
      {"branin", 2, 2, Branin, BraninBounds, [](int) { return 0.397887357729738; }},
      {"hartmann6", 6, 6, Hartmann6, [](int, int) { return std::pair{0.0, 1.0}; },
       [](int) { return -3.32236801141551; }},
      {"rosenbrock", 0, 2, Rosenbrock, [](int, int) { return std::pair{-5.0, 10.0}; },
       [](int) { return 0.0; }},
      {"ackley", 0, 1, Ackley, [](int, int) { return std::pair{-32.768, 32.768}; },
       [](int) { return 0.0; }},
      {"levy", 0, 1, Levy, [](int, int) { return std::pair{-10.0, 10.0}; },
       [](int) { return 0.0; }},
      {"styblinski_tang", 0, 1, StyblinskiTang, [](int, int) { return std::pair{-5.0, 5.0}; },
       [](int d) { return -39.16616570377142 * d; }},
  };
  return *kFunctions;
}

const BenchmarkFunction* FindBenchmarkFunction(absl::string_view name) {
  for (const BenchmarkFunction& function : AllBenchmarkFunctions()) {
    if (function.name == name) return &function;
  }
  return nullptr;
}

std::string BenchmarkFunctionNames() {
  return absl::StrJoin(AllBenchmarkFunctions(), ", ",
                       [](std::string* out, const BenchmarkFunction& f) { out->append(f.name.data(), f.name.size()); });
}

}  // namespace dhpt
