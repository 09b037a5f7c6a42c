#include "services/optimizer/bayesian_optimization.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "services/optimizer/gaussian_process.h"

namespace dhpt::optimizer {
namespace {

constexpr uint64_t kBayesStream = 0x42415953;  // "BAYS"
constexpr int kRefineStarts = 3;
constexpr int kRefineRounds = 5;
constexpr int kPerturbedBest = 5;
constexpr int kPerturbationsEach = 20;

// Points <-> GP inputs: numeric parameters to [0, 1] in the transformed space, choices one-hot.
class Encoder {
 public:
  explicit Encoder(const SearchSpace& space) : space_(space) {
    for (int i = 0; i < space.dims(); ++i) {
      domains_.push_back(space.InternalDomain(i));
      offsets_.push_back(width_);
      width_ += domains_.back().choice ? domains_.back().choices : 1;
    }
  }
  int width() const { return width_; }

  Eigen::VectorXd Encode(const Point& point) const {
    Eigen::VectorXd u = Eigen::VectorXd::Zero(width_);
    for (int i = 0; i < space_.dims(); ++i) {
      const SearchSpace::Internal& d = domains_[i];
      const double x = space_.ToInternal(i, point[i]);
      if (d.choice) {
        u(offsets_[i] + static_cast<int>(x)) = 1;
      } else {
        u(offsets_[i]) = std::clamp((x - d.low) / (d.high - d.low), 0.0, 1.0);
      }
    }
    return u;
  }

  // The nearest valid point: lattice rounding, the largest one-hot entry.
  Point Decode(const Eigen::VectorXd& u) const {
    Point point(static_cast<size_t>(space_.dims()));
    for (int i = 0; i < space_.dims(); ++i) {
      const SearchSpace::Internal& d = domains_[i];
      if (d.choice) {
        int best = 0;
        for (int c = 1; c < d.choices; ++c) {
          if (u(offsets_[i] + c) > u(offsets_[i] + best)) best = c;
        }
        point[i] = space_.FromInternal(i, best);
      } else {
        point[i] = space_.FromInternal(i, d.low + std::clamp(u(offsets_[i]), 0.0, 1.0) * (d.high - d.low));
      }
    }
    return point;
  }

  bool numeric(int column) const {
    for (int i = 0; i < space_.dims(); ++i) {
      if (column == offsets_[i]) return !domains_[i].choice;
    }
    return false;
  }

