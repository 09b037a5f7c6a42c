#include "services/optimizer/gaussian_process.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace dhpt::optimizer {
namespace {

const double kSqrt5 = std::sqrt(5.0);

// Gamma(shape, rate) log density of v = exp(t), including the Jacobian of t = log v, and its
// derivative with respect to t.
double LogGammaPrior(double t, double shape, double rate, double* derivative) {
  const double v = std::exp(t);
  *derivative = shape - rate * v;
  return shape * t - rate * v;
}

// Priors in the spirit of BoTorch's defaults for standardised targets on the unit cube.
constexpr double kLengthscaleShape = 3.0, kLengthscaleRate = 6.0;
constexpr double kSignalShape = 2.0, kSignalRate = 0.15;
constexpr double kNoiseShape = 1.1, kNoiseRate = 0.05;
constexpr double kMinNoise = 1e-6;

// Rows divided by the lengthscales.
Eigen::MatrixXd Scaled(const Eigen::MatrixXd& x, const GpHyperparameters& h) {
  return x.array().rowwise() * (-h.log_lengthscales.array()).exp().transpose();
}

// r_ij = |a_i - b_j| for scaled rows, through one matrix product rather than pair by pair.
Eigen::MatrixXd Distances(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  Eigen::MatrixXd d2 = -2.0 * a * b.transpose();
  d2.colwise() += a.rowwise().squaredNorm();
  d2.rowwise() += b.rowwise().squaredNorm().transpose();
  return d2.cwiseMax(0.0).cwiseSqrt();
}

Eigen::MatrixXd Matern52FromDistances(const Eigen::MatrixXd& r, double signal_variance) {
  return signal_variance *
         ((1.0 + kSqrt5 * r.array() + (5.0 / 3.0) * r.array().square()) * (-kSqrt5 * r.array()).exp())
             .matrix();
}

Eigen::MatrixXd Covariance(const Eigen::MatrixXd& x, const GpHyperparameters& h) {
  const Eigen::MatrixXd scaled = Scaled(x, h);
  return Matern52FromDistances(Distances(scaled, scaled), std::exp(h.log_signal_variance));
}

}  // namespace

Eigen::VectorXd GpHyperparameters::Pack() const {
  Eigen::VectorXd packed(size());
  packed << log_lengthscales, log_signal_variance, log_noise_variance;
  return packed;
}

GpHyperparameters GpHyperparameters::Unpack(const Eigen::VectorXd& packed, int dims) {
  GpHyperparameters h;
  h.log_lengthscales = packed.head(dims);
  h.log_signal_variance = packed(dims);
  h.log_noise_variance = packed(dims + 1);
  return h;
}

double GaussianProcess::LogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                     const GpHyperparameters& h, Eigen::VectorXd* gradient) {
  const int n = static_cast<int>(x.rows()), d = static_cast<int>(x.cols());
  const Eigen::MatrixXd signal = Covariance(x, h);
  const double noise = std::exp(h.log_noise_variance) + kMinNoise;
  Eigen::MatrixXd k = signal;
  k.diagonal().array() += noise;
  Eigen::LLT<Eigen::MatrixXd> llt(k);
  if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
  const Eigen::VectorXd alpha = llt.solve(y);
  const Eigen::MatrixXd l = llt.matrixL();
  double value = -0.5 * y.dot(alpha) - l.diagonal().array().log().sum() -
                 0.5 * n * std::log(2 * std::numbers::pi);
  Eigen::VectorXd prior_gradient(h.size());
  for (int i = 0; i < d; ++i) {
    value += LogGammaPrior(h.log_lengthscales(i), kLengthscaleShape, kLengthscaleRate,
                           &prior_gradient(i));
  }
  value += LogGammaPrior(h.log_signal_variance, kSignalShape, kSignalRate, &prior_gradient(d));
  value += LogGammaPrior(h.log_noise_variance, kNoiseShape, kNoiseRate, &prior_gradient(d + 1));
  if (gradient == nullptr) return value;

  // d/dtheta = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta) = 1/2 sum(W .* dK/dtheta).
  const Eigen::MatrixXd w = alpha * alpha.transpose() - llt.solve(Eigen::MatrixXd::Identity(n, n));
  gradient->resize(h.size());
  // dk/dlog l_dim = 5/3 s2 (1 + sqrt5 r) exp(-sqrt5 r) (delta_dim / l_dim)^2. With F_ij the
  // pair factor and scaled inputs z, sum_ij F_ij (z_i - z_j)^2 per dimension is
  // 2 (z^2)^T F 1 - 2 diag(z^T F z), all matrix products.
  const double s2 = std::exp(h.log_signal_variance);
  const Eigen::MatrixXd z = Scaled(x, h);
  const Eigen::ArrayXXd r = Distances(z, z).array();
  const Eigen::MatrixXd f =
      (w.array() * (5.0 / 3.0) * s2 * (1.0 + kSqrt5 * r) * (-kSqrt5 * r).exp()).matrix();
  const Eigen::VectorXd row_sums = f.rowwise().sum();
  gradient->head(d) = z.array().square().matrix().transpose() * row_sums -
                      (z.array() * (f * z).array()).colwise().sum().transpose().matrix();
  (*gradient)(d) = 0.5 * (w.array() * signal.array()).sum();
  (*gradient)(d + 1) = 0.5 * w.trace() * std::exp(h.log_noise_variance);
  *gradient += prior_gradient;
  return value;
}

