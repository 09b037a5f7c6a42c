#include "services/optimizer/bayesian_optimization.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

#include "services/optimizer/gaussian_process.h"

namespace dhpt::optimizer {
namespace {

constexpr uint64_t kBayesStream = 0x42415953;  // "BAYS"
constexpr int kRefineStarts = 3;
constexpr int kRefineRounds = 5;
constexpr int kPerturbedBest = 5;
constexpr int kPerturbationsEach = 20;
// Candidates scored at once: the prediction's matrices then hold kScoreBatch rows of the
// encoding, however many candidates there are.
constexpr int kScoreBatch = 256;

// Where an inactive numeric parameter (conditional spaces) sits in the GP's input; an inactive
// choice has an all-zero one-hot block. A constant, so two trials of one branch agree on the
// parameters neither has and the GP of a branch is a GP over that branch's active parameters;
// outside [0, 1], so a trial without the parameter is at least 1 away from every trial with it
// and the model borrows little across branches through a value that means nothing (SMAC's
// imputation of inactive values, Levesque et al. 2017). Candidates are made canonical before
// they are encoded, so the acquisition never scores an inactive coordinate's drawn value.
constexpr double kInactiveCoordinate = -1;

// Points <-> GP inputs: numeric parameters to [0, 1] in the transformed space, choices one-hot.
class Encoder {
 public:
  explicit Encoder(const SearchSpace& space) : space_(space) {
    for (int i = 0; i < space.dims(); ++i) {
      domains_.push_back(space.InternalDomain(i));
      offsets_.push_back(width_);
      width_ += domains_.back().choice ? domains_.back().choices : 1;
      numeric_.resize(static_cast<size_t>(width_), false);
      numeric_[static_cast<size_t>(offsets_.back())] = !domains_.back().choice;
    }
  }
  int width() const { return width_; }

