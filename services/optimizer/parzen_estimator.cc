#include "services/optimizer/parzen_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

namespace dhpt::optimizer {
namespace {

constexpr double kMultivariateSigma0 = 0.2;
constexpr double kLogTiny = -1e300;

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

std::vector<double> TpeObservationWeights(int n) {
  std::vector<double> weights(static_cast<size_t>(n), 1.0);
  if (n <= 25) return weights;
  const int ramp = n - 25;
  for (int i = 0; i < ramp; ++i) {
    // numpy.linspace(1 / n, 1, num=ramp)
    weights[i] = ramp == 1 ? 1.0 / n : 1.0 / n + (1.0 - 1.0 / n) * i / (ramp - 1);
  }
  return weights;
}

ParzenEstimator::ParzenEstimator(const SearchSpace& space, std::vector<int> dims,
                                 const std::vector<std::vector<double>>& observations,
                                 const std::vector<double>& weights, const ParzenOptions& options)
    : bandwidth_weighted_(options.bandwidth_weighted) {
  const int n = static_cast<int>(observations.size());
  const int components = n + 1;  // The observations, then the prior.
  std::vector<double> w(weights.begin(), weights.end());
  w.push_back(options.prior_weight);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  double running = 0;
  for (double v : w) {
    log_weights_.push_back(std::log(v / total));
    running += v / total;
    cumulative_weights_.push_back(running);
  }

  for (size_t j = 0; j < dims.size(); ++j) {
    Dimension d;
    d.domain = space.InternalDomain(dims[j]);
    if (d.domain.choice) {
      const int c = d.domain.choices;
      for (int k = 0; k < components; ++k) {
        std::vector<double> p(static_cast<size_t>(c), options.prior_weight / c);
        if (k < n) p[static_cast<size_t>(std::llround(observations[k][j]))] += 1.0;
        const double sum = std::accumulate(p.begin(), p.end(), 0.0);
        for (double& v : p) v /= sum;
        d.probabilities.push_back(std::move(p));
      }
      dims_.push_back(std::move(d));
      continue;
    }
    d.low = d.domain.low - d.domain.step / 2;
    d.high = d.domain.high + d.domain.step / 2;
    const double range = d.high - d.low;
    for (int k = 0; k < n; ++k) d.mus.push_back(observations[k][j]);
    d.mus.push_back(0.5 * (d.low + d.high));
    if (options.multivariate) {
      const double sigma = kMultivariateSigma0 *
                           std::pow(std::max(n, 1), -1.0 / (static_cast<double>(dims.size()) + 4)) *
                           range;
      d.sigmas.assign(static_cast<size_t>(components), sigma);
    } else {
      std::vector<int> order(static_cast<size_t>(components));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return d.mus[a] < d.mus[b]; });
      std::vector<double> sorted = {d.low};
      for (int k : order) sorted.push_back(d.mus[k]);
      sorted.push_back(d.high);
      d.sigmas.assign(static_cast<size_t>(components), 0);
      for (int r = 0; r < components; ++r) {
        double sigma = std::max(sorted[r + 1] - sorted[r], sorted[r + 2] - sorted[r + 1]);
        // Endpoints are not neighbours: the outermost kernels look inwards only.
        if (components >= 2 && r == 0) sigma = sorted[2] - sorted[1];
        if (components >= 2 && r == components - 1) sigma = sorted[r + 1] - sorted[r];
        d.sigmas[order[r]] = sigma;
      }
    }
    const double max_sigma = range;
    const double min_sigma = range / std::min(100.0, 1.0 + components);
    for (double& sigma : d.sigmas) sigma = std::clamp(sigma, min_sigma, max_sigma);
    d.sigmas.back() = range;  // The prior is wide.
    if (d.domain.step == 0) {
      for (int k = 0; k < components; ++k) {
        const double a = (d.low - d.mus[k]) / d.sigmas[k], b = (d.high - d.mus[k]) / d.sigmas[k];
        // Kernels well inside the range lose no mass to truncation (to double precision).
        const double z = a < -9 && b > 9 ? 1.0 : NormalCdf(b) - NormalCdf(a);
        const double scale = bandwidth_weighted_ ? 1.0 : d.sigmas[k];
        d.log_norms.push_back(z > 0 ? -std::log(scale * std::sqrt(2 * std::numbers::pi) * z)
                                    : kLogTiny);
      }
    }
    dims_.push_back(std::move(d));
  }
  log_constants_ = log_weights_;
  for (const Dimension& d : dims_) {
    for (size_t k = 0; k < d.log_norms.size(); ++k) log_constants_[k] += d.log_norms[k];
  }
}