GpHyperparameters GaussianProcess::Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                       GpHyperparameters start, int iterations) {
  // iRprop-: per-coordinate steps that grow while the gradient keeps its sign and shrink when
  // it flips; robust without a line search, and cheap per iteration.
  const int dims = static_cast<int>(x.cols());
  Eigen::VectorXd theta = start.Pack();
  Eigen::VectorXd step = Eigen::VectorXd::Constant(theta.size(), 0.1);
  Eigen::VectorXd previous = Eigen::VectorXd::Zero(theta.size());
  Eigen::VectorXd best_theta = theta;
  double best = -std::numeric_limits<double>::infinity();
  for (int it = 0; it < iterations; ++it) {
    Eigen::VectorXd gradient;
    const double value = LogPosterior(x, y, GpHyperparameters::Unpack(theta, dims), &gradient);
    if (!std::isfinite(value)) break;
    if (value > best) {
      best = value;
      best_theta = theta;
    }
    for (int i = 0; i < theta.size(); ++i) {
      const double sign = gradient(i) * previous(i);
      if (sign > 0) {
        step(i) = std::min(step(i) * 1.2, 1.0);
      } else if (sign < 0) {
        step(i) = std::max(step(i) * 0.5, 1e-6);
        gradient(i) = 0;
      }
      if (gradient(i) > 0) theta(i) += step(i);
      if (gradient(i) < 0) theta(i) -= step(i);
    }
    // Keep lengthscales and variances in sane ranges.
    theta.head(dims) = theta.head(dims).cwiseMax(std::log(1e-3)).cwiseMin(std::log(1e3));
    theta(dims) = std::clamp(theta(dims), std::log(1e-3), std::log(1e3));
    theta(dims + 1) = std::clamp(theta(dims + 1), std::log(1e-8), std::log(10.0));
    previous = gradient;
  }
  return GpHyperparameters::Unpack(best_theta, dims);
}

GaussianProcess::GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, GpHyperparameters h)
    : scaled_x_(std::move(x)), h_(std::move(h)) {
  // Scaled once, in place: Predict would otherwise copy the inputs on every call.
  scaled_x_.array().rowwise() *= (-h_.log_lengthscales.array()).exp().transpose();
  Eigen::MatrixXd k = Matern52FromDistances(Distances(scaled_x_, scaled_x_),
                                            std::exp(h_.log_signal_variance));
  k.diagonal().array() += std::exp(h_.log_noise_variance) + kMinNoise;
  cholesky_.compute(k);
  alpha_ = cholesky_.solve(y);
}

