#pragma once

// A Gaussian process on the unit cube with a Matern-5/2 ARD kernel, for Bayesian
// optimisation. Hyperparameters (one lengthscale per input, the signal variance and the
// noise variance, all as logarithms) are fitted by maximising the log marginal likelihood plus
// log Gamma priors, with analytic gradients and iRprop- steps.

#include <vector>

#include <Eigen/Dense>

namespace dhpt::optimizer {

struct GpHyperparameters {
  Eigen::VectorXd log_lengthscales;
  double log_signal_variance = 0;
  double log_noise_variance = std::log(1e-2);

  int size() const { return static_cast<int>(log_lengthscales.size()) + 2; }
  Eigen::VectorXd Pack() const;
  static GpHyperparameters Unpack(const Eigen::VectorXd& packed, int dims);
};

class GaussianProcess {
 public:
  // Rows of `x` are inputs in [0, 1]^d; `y` should be standardised.
  GaussianProcess(Eigen::MatrixXd x, Eigen::VectorXd y, GpHyperparameters hyperparameters);

  // Log marginal likelihood plus the log priors, and its gradient with respect to Pack().
  static double LogPosterior(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                             const GpHyperparameters& h, Eigen::VectorXd* gradient);
  // Maximises LogPosterior from `start` for `iterations` steps.
  static GpHyperparameters Fit(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                               GpHyperparameters start, int iterations);

  // Posterior mean and variance (of the latent function) at each row of `points`.
  void Predict(const Eigen::MatrixXd& points, Eigen::VectorXd* mean, Eigen::VectorXd* variance) const;
  const GpHyperparameters& hyperparameters() const { return h_; }

 private:
  Eigen::MatrixXd scaled_x_;  // The inputs divided by the lengthscales.
  GpHyperparameters h_;
  Eigen::LLT<Eigen::MatrixXd> cholesky_;
  Eigen::VectorXd alpha_;  // K^-1 y
};

// Objectives for the GP: scaled to unit spread, then Yeo-Johnson-transformed with the power that
// makes them most normal (maximum likelihood over [-3, 3]), then standardised. Monotone, so
// the best stays the best; heavy tails (Rosenbrock's values span five orders of magnitude)
// stop dominating the fit. `lambda`, when given, receives the power chosen.
Eigen::VectorXd YeoJohnsonStandardize(const Eigen::VectorXd& y, double* lambda = nullptr);

// log EI for minimisation: log E[max(best - f, 0)] with f ~ N(mean, variance), computed
// without underflow far from the incumbent.
double LogExpectedImprovement(double mean, double variance, double best);

}  // namespace dhpt::optimizer