 private:
  const SearchSpace& space_;
  std::vector<SearchSpace::Internal> domains_;
  std::vector<int> offsets_;
  int width_ = 0;
};

double Halton(uint64_t index, int base) {
  double result = 0, fraction = 1.0 / base;
  while (index > 0) {
    result += fraction * static_cast<double>(index % base);
    index /= base;
    fraction /= base;
  }
  return result;
}

int Prime(int k) {
  static const std::vector<int> primes = [] {
    std::vector<int> p;
    for (int n = 2; p.size() < 256; ++n) {
      bool prime = true;
      for (int q : p) {
        if (q * q > n) break;
        if (n % q == 0) {
          prime = false;
          break;
        }
      }
      if (prime) p.push_back(n);
    }
    return p;
  }();
  return primes[static_cast<size_t>(k) % primes.size()];
}

}  // namespace

BayesianOptimization::BayesianOptimization(SearchSpace space, uint64_t seed, bool minimize,
                                           BayesianOptions options)
    : space_(space), seed_(seed), minimize_(minimize), options_(options), random_(space, seed) {}

absl::StatusOr<std::optional<Point>> BayesianOptimization::Suggest(const History& history) {
  if (SpaceExhausted(space_, history)) return std::nullopt;
  auto loss = [this](double value) { return minimize_ ? value : -value; };
  auto completed = [](const TrialRecord& t) { return t.status == TrialStatus::kCompleted && t.value; };
  std::optional<double> worst_completed;  // The worst feasible completed objective.
  bool infeasible = false;
  for (const TrialRecord& t : history.trials) {
    if (!completed(t)) continue;
    if (t.violation > 0) infeasible = true;
    else worst_completed = std::max(worst_completed.value_or(loss(*t.value)), loss(*t.value));
  }
  // No feasible trial yet but some infeasible: model the violation instead of the objective, so
  // the search heads for the feasible region first. Pruned trials say nothing about it.
  const bool feasibility_phase = infeasible && !worst_completed;
  std::vector<size_t> observed, running;  // Completed and pruned trials; running ones.
  for (size_t n = 0; n < history.trials.size(); ++n) {
    const TrialRecord& t = history.trials[n];
    if (completed(t)) observed.push_back(n);
    if (t.status == TrialStatus::kPruned && t.value && !std::isnan(*t.value) && !feasibility_phase) {
      observed.push_back(n);
    }
    if (t.status == TrialStatus::kRunning) running.push_back(n);
  }
  if (static_cast<int>(observed.size()) < options_.n_startup_trials) return random_.Suggest(history);

  const Encoder encoder(space_);
  const int width = encoder.width();
  const int n = static_cast<int>(observed.size());
  Eigen::MatrixXd x(n, width);
  Eigen::VectorXd y(n);
  for (int k = 0; k < n; ++k) {
    const TrialRecord& t = history.trials[observed[k]];
    x.row(k) = encoder.Encode(t.point).transpose();
    y(k) = loss(*t.value);
    // A pruned trial's value is a partial one, worse than it would have ended. Capped at the
    // worst completed objective, it says "poor here" without being an outlier that bends the
    // whole model.
    if (t.status == TrialStatus::kPruned && worst_completed) y(k) = std::min(y(k), *worst_completed);
    // An infeasible trial is no better than the worst feasible one, whatever its objective.
    if (t.status == TrialStatus::kCompleted && t.violation > 0) {
      y(k) = feasibility_phase ? t.violation : std::max(y(k), *worst_completed);
    }
  }
  if (options_.warp_objective) {
    y = YeoJohnsonStandardize(y);
  } else {
    const double mean = y.mean();
    const double spread = std::sqrt((y.array() - mean).square().mean());
    y = (y.array() - mean) / (spread > 1e-12 ? spread : 1.0);
  }

  // Hyperparameters from the best half and the most recent half, at most max_fit_points.
  std::vector<int> fit_rows(static_cast<size_t>(n));
  std::iota(fit_rows.begin(), fit_rows.end(), 0);
  if (n > options_.max_fit_points) {
    std::vector<int> by_value = fit_rows;
    std::stable_sort(by_value.begin(), by_value.end(), [&](int a, int b) { return y(a) < y(b); });
    std::vector<bool> chosen(static_cast<size_t>(n), false);
    const int half = options_.max_fit_points / 2;
    for (int k = 0; k < half; ++k) chosen[by_value[k]] = true;
    for (int k = n - 1, taken = 0; k >= 0 && taken < options_.max_fit_points - half; --k) {
      if (!chosen[k]) {
        chosen[k] = true;
        ++taken;
      }
    }
    fit_rows.clear();
    for (int k = 0; k < n; ++k) if (chosen[k]) fit_rows.push_back(k);
  }
  Eigen::MatrixXd fit_x(static_cast<int>(fit_rows.size()), width);
  Eigen::VectorXd fit_y(static_cast<int>(fit_rows.size()));
  for (size_t k = 0; k < fit_rows.size(); ++k) {
    fit_x.row(static_cast<int>(k)) = x.row(fit_rows[k]);
    fit_y(static_cast<int>(k)) = y(fit_rows[k]);
  }
  GpHyperparameters start;
  start.log_lengthscales = Eigen::VectorXd::Constant(width, std::log(0.5));
  const GpHyperparameters h = GaussianProcess::Fit(fit_x, fit_y, start, options_.fit_iterations);

  // Constant liar: running trials join as if they had returned the worst value so far.
  const double best = y.minCoeff();
  if (!running.empty()) {
    Eigen::MatrixXd pending(static_cast<int>(running.size()), width);
    for (size_t k = 0; k < running.size(); ++k) {
      pending.row(static_cast<int>(k)) = encoder.Encode(history.trials[running[k]].point).transpose();
    }
    Eigen::MatrixXd all_x(n + pending.rows(), width);
    all_x << x, pending;
    Eigen::VectorXd all_y(n + pending.rows());
    all_y << y, Eigen::VectorXd::Constant(pending.rows(), y.maxCoeff());
    x = std::move(all_x);
    y = std::move(all_y);
  }
  const GaussianProcess gp(x, y, h);

  // Candidates, each rounded to a valid untried point.
  std::mt19937_64 generator = SeededGenerator(seed_, kBayesStream, history.trials.size());
  std::vector<double> shift(static_cast<size_t>(width));
  for (double& s : shift) s = UniformUnit(generator);
  std::vector<Eigen::VectorXd> raw;
  for (int c = 0; c < options_.candidates; ++c) {
    Eigen::VectorXd u(width);
    for (int j = 0; j < width; ++j) {
      u(j) = std::fmod(Halton(static_cast<uint64_t>(c) + 1, Prime(j)) + shift[j], 1.0);
    }
    raw.push_back(std::move(u));
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return y(a) < y(b); });
  for (int b = 0; b < std::min(kPerturbedBest, n); ++b) {
    for (int c = 0; c < kPerturbationsEach; ++c) {
      Eigen::VectorXd u = x.row(order[b]).transpose();
      for (int j = 0; j < width; ++j) {
        if (encoder.numeric(j)) u(j) = std::clamp(u(j) + 0.05 * StandardNormal(generator), 0.0, 1.0);
        else u(j) += 0.3 * UniformUnit(generator);  // Sometimes another category wins.
      }
      raw.push_back(std::move(u));
    }
  }