std::vector<double> ParzenEstimator::Sample(std::mt19937_64& generator) const {
  const double u = UniformUnit(generator);
  const int k = std::min<int>(
      static_cast<int>(std::upper_bound(cumulative_weights_.begin(), cumulative_weights_.end(), u) -
                       cumulative_weights_.begin()),
      components() - 1);
  std::vector<double> x;
  x.reserve(dims_.size());
  for (const Dimension& d : dims_) {
    if (d.domain.choice) {
      const std::vector<double>& p = d.probabilities[k];
      double r = UniformUnit(generator), acc = 0;
      int c = 0;
      for (; c + 1 < static_cast<int>(p.size()); ++c) {
        acc += p[c];
        if (r < acc) break;
      }
      x.push_back(c);
      continue;
    }
    // Truncated normal by rejection: the bandwidths are at least 1% of the range and the
    // centres inside it, so acceptance is high; clamp after 100 misses.
    double value = std::clamp(d.mus[k], d.low, d.high);
    for (int tries = 0; tries < 100; ++tries) {
      const double draw = d.mus[k] + d.sigmas[k] * StandardNormal(generator);
      if (draw >= d.low && draw <= d.high) {
        value = draw;
        break;
      }
    }
    if (d.domain.step > 0) {
      value = d.domain.low + std::round((value - d.domain.low) / d.domain.step) * d.domain.step;
      value = std::clamp(value, d.domain.low, d.domain.high);
    }
    x.push_back(value);
  }
  return x;
}

double ParzenEstimator::LogComponentPdf(int k, const std::vector<double>& x) const {
  double log_pdf = log_constants_[k];
  for (size_t j = 0; j < dims_.size(); ++j) {
    const Dimension& d = dims_[j];
    if (d.domain.choice) {
      log_pdf += std::log(d.probabilities[k][static_cast<size_t>(std::llround(x[j]))]);
    } else if (d.domain.step > 0) {
      const double mu = d.mus[k], sigma = d.sigmas[k], half = d.domain.step / 2;
      const double z = NormalCdf((d.high - mu) / sigma) - NormalCdf((d.low - mu) / sigma);
      const double mass = NormalCdf((x[j] + half - mu) / sigma) - NormalCdf((x[j] - half - mu) / sigma);
      log_pdf += mass > 0 && z > 0 ? std::log(mass / z) : kLogTiny;
    } else {
      const double t = (x[j] - d.mus[k]) / d.sigmas[k];
      log_pdf -= 0.5 * t * t;
    }
  }
  return log_pdf;
}

double ParzenEstimator::LogPdf(const std::vector<double>& x) const {
  const int n = components();
  thread_local std::vector<double> terms;
  terms.resize(static_cast<size_t>(n));
  const bool one_continuous = dims_.size() == 1 && !dims_[0].domain.choice && dims_[0].domain.step == 0;
  if (one_continuous) {
    // The common univariate case, without the per-component call.
    const Dimension& d = dims_[0];
    for (int k = 0; k < n; ++k) {
      const double t = (x[0] - d.mus[k]) / d.sigmas[k];
      terms[k] = log_constants_[k] - 0.5 * t * t;
    }
  } else {
    for (int k = 0; k < n; ++k) terms[k] = LogComponentPdf(k, x);
  }
  const double top = *std::max_element(terms.begin(), terms.end());
  if (!std::isfinite(top)) return top;
  // Terms more than e^-40 below the largest change the sum by less than a double can hold,
  // so they need no exp: with many narrow kernels that is most of them.
  double sum = 0;
  for (int k = 0; k < n; ++k) {
    if (terms[k] > top - 40) sum += std::exp(terms[k] - top);
  }
  return top + std::log(sum);
}

}  // namespace dhpt::optimizer