void GaussianProcess::Predict(const Eigen::MatrixXd& points, Eigen::VectorXd* mean,
                              Eigen::VectorXd* variance) const {
  const int m = static_cast<int>(points.rows());
  const Eigen::MatrixXd cross = Matern52FromDistances(Distances(scaled_x_, Scaled(points, h_)),
                                                      std::exp(h_.log_signal_variance));
  *mean = cross.transpose() * alpha_;
  const Eigen::MatrixXd v = cholesky_.matrixL().solve(cross);
  *variance = (Eigen::VectorXd::Constant(m, std::exp(h_.log_signal_variance)) -
               v.colwise().squaredNorm().transpose())
                  .cwiseMax(1e-12);
}

double LogExpectedImprovement(double mean, double variance, double best) {
  const double sigma = std::sqrt(variance);
  const double z = (best - mean) / sigma;
  constexpr double kLogRoot2Pi = 0.91893853320467274178;  // log sqrt(2 pi)
  if (z > -20) {
    // Long double keeps the cancellation of z Phi(z) + phi(z) harmless down to z = -20.
    const long double lz = z;
    const long double cdf = 0.5L * std::erfc(-lz / std::sqrt(2.0L));
    const long double pdf = std::exp(-0.5L * lz * lz - static_cast<long double>(kLogRoot2Pi));
    return std::log(sigma) + static_cast<double>(std::log(std::max(lz * cdf + pdf, 1e-4900L)));
  }
  // z Phi(z) + phi(z) = phi(z) (1/z^2 - 3/z^4 + 15/z^6 - 105/z^8 ...) as z -> -inf.
  const double w = 1 / (z * z);
  const double series = w * (1 - 3 * w * (1 - 5 * w * (1 - 7 * w)));
  return std::log(sigma) - 0.5 * z * z - kLogRoot2Pi + std::log(series);
}

namespace {

double YeoJohnson(double y, double lambda) {
  if (y >= 0) {
    return std::abs(lambda) < 1e-9 ? std::log1p(y) : (std::pow(y + 1, lambda) - 1) / lambda;
  }
  return std::abs(lambda - 2) < 1e-9 ? -std::log1p(-y)
                                     : -(std::pow(1 - y, 2 - lambda) - 1) / (2 - lambda);
}

Eigen::VectorXd Standardized(const Eigen::VectorXd& y) {
  const double mean = y.mean();
  const double spread = std::sqrt((y.array() - mean).square().mean());
  return (y.array() - mean) / (spread > 1e-12 ? spread : 1.0);
}

}  // namespace

Eigen::VectorXd YeoJohnsonStandardize(const Eigen::VectorXd& y, double* lambda_out) {
  // Scaled but not centred, as HEBO does: the power then acts on the values' own origin
  // (Rosenbrock's 0, a loss's 0), where a centred copy would leave the bulk untouched.
  const double spread = std::sqrt((y.array() - y.mean()).square().mean());
  const Eigen::VectorXd z = y / (spread > 1e-12 ? spread : 1.0);
  const int n = static_cast<int>(z.size());
  // The Jacobian term of the Yeo-Johnson log-likelihood, per unit of (lambda - 1).
  double jacobian = 0;
  for (int i = 0; i < n; ++i) jacobian += std::copysign(std::log1p(std::abs(z(i))), z(i));
  double best_lambda = 1, best_likelihood = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd t(n);
  for (int step = 0; step <= 120; ++step) {
    const double lambda = -3 + 0.05 * step;
    for (int i = 0; i < n; ++i) t(i) = YeoJohnson(z(i), lambda);
    const double variance = (t.array() - t.mean()).square().mean();
    if (!(variance > 1e-300) || !std::isfinite(variance)) continue;
    const double likelihood = -0.5 * n * std::log(variance) + (lambda - 1) * jacobian;
    if (likelihood > best_likelihood) {
      best_likelihood = likelihood;
      best_lambda = lambda;
    }
  }
  if (lambda_out != nullptr) *lambda_out = best_lambda;
  for (int i = 0; i < n; ++i) t(i) = YeoJohnson(z(i), best_lambda);
  return Standardized(t);
}

}  // namespace dhpt::optimizer
