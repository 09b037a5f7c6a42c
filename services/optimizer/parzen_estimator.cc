#include "services/optimizer/parzen_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include <Eigen/Core>

namespace dhpt::optimizer {
namespace {

constexpr double kMultivariateSigma0 = 0.2;
constexpr double kLogTiny = -1e300;
const double kLogInverseSqrtTwoPi = -0.5 * std::log(2 * std::numbers::pi);

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// sum_k exp(terms[k] - top), top being the largest term. Terms more than 40 below it change
// the sum by less than a double holds, so they need no exp (with many narrow kernels, most
// of them); the rest are gathered and exponentiated together by Eigen's vectorised exp.
double SumExpAbove(const double* terms, int n, double top) {
  thread_local std::vector<double> kept;
  kept.resize(static_cast<size_t>(n));
  int m = 0;
  for (int k = 0; k < n; ++k) {
    kept[m] = terms[k] - top;
    m += terms[k] > top - 40;
  }
  return Eigen::Map<const Eigen::ArrayXd>(kept.data(), m).exp().sum();
}

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

MixtureWeights::MixtureWeights(const std::vector<double>& observation_weights,
                               double prior_weight) {
  const double total =
      std::accumulate(observation_weights.begin(), observation_weights.end(), prior_weight);
  const double log_total = std::log(total);
  log_weights.reserve(observation_weights.size() + 1);
  cumulative.reserve(observation_weights.size() + 1);
  double running = 0;
  auto add = [&](double w) {
    log_weights.push_back(std::log(w) - log_total);
    running += w / total;
    cumulative.push_back(running);
  };
  for (double w : observation_weights) add(w);
  add(prior_weight);
}

ParzenEstimator::ParzenEstimator(const SearchSpace& space, std::vector<int> dims,
                                 const std::vector<double>& observations,
                                 const MixtureWeights& weights, const ParzenOptions& options,
                                 const std::vector<int>* sorted_rows)
    : bandwidth_weighted_(options.bandwidth_weighted),
      log_weights_(weights.log_weights),
      cumulative_weights_(weights.cumulative) {
  const int n = static_cast<int>(log_weights_.size()) - 1;
  const int components = n + 1;  // The observations, then the prior.
  const size_t stride = dims.size();
  auto observation = [&](int k, size_t j) { return observations[static_cast<size_t>(k) * stride + j]; };

  std::vector<std::pair<double, int>> order;  // Of the last dimension's centres, when sorted.
  for (size_t j = 0; j < dims.size(); ++j) {
    Dimension d;
    d.domain = space.InternalDomain(dims[j]);
    if (d.domain.choice) {
      d.smoothing = options.prior_weight / d.domain.choices;
      d.categories.reserve(static_cast<size_t>(components));
      for (int k = 0; k < n; ++k) d.categories.push_back(static_cast<int>(std::llround(observation(k, j))));
      d.categories.push_back(-1);
      dims_.push_back(std::move(d));
      continue;
    }
    d.low = d.domain.low - d.domain.step / 2;
    d.high = d.domain.high + d.domain.step / 2;
    const double range = d.high - d.low;
    d.mus.reserve(static_cast<size_t>(components));
    for (int k = 0; k < n; ++k) d.mus.push_back(observation(k, j));
    d.mus.push_back(0.5 * (d.low + d.high));
    if (options.multivariate) {
      const double sigma = kMultivariateSigma0 *
                           std::pow(std::max(n, 1), -1.0 / (static_cast<double>(dims.size()) + 4)) *
                           range;
      d.sigmas.assign(static_cast<size_t>(components), sigma);
    } else {
      // Sorted by centre, ties by component: the order a stable sort gives.
      order.clear();
      if (sorted_rows != nullptr && dims.size() == 1) {
        for (int k : *sorted_rows) order.emplace_back(d.mus[k], k);
        // The prior has the last index, so among equal centres it comes last.
        const std::pair<double, int> prior(d.mus[n], n);
        order.insert(std::upper_bound(order.begin(), order.end(), prior), prior);
      } else {
        for (int k = 0; k < components; ++k) order.emplace_back(d.mus[k], k);
        std::sort(order.begin(), order.end());
      }
      auto sorted = [&](int r) {  // d.low, the sorted centres, d.high
        return r == 0 ? d.low : r == components + 1 ? d.high : order[r - 1].first;
      };
      d.sigmas.assign(static_cast<size_t>(components), 0);
      for (int r = 0; r < components; ++r) {
        double sigma = std::max(sorted(r + 1) - sorted(r), sorted(r + 2) - sorted(r + 1));
        // Endpoints are not neighbours: the outermost kernels look inwards only.
        if (components >= 2 && r == 0) sigma = sorted(2) - sorted(1);
        if (components >= 2 && r == components - 1) sigma = sorted(r + 1) - sorted(r);
        d.sigmas[order[r].second] = sigma;
      }
    }
    const double max_sigma = range;
    const double min_sigma = range / std::min(100.0, 1.0 + components);
    d.sigmas.back() = range;  // The prior is wide.
    d.inverse_sigmas.resize(d.sigmas.size());
    if (d.domain.step == 0) d.log_norms.resize(d.sigmas.size());
    for (int k = 0; k < components; ++k) {
      double& sigma = d.sigmas[k];
      if (k < n) sigma = std::clamp(sigma, min_sigma, max_sigma);
      d.inverse_sigmas[k] = 1 / sigma;
      if (d.domain.step > 0) continue;
      // Kernels 9 bandwidths inside both bounds lose no mass to truncation (to double
      // precision), so they need no normal CDF.
      const bool inside = d.mus[k] - d.low > 9 * sigma && d.high - d.mus[k] > 9 * sigma;
      if (inside && bandwidth_weighted_) {
        d.log_norms[k] = kLogInverseSqrtTwoPi;
        continue;
      }
      const double z = inside ? 1.0 : NormalCdf((d.high - d.mus[k]) / sigma) - NormalCdf((d.low - d.mus[k]) / sigma);
      const double scale = bandwidth_weighted_ ? 1.0 : sigma;
      d.log_norms[k] = z > 0 ? -std::log(scale * std::sqrt(2 * std::numbers::pi) * z) : kLogTiny;
    }
    dims_.push_back(std::move(d));
  }
  log_constants_ = log_weights_;
  for (const Dimension& d : dims_) {
    for (size_t k = 0; k < d.log_norms.size(); ++k) log_constants_[k] += d.log_norms[k];
  }
  if (dims_.size() == 1 && !dims_[0].domain.choice && dims_[0].domain.step == 0) {
    if (order.empty()) {
      for (int k = 0; k < components; ++k) order.emplace_back(dims_[0].mus[k], k);
      std::sort(order.begin(), order.end());
    }
    SortKernels(order);
  }
}

void ParzenEstimator::SortKernels(const std::vector<std::pair<double, int>>& order) {
  const Dimension& d = dims_[0];
  SortedKernels sorted;
  sorted.prior = components() - 1;
  sorted.max_constant = -std::numeric_limits<double>::infinity();
  for (const auto& [mu, k] : order) {
    if (k == sorted.prior) continue;
    sorted.mus.push_back(mu);
    sorted.inverse_sigmas.push_back(d.inverse_sigmas[k]);
    sorted.constants.push_back(log_constants_[k]);
    sorted.max_constant = std::max(sorted.max_constant, log_constants_[k]);
    sorted.max_sigma = std::max(sorted.max_sigma, d.sigmas[k]);
  }
  sorted_ = std::move(sorted);
}

double ParzenEstimator::SortedLogPdf(double x) const {
  const SortedKernels& s = *sorted_;
  const Dimension& d = dims_[0];
  auto term = [&](int k) {
    const double t = (x - s.mus[k]) * s.inverse_sigmas[k];
    return s.constants[k] - 0.5 * t * t;
  };
  const double prior_t = (x - d.mus[s.prior]) * d.inverse_sigmas[s.prior];
  const double prior_term = log_constants_[s.prior] - 0.5 * prior_t * prior_t;
  // A first lower bound on the largest term: the prior and the kernels either side of x.
  const int n = static_cast<int>(s.mus.size());
  const int next = static_cast<int>(std::lower_bound(s.mus.begin(), s.mus.end(), x) - s.mus.begin());
  double top = prior_term;
  if (next < n) top = std::max(top, term(next));
  if (next > 0) top = std::max(top, term(next - 1));
  if (!std::isfinite(top)) return top;
  // Kernels farther than `reach` have terms below top - 40, which a double cannot add.
  const double slack = s.max_constant - top + 40;
  const double reach = slack > 0 ? s.max_sigma * std::sqrt(2 * slack) : 0;
  const int first = static_cast<int>(std::lower_bound(s.mus.begin(), s.mus.begin() + next, x - reach) - s.mus.begin());
  const int last = static_cast<int>(std::upper_bound(s.mus.begin() + next, s.mus.end(), x + reach) - s.mus.begin());
  thread_local std::vector<double> buffer;
  buffer.resize(static_cast<size_t>(last - first + 1));
  Eigen::Map<Eigen::ArrayXd> terms(buffer.data(), last - first + 1);
  for (int k = first; k < last; ++k) terms[k - first] = term(k);
  terms[last - first] = prior_term;
  top = std::max(top, terms.maxCoeff());
  // Every term of the window, exponentiated together (Eigen's vectorised exp): cheaper here
  // than picking out the few that fall below top - 40.
  return top + std::log((terms - top).exp().sum());
}

double ParzenEstimator::Dimension::Probability(int k, int c) const {
  // Every category gets prior_weight / choices, the observed one 1 more; the prior component
  // has no observation and is uniform.
  const int observed = categories[static_cast<size_t>(k)];
  if (observed < 0) return 1.0 / domain.choices;
  const double total = smoothing * domain.choices + 1.0;
  return (smoothing + (c == observed ? 1.0 : 0.0)) / total;
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
      double r = UniformUnit(generator), acc = 0;
      int c = 0;
      for (; c + 1 < d.domain.choices; ++c) {
        acc += d.Probability(k, c);
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
      log_pdf += std::log(d.Probability(k, static_cast<int>(std::llround(x[j]))));
    } else if (d.domain.step > 0) {
      const double mu = d.mus[k], sigma = d.sigmas[k], half = d.domain.step / 2;
      const double z = NormalCdf((d.high - mu) / sigma) - NormalCdf((d.low - mu) / sigma);
      const double mass = NormalCdf((x[j] + half - mu) / sigma) - NormalCdf((x[j] - half - mu) / sigma);
      log_pdf += mass > 0 && z > 0 ? std::log(mass / z) : kLogTiny;
    } else {
      const double t = (x[j] - d.mus[k]) * d.inverse_sigmas[k];
      log_pdf -= 0.5 * t * t;
    }
  }
  return log_pdf;
}

double ParzenEstimator::LogPdf(const std::vector<double>& x) const {
  if (sorted_) return SortedLogPdf(x[0]);
  const int n = components();
  thread_local std::vector<double> terms;
  terms.resize(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) terms[k] = LogComponentPdf(k, x);
  const double top = *std::max_element(terms.begin(), terms.end());
  if (!std::isfinite(top)) return top;
  return top + std::log(SumExpAbove(terms.data(), n, top));
}

}  // namespace dhpt::optimizer
