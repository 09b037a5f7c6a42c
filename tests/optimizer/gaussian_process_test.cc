#include "services/optimizer/gaussian_process.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

namespace dhpt::optimizer {
namespace {

struct Data {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
};

Data Sample(int n, int d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Data data{Eigen::MatrixXd(n, d), Eigen::VectorXd(n)};
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) data.x(i, j) = u(rng);
    data.y(i) = std::sin(6 * data.x(i, 0)) + 0.5 * data.x(i, d - 1);
  }
  data.y = (data.y.array() - data.y.mean()) / std::sqrt((data.y.array() - data.y.mean()).square().mean());
  return data;
}

GpHyperparameters Hyper(int d) {
  GpHyperparameters h;
  h.log_lengthscales = Eigen::VectorXd::LinSpaced(d, std::log(0.2), std::log(0.7));
  h.log_signal_variance = std::log(1.3);
  h.log_noise_variance = std::log(0.05);
  return h;
}

TEST(GaussianProcessTest, LikelihoodGradientMatchesFiniteDifferences) {
  const Data data = Sample(25, 3, 1);
  const GpHyperparameters h = Hyper(3);
  Eigen::VectorXd gradient;
  GaussianProcess::LogPosterior(data.x, data.y, h, &gradient);
  const Eigen::VectorXd theta = h.Pack();
  for (int i = 0; i < theta.size(); ++i) {
    const double eps = 1e-5;
    Eigen::VectorXd plus = theta, minus = theta;
    plus(i) += eps;
    minus(i) -= eps;
    const double numeric =
        (GaussianProcess::LogPosterior(data.x, data.y, GpHyperparameters::Unpack(plus, 3), nullptr) -
         GaussianProcess::LogPosterior(data.x, data.y, GpHyperparameters::Unpack(minus, 3), nullptr)) /
        (2 * eps);
    EXPECT_NEAR(gradient(i), numeric, 1e-4 * std::max(1.0, std::abs(numeric))) << "parameter " << i;
  }
}

TEST(GaussianProcessTest, FitRaisesThePosteriorAndFindsTheIrrelevantInput) {
  const Data data = Sample(60, 3, 2);  // y ignores the middle input.
  GpHyperparameters start;
  start.log_lengthscales = Eigen::VectorXd::Constant(3, std::log(0.5));
  const double before = GaussianProcess::LogPosterior(data.x, data.y, start, nullptr);
  const GpHyperparameters fitted = GaussianProcess::Fit(data.x, data.y, start, 80);
  EXPECT_GT(GaussianProcess::LogPosterior(data.x, data.y, fitted, nullptr), before);
  EXPECT_GT(fitted.log_lengthscales(1), fitted.log_lengthscales(0));
}

TEST(GaussianProcessTest, PosteriorInterpolatesAndIsUncertainFarAway) {
  const Data data = Sample(30, 2, 3);
  GpHyperparameters h = Hyper(2);
  h.log_noise_variance = std::log(1e-6);
  GaussianProcess gp(data.x, data.y, h);
  Eigen::VectorXd mean, variance;
  gp.Predict(data.x.topRows(5), &mean, &variance);
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(mean(i), data.y(i), 1e-3);
    EXPECT_LT(variance(i), 1e-3);
  }
  Eigen::MatrixXd far(1, 2);
  far << 50, 50;
  gp.Predict(far, &mean, &variance);
  EXPECT_NEAR(mean(0), 0, 1e-9);
  EXPECT_NEAR(variance(0), 1.3, 1e-9);  // The prior variance.
}

TEST(LogExpectedImprovementTest, MatchesTheClosedFormAndStaysFiniteFarAway) {
  const double mean = 0.3, variance = 0.04, best = 0.1;
  const double sigma = 0.2, z = (best - mean) / sigma;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * std::numbers::pi);
  EXPECT_NEAR(LogExpectedImprovement(mean, variance, best), std::log(sigma * (z * cdf + pdf)), 1e-12);
  const double far = LogExpectedImprovement(100, 0.01, 0);
  EXPECT_TRUE(std::isfinite(far));
  EXPECT_LT(far, LogExpectedImprovement(10, 0.01, 0));
  // Continuous across the switch to the asymptotic form at z = -20.
  EXPECT_NEAR(LogExpectedImprovement(2 - 1e-9, 0.01, 0), LogExpectedImprovement(2 + 1e-9, 0.01, 0), 1e-6);
}

TEST(YeoJohnsonStandardizeTest, TamesAHeavyTailAndKeepsTheOrder) {
  // Log-normal values, Rosenbrock-like: most small, a few orders of magnitude larger.
  std::mt19937_64 generator(3);
  std::normal_distribution<double> normal;
  Eigen::VectorXd y(200);
  for (int i = 0; i < y.size(); ++i) y(i) = std::exp(2.0 * normal(generator));
  double lambda = 1;
  const Eigen::VectorXd t = YeoJohnsonStandardize(y, &lambda);
  EXPECT_LT(lambda, 0.5);  // A strong compression was chosen.
  EXPECT_NEAR(t.mean(), 0, 1e-9);
  EXPECT_NEAR((t.array() - t.mean()).square().mean(), 1, 1e-9);
  auto skewness = [](const Eigen::VectorXd& v) {
    const Eigen::ArrayXd c = v.array() - v.mean();
    return (c.cube().mean()) / std::pow(c.square().mean(), 1.5);
  };
  // Yeo-Johnson cannot undo a log-normal entirely (its +1 keeps the bulk near zero linear), but
  // it must take most of the skew out.
  EXPECT_GT(skewness(y), 5);
  EXPECT_LT(skewness(t), skewness(y) / 2);
  for (int i = 0; i < y.size(); ++i) {
    for (int j = 0; j < y.size(); ++j) {
      if (y(i) < y(j)) {
        ASSERT_LT(t(i), t(j));
      }
    }
  }
}

TEST(YeoJohnsonStandardizeTest, LeavesNormalDataNearlyAsItIs) {
  std::mt19937_64 generator(5);
  std::normal_distribution<double> normal;
  Eigen::VectorXd y(500);
  for (int i = 0; i < y.size(); ++i) y(i) = 10 + 3 * normal(generator);
  double lambda = 0;
  const Eigen::VectorXd t = YeoJohnsonStandardize(y, &lambda);
  EXPECT_NEAR(lambda, 1, 0.5);
  const Eigen::ArrayXd a = y.array() - y.mean(), b = t.array() - t.mean();
  const double correlation = (a * b).sum() / std::sqrt(a.square().sum() * b.square().sum());
  EXPECT_GT(correlation, 0.995);
}

}  // namespace
}  // namespace dhpt::optimizer