  struct Candidate {
    Point point;
    Eigen::VectorXd encoded;
    double score;
  };
  auto score_all = [&](std::vector<Candidate>& batch) {
    if (batch.empty()) return;
    Eigen::MatrixXd m(static_cast<int>(batch.size()), width);
    for (size_t k = 0; k < batch.size(); ++k) m.row(static_cast<int>(k)) = batch[k].encoded.transpose();
    Eigen::VectorXd mu, var;
    gp.Predict(m, &mu, &var);
    for (size_t k = 0; k < batch.size(); ++k) {
      batch[k].score = LogExpectedImprovement(mu(static_cast<int>(k)), var(static_cast<int>(k)), best);
    }
  };
  auto make = [&](const Eigen::VectorXd& u) -> std::optional<Candidate> {
    Point point = encoder.Decode(u);
    if (history.keys.contains(space_.Key(point))) return std::nullopt;
    Eigen::VectorXd encoded = encoder.Encode(point);
    return Candidate{std::move(point), std::move(encoded), 0};
  };
  std::vector<Candidate> candidates;
  for (const Eigen::VectorXd& u : raw) {
    if (auto c = make(u)) candidates.push_back(std::move(*c));
  }
  if (candidates.empty()) return random_.Suggest(history);
  score_all(candidates);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.score > b.score; });

  // Local refinement: a coordinate search with halving steps from the best few.
  Candidate winner = candidates.front();
  for (int s = 0; s < std::min<int>(kRefineStarts, static_cast<int>(candidates.size())); ++s) {
    Candidate current = candidates[s];
    double step = 0.1;
    for (int round = 0; round < kRefineRounds; ++round, step /= 2) {
      std::vector<Candidate> neighbours;
      for (int j = 0; j < width; ++j) {
        if (!encoder.numeric(j)) continue;
        for (double sign : {-1.0, 1.0}) {
          Eigen::VectorXd u = current.encoded;
          u(j) = std::clamp(u(j) + sign * step, 0.0, 1.0);
          if (auto c = make(u)) neighbours.push_back(std::move(*c));
        }
      }
      score_all(neighbours);
      for (Candidate& c : neighbours) {
        if (c.score > current.score) current = std::move(c);
      }
    }
    if (current.score > winner.score) winner = std::move(current);
  }
  return winner.point;
}

}  // namespace dhpt::optimizer
