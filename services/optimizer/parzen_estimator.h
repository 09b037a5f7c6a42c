#pragma once

// The kernel density estimate of TPE (Bergstra et al. 2011, as Optuna 3.1's TPESampler builds
// it): a weighted mixture with one component per observation plus a prior component. Numeric
// dimensions use normal kernels truncated to the parameter's range (probability mass over a
// lattice cell for ints and steps); choices use the observed category with smoothed counts
// (prior_weight / choices added to every category).

#include <random>
#include <vector>

#include "services/optimizer/search_space.h"

namespace dhpt::optimizer {

struct ParzenOptions {
  double prior_weight = 1.0;
  // Multivariate: one bandwidth per dimension, 0.2 * n^(-1/(d+4)) * range (Scott's rule as
  // Optuna uses it). Univariate: each kernel's bandwidth is the larger gap to its sorted
  // neighbours, clipped to [range / min(100, 1 + n), range].
  bool multivariate = false;
  // Evaluate continuous kernels as Optuna 3.1 does: its truncated-normal log density omits the
  // -log(sigma) term, which weights each kernel by its bandwidth and favours wide ones. The
  // densities then no longer integrate to one, but log l - log g ranks candidates more
  // robustly early on; bench/optimizer_quality_bench measures both.
  bool bandwidth_weighted = false;
};

class ParzenEstimator {
 public:
  // `observations[k]` holds internal values (SearchSpace::ToInternal) of dimensions `dims`;
  // `weights[k]` its weight before normalisation.
  ParzenEstimator(const SearchSpace& space, std::vector<int> dims,
                  const std::vector<std::vector<double>>& observations,
                  const std::vector<double>& weights, const ParzenOptions& options);

  // A draw from the mixture, in internal values of `dims` (on the lattice where there is one).
  std::vector<double> Sample(std::mt19937_64& generator) const;
  double LogPdf(const std::vector<double>& x) const;

  // For tests.
  const std::vector<double>& mus(int dim) const { return dims_[dim].mus; }
  const std::vector<double>& sigmas(int dim) const { return dims_[dim].sigmas; }
  int components() const { return static_cast<int>(log_weights_.size()); }

 private:
  struct Dimension {
    SearchSpace::Internal domain;
    double low = 0, high = 0;  // Truncation bounds: the range widened by half a step.
    std::vector<double> mus, sigmas;              // Numeric, per component.
    // Continuous: log of each kernel's normalising factor, so an evaluation costs one exp.
    std::vector<double> log_norms;
    std::vector<std::vector<double>> probabilities;  // Choices, per component.
  };
  double LogComponentPdf(int k, const std::vector<double>& x) const;

  std::vector<Dimension> dims_;
  bool bandwidth_weighted_ = false;
  std::vector<double> log_weights_;
  // log weight plus every continuous dimension's log normaliser, per component.
  std::vector<double> log_constants_;
  std::vector<double> cumulative_weights_;
};

// Optuna's default_weights: 1 for the newest 25 observations, a ramp from 1/n up for older ones.
std::vector<double> TpeObservationWeights(int n);

}  // namespace dhpt::optimizer