  Eigen::VectorXd Encode(const Point& point) const {
    Eigen::VectorXd u = Eigen::VectorXd::Zero(width_);
    for (int i = 0; i < space_.dims(); ++i) {
      const SearchSpace::Internal& d = domains_[i];
      if (std::holds_alternative<Inactive>(point[i])) {
        if (!d.choice) u(offsets_[i]) = kInactiveCoordinate;
        continue;
      }
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
    space_.Canonicalize(point, nullptr);
    return point;
  }

  // Looked up, not searched: the candidate loops ask once per column.
  bool numeric(int column) const { return numeric_[static_cast<size_t>(column)]; }

 private:
  const SearchSpace& space_;
  std::vector<SearchSpace::Internal> domains_;
  std::vector<int> offsets_;
  std::vector<bool> numeric_;  // Per column: a numeric parameter's (else a choice's).
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

// Of `rows` (increasing), all when there are at most `limit`; else the best limit / 2 by `y`
// (a stable order) and the most recent of the rest, in increasing order.
std::vector<int> BestAndRecent(const std::vector<int>& rows, const Eigen::VectorXd& y, int limit) {
  const int n = static_cast<int>(rows.size());
  if (n <= limit) return rows;
  std::vector<int> by_value(static_cast<size_t>(n));
  std::iota(by_value.begin(), by_value.end(), 0);
  std::stable_sort(by_value.begin(), by_value.end(),
                   [&](int a, int b) { return y(rows[a]) < y(rows[b]); });
  std::vector<bool> chosen(static_cast<size_t>(n), false);
  const int half = limit / 2;
  for (int k = 0; k < half; ++k) chosen[by_value[k]] = true;
  for (int k = n - 1, taken = 0; k >= 0 && taken < limit - half; --k) {
    if (!chosen[k]) {
      chosen[k] = true;
      ++taken;
    }
  }
  std::vector<int> kept;
  for (int k = 0; k < n; ++k) {
    if (chosen[k]) kept.push_back(rows[k]);
  }
  return kept;
}

}  // namespace

int64_t EncodedWidth(const SearchSpace& space) {
  int64_t width = 0;
  for (int i = 0; i < space.dims(); ++i) {
    const SearchSpace::Internal d = space.InternalDomain(i);
    width += d.choice ? d.choices : 1;
  }
  return width;
}

int64_t BayesianSuggestionBytes(const SearchSpace& space, const BayesianOptions& options) {
  // Doubles held at once, phase by phase: the fit's inputs and their scaled copies, and its
  // n x n matrices (kernel, distances, Cholesky, K^-1, gradient terms); then the model's inputs
  // and kernel matrices; then a batch of candidates against the model. The coefficients are
  // counted from the code and checked against measured peaks (tests/optimizer_memory/: at
  // 2,000 fit points, 6.4 n^2 doubles measured against 8 here).
  const double w = static_cast<double>(EncodedWidth(space));
  const double f = options.max_fit_points;
  const double n = std::max(options.max_model_points, options.max_fit_points);
  const double b = std::min(kScoreBatch, options.candidates + kPerturbedBest * kPerturbationsEach);
  const double fit = 4 * f * w + 8 * f * f;
  const double model = 2 * n * w + 6 * n * n;
  const double predict = n * w + n * n + 3 * b * w + 6 * n * b;
  const double doubles = std::max({fit, model, predict});
  // Per column: the Halton shift, the encoding's offsets, a candidate's vectors.
  return static_cast<int64_t>(8 * doubles + 64 * w);
}

int64_t BayesianCandidateCells(const SearchSpace& space, const BayesianOptions& options) {
  return EncodedWidth(space) * (options.candidates + kPerturbedBest * kPerturbationsEach);
}

int FitPrefix(int observed, const BayesianOptions& options) {
  int prefix = std::max(1, options.n_startup_trials);
  if (observed <= prefix || options.refit_growth <= 0) return observed;
  while (true) {
    const int next = prefix + std::max(1, static_cast<int>(options.refit_growth * prefix));
    if (next > observed) return prefix;
    prefix = next;
  }
}

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
    if (!history.LearnsFrom(n)) continue;
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
  Eigen::VectorXd y(n);
  for (int k = 0; k < n; ++k) {
    const TrialRecord& t = history.trials[observed[k]];
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
  auto standardize = [&](const Eigen::VectorXd& values) -> Eigen::VectorXd {
    if (options_.warp_objective) return YeoJohnsonStandardize(values);
    const double mean = values.mean();
    const double spread = std::sqrt((values.array() - mean).square().mean());
    return (values.array() - mean) / (spread > 1e-12 ? spread : 1.0);
  };
  const Eigen::VectorXd raw = y;
  y = standardize(raw);
  // Rows (of `observed`) encoded as GP inputs, one matrix row each.
  auto encode_rows = [&](const std::vector<int>& rows) {
    Eigen::MatrixXd x(static_cast<int>(rows.size()), width);
    for (size_t k = 0; k < rows.size(); ++k) {
      x.row(static_cast<int>(k)) = encoder.Encode(history.trials[observed[rows[k]]].point).transpose();
    }
    return x;
  };
  auto values_of = [&](const std::vector<int>& rows) {
    Eigen::VectorXd values(static_cast<int>(rows.size()));
    for (size_t k = 0; k < rows.size(); ++k) values(static_cast<int>(k)) = y(rows[k]);
    return values;
  };

  // The model's trials, at most max(max_model_points, max_fit_points) with the running ones: the
  // kernel matrix is quadratic in them and its Cholesky cubic. Past the limit, the best half
  // and the most recent half of the observed trials, and the most recent running ones (at most
  // a quarter, unless fewer observed trials leave them room).
  const int model_limit = std::max(options_.max_model_points, options_.max_fit_points);
  std::vector<int> all_rows(static_cast<size_t>(n));
  std::iota(all_rows.begin(), all_rows.end(), 0);
  const int running_room = std::min<int>(static_cast<int>(running.size()), model_limit / 4);
  const std::vector<int> model_rows = BestAndRecent(all_rows, y, model_limit - running_room);
  const size_t running_kept =
      std::min(running.size(), static_cast<size_t>(model_limit) - model_rows.size());
  running.erase(running.begin(), running.end() - static_cast<std::ptrdiff_t>(running_kept));

  // Hyperparameters from the first FitPrefix observed trials, standardised among themselves:
  // their best half and most recent half, at most max_fit_points. The prefix moves only every
  // so often, and the fit is the bulk of a suggestion's cost, so the last one is kept.
  GpHyperparameters h;
  {
    const int prefix = FitPrefix(n, options_);
    std::vector<int> prefix_rows(static_cast<size_t>(prefix));
    std::iota(prefix_rows.begin(), prefix_rows.end(), 0);
    const Eigen::VectorXd prefix_y = standardize(raw.head(prefix));
    const std::vector<int> fit_rows = BestAndRecent(prefix_rows, prefix_y, options_.max_fit_points);
    Eigen::MatrixXd fit_x = encode_rows(fit_rows);
    Eigen::VectorXd fit_y(static_cast<int>(fit_rows.size()));
    for (size_t k = 0; k < fit_rows.size(); ++k) fit_y(static_cast<int>(k)) = prefix_y(fit_rows[k]);
    auto bytes = [](const auto& m) {
      return absl::string_view(reinterpret_cast<const char*>(m.data()), sizeof(double) * m.size());
    };
    const size_t inputs = absl::HashOf(fit_x.rows(), fit_x.cols(), bytes(fit_x), bytes(fit_y));
    if (!last_fit_ || last_fit_->inputs != inputs) {
      GpHyperparameters start;
      start.log_lengthscales = Eigen::VectorXd::Constant(width, std::log(0.5));
      last_fit_ = Fitted{inputs, GaussianProcess::Fit(fit_x, fit_y, start, options_.fit_iterations)};
    }
    h = last_fit_->h;
  }

  // Constant liar: running trials join as if they had returned the worst value so far.
  const double best = y.minCoeff();
  const int model_size = static_cast<int>(model_rows.size() + running.size());
  Eigen::MatrixXd x(model_size, width);
  Eigen::VectorXd model_y(model_size);
  x.topRows(static_cast<int>(model_rows.size())) = encode_rows(model_rows);
  model_y.head(static_cast<int>(model_rows.size())) = values_of(model_rows);
  for (size_t k = 0; k < running.size(); ++k) {
    const int row = static_cast<int>(model_rows.size() + k);
    x.row(row) = encoder.Encode(history.trials[running[k]].point).transpose();
    model_y(row) = y.maxCoeff();
  }
  const GaussianProcess gp(std::move(x), std::move(model_y), h);

  // Candidates, each rounded to a valid untried point, scored a batch at a time; the best
  // kRefineStarts are kept (the earlier first among equal scores).
  struct Candidate {
    Point point;
    double score = 0;
  };
  auto score_all = [&](std::vector<Candidate>& batch) {
    for (size_t first = 0; first < batch.size(); first += kScoreBatch) {
      const size_t count = std::min(batch.size() - first, static_cast<size_t>(kScoreBatch));
      Eigen::MatrixXd m(static_cast<int>(count), width);
      for (size_t k = 0; k < count; ++k) {
        m.row(static_cast<int>(k)) = encoder.Encode(batch[first + k].point).transpose();
      }
      Eigen::VectorXd mu, var;
      gp.Predict(m, &mu, &var);
      for (size_t k = 0; k < count; ++k) {
        batch[first + k].score =
            LogExpectedImprovement(mu(static_cast<int>(k)), var(static_cast<int>(k)), best);
      }
    }
  };
  auto make = [&](const Eigen::VectorXd& u) -> std::optional<Candidate> {
    Point point = encoder.Decode(u);
    if (space_.Forbidden(point) || history.keys.contains(space_.Key(point))) return std::nullopt;
    return Candidate{std::move(point), 0};
  };
  std::vector<Candidate> top, batch;  // `top`: best first.
  auto flush = [&] {
    score_all(batch);
    for (Candidate& c : batch) {
      auto at = std::upper_bound(top.begin(), top.end(), c.score,
                                 [](double score, const Candidate& t) { return score > t.score; });
      if (at - top.begin() < kRefineStarts) top.insert(at, std::move(c));
      if (static_cast<int>(top.size()) > kRefineStarts) top.pop_back();
    }
    batch.clear();
  };
  auto offer = [&](const Eigen::VectorXd& u) {
    if (auto c = make(u)) batch.push_back(std::move(*c));
    if (static_cast<int>(batch.size()) == kScoreBatch) flush();
  };

  std::mt19937_64 generator = SeededGenerator(seed_, kBayesStream, history.trials.size());
  std::vector<double> shift(static_cast<size_t>(width));
  for (double& s : shift) s = UniformUnit(generator);
  Eigen::VectorXd u(width);
  for (int c = 0; c < options_.candidates; ++c) {
    for (int j = 0; j < width; ++j) {
      u(j) = std::fmod(Halton(static_cast<uint64_t>(c) + 1, Prime(j)) + shift[j], 1.0);
    }
    offer(u);
  }
  const int perturbed = std::min(kPerturbedBest, n);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + perturbed, order.end(),
                    [&](int a, int b) { return y(a) < y(b) || (y(a) == y(b) && a < b); });
  for (int b = 0; b < perturbed; ++b) {
    const Eigen::VectorXd centre = encoder.Encode(history.trials[observed[order[b]]].point);
    for (int c = 0; c < kPerturbationsEach; ++c) {
      u = centre;
      for (int j = 0; j < width; ++j) {
        if (encoder.numeric(j)) u(j) = std::clamp(u(j) + 0.05 * StandardNormal(generator), 0.0, 1.0);
        else u(j) += 0.3 * UniformUnit(generator);  // Sometimes another category wins.
      }
      offer(u);
    }
  }
  flush();
  if (top.empty()) return random_.Suggest(history);

  // Local refinement: a coordinate search with halving steps from the best few.
  Candidate winner = top.front();
  for (Candidate& start : top) {
    Candidate current = std::move(start);
    double step = 0.1;
    for (int round = 0; round < kRefineRounds; ++round, step /= 2) {
      const Eigen::VectorXd encoded = encoder.Encode(current.point);
      std::vector<Candidate> neighbours;
      for (int j = 0; j < width; ++j) {
        if (!encoder.numeric(j)) continue;
        for (double sign : {-1.0, 1.0}) {
          u = encoded;
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
