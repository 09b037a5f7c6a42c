#pragma once

// The kernel density estimate of TPE (Bergstra et al. 2011, as Optuna 3.1's TPESampler builds
// it): a weighted mixture with one component per observation plus a prior component. Numeric
// dimensions use normal kernels truncated to the parameter's range (probability mass over a
// lattice cell for ints and steps); choices use the observed category with smoothed counts
// (prior_weight / choices added to every category).

#include <optional>
#include <random>
#include <utility>
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

// The normalised component weights of a mixture: one per observation, then the prior's. TPE
// builds them once per group of observations and shares them between dimensions.
struct MixtureWeights {
  MixtureWeights(const std::vector<double>& observation_weights, double prior_weight);
  std::vector<double> log_weights;
  std::vector<double> cumulative;  // For sampling a component.
};

class ParzenEstimator {
 public:
  // `observations` holds internal values (SearchSpace::ToInternal) of dimensions `dims`, row
  // after row (one row per observation, dims.size() values each); `weights` has one weight per
  // row and the prior's. For one dimension, `sorted_rows` may give the rows already sorted by
  // value (ties by row), which spares the estimator its sort.
  ParzenEstimator(const SearchSpace& space, std::vector<int> dims,
                  const std::vector<double>& observations, const MixtureWeights& weights,
                  const ParzenOptions& options, const std::vector<int>* sorted_rows = nullptr);
  // The same, with `weights[k]` the weight of row k before normalisation.
  ParzenEstimator(const SearchSpace& space, std::vector<int> dims,
                  const std::vector<double>& observations, const std::vector<double>& weights,
                  const ParzenOptions& options)
      : ParzenEstimator(space, std::move(dims), observations,
                        MixtureWeights(weights, options.prior_weight), options) {}

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
    std::vector<double> inverse_sigmas;
    // Continuous: log of each kernel's normalising factor, so an evaluation costs one exp.
    std::vector<double> log_norms;
    // Choices: each observation component's category (-1: the prior's). Its probabilities
    // are the smoothed counts, computed when asked (Probability): a table per component would
    // take observations x choices doubles, 160 MB for 20,000 trials of a 1,000-value parameter.
    std::vector<int> categories;
    double smoothing = 0;  // prior_weight / choices.
    double Probability(int k, int c) const;
  };
  double LogComponentPdf(int k, const std::vector<double>& x) const;
  // One continuous dimension (univariate TPE's common case): the observation kernels sorted by
  // centre, so that LogPdf visits only those near x. A kernel at distance D has a log density
  // of at most max_constant - (D / max_sigma)^2 / 2, so beyond the distance where that falls
  // 40 below a term already seen it cannot change the sum (see LogPdf).
  struct SortedKernels {
    std::vector<double> mus, inverse_sigmas, constants;
    double max_constant = 0, max_sigma = 0;
    int prior = 0;  // The prior's component, evaluated on its own.
  };
  void SortKernels(const std::vector<std::pair<double, int>>& order);
  double SortedLogPdf(double x) const;

  std::vector<Dimension> dims_;
  bool bandwidth_weighted_ = false;
  std::vector<double> log_weights_;
  // log weight plus every continuous dimension's log normaliser, per component.
  std::vector<double> log_constants_;
  std::vector<double> cumulative_weights_;
  std::optional<SortedKernels> sorted_;
};

// Optuna's default_weights: 1 for the newest 25 observations, a ramp from 1/n up for older ones.
std::vector<double> TpeObservationWeights(int n);

}  // namespace dhpt::optimizer
