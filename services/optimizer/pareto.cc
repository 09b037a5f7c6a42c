#include "services/optimizer/pareto.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>

namespace dhpt::optimizer {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-12;  // Optuna's EPS.

// Points are pointers to rows; a volume in d dimensions reads only their first d coordinates,
// so slicing needs no copies.
using Points = std::vector<const double*>;

double Volume2d(Points points, std::span<const double> reference) {
  std::sort(points.begin(), points.end(), [](const double* a, const double* b) {
    return a[0] != b[0] ? a[0] < b[0] : a[1] < b[1];
  });
  double area = 0, lowest = reference[1];
  for (const double* p : points) {
    if (p[1] >= lowest) continue;  // Dominated by a point to its left.
    area += (reference[0] - p[0]) * (lowest - p[1]);
    lowest = p[1];
  }
  return area;
}

// The area dominated by a 2-D staircase of non-dominated points (x increasing, y decreasing),
// kept up to date as points are added.
class Staircase {
 public:
  explicit Staircase(std::span<const double> reference) : reference_(reference) {}
  double area() const { return area_; }

  void Add(double x, double y) {
    auto after = steps_.upper_bound(x);
    if (after != steps_.begin() && std::prev(after)->second <= y) return;  // Dominated.
    auto s = steps_.lower_bound(x);
    // The height of the staircase just left of x; the new point lowers it to y from x until a
    // step below y is reached, removing the steps it dominates on the way.
    double height = s == steps_.begin() ? reference_[1] : std::prev(s)->second;
    double from = x;
    while (s != steps_.end() && s->second >= y) {
      area_ += (s->first - from) * (height - y);
      from = s->first;
      height = s->second;
      s = steps_.erase(s);
    }
    area_ += ((s == steps_.end() ? reference_[0] : s->first) - from) * (height - y);
    steps_[x] = y;
  }

 private:
  std::span<const double> reference_;
  std::map<double, double> steps_;
  double area_ = 0;
};

double Volume(Points points, std::span<const double> reference, int d);

// 3-D: sweep along the third objective, adding each point to the staircase of the first two.
double Volume3d(Points points, std::span<const double> reference) {
  std::sort(points.begin(), points.end(),
            [](const double* a, const double* b) { return a[2] < b[2]; });
  Staircase staircase(reference);
  double volume = 0;
  for (size_t k = 0; k < points.size(); ++k) {
    staircase.Add(points[k][0], points[k][1]);
    const double next = k + 1 < points.size() ? points[k + 1][2] : reference[2];
    volume += staircase.area() * (next - points[k][2]);
  }
  return volume;
}

// d >= 4: slices along the last objective (HSO), each the (d-1)-volume of the points below it.
double VolumeSliced(Points points, std::span<const double> reference, int d) {
  const int last = d - 1;
  std::sort(points.begin(), points.end(),
            [last](const double* a, const double* b) { return a[last] < b[last]; });
  double volume = 0;
  for (size_t k = 0; k < points.size(); ++k) {
    const double next = k + 1 < points.size() ? points[k + 1][last] : reference[last];
    if (next <= points[k][last]) continue;
    volume += Volume(Points(points.begin(), points.begin() + k + 1), reference, d - 1) *
              (next - points[k][last]);
  }
  return volume;
}

double Volume(Points points, std::span<const double> reference, int d) {
  if (points.empty()) return 0;
  switch (d) {
    case 1: {
      double best = reference[0];
      for (const double* p : points) best = std::min(best, p[0]);
      return reference[0] - best;
    }
    case 2:
      return Volume2d(std::move(points), reference);
    case 3:
      return Volume3d(std::move(points), reference);
    default:
      return VolumeSliced(std::move(points), reference, d);
  }
}

// The rows that strictly beat the reference in every objective.
Points Inside(const std::vector<std::vector<double>>& losses, std::span<const double> reference) {
  Points points;
  for (const std::vector<double>& row : losses) {
    bool inside = row.size() == reference.size();
    for (size_t k = 0; inside && k < row.size(); ++k) inside = row[k] < reference[k];
    if (inside) points.push_back(row.data());
  }
  return points;
}

}  // namespace

std::vector<double> ToLosses(std::span<const double> values, const std::vector<bool>& minimize) {
  std::vector<double> losses(values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const bool min = k < minimize.size() ? minimize[k] : true;
    losses[k] = std::isnan(values[k]) ? kInf : (min ? values[k] : -values[k]);
  }
  return losses;
}

bool Dominates(std::span<const double> a, std::span<const double> b) {
  bool better = false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k] > b[k]) return false;
    if (a[k] < b[k]) better = true;
  }
  return better;
}

bool ConstrainedDominates(std::span<const double> a, double violation_a, std::span<const double> b,
                          double violation_b) {
  const bool feasible_a = violation_a <= 0, feasible_b = violation_b <= 0;
  if (feasible_a && feasible_b) return Dominates(a, b);
  if (feasible_a != feasible_b) return feasible_a;
  return violation_a < violation_b;
}

std::vector<int> ParetoFrontIndices(const std::vector<std::vector<double>>& values,
                                    const std::vector<bool>& minimize) {
  std::vector<std::vector<double>> losses;
  losses.reserve(values.size());
  for (const std::vector<double>& row : values) losses.push_back(ToLosses(row, minimize));
  const std::vector<int> ranks = NonDominatedRanks(losses, {}, 1);
  std::vector<int> front;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    if (ranks[i] == 0) front.push_back(i);
  }
  return front;
}

std::vector<int> NonDominatedRanks(const std::vector<std::vector<double>>& losses,
                                   std::span<const double> violations, int enough) {
  const int n = static_cast<int>(losses.size());
  if (enough < 0) enough = n;
  std::vector<int> ranks(static_cast<size_t>(n), -1);
  auto feasible = [&](int i) { return violations.empty() || violations[i] <= 0; };
  std::vector<int> remaining, infeasible;
  for (int i = 0; i < n; ++i) (feasible(i) ? remaining : infeasible).push_back(i);
  // In lexicographic order a point can be dominated only by points before it; and if it is
  // dominated at all, it is dominated by a member of the front being built (dominance is
  // transitive), so each pass compares with that front only.
  std::sort(remaining.begin(), remaining.end(),
            [&](int a, int b) { return losses[a] != losses[b] ? losses[a] < losses[b] : a < b; });
  int rank = 0, ranked = 0;
  while (!remaining.empty() && ranked < enough) {
    std::vector<int> front, rest;
    for (int i : remaining) {
      const bool dominated = std::any_of(front.begin(), front.end(),
                                         [&](int f) { return Dominates(losses[f], losses[i]); });
      (dominated ? rest : front).push_back(i);
    }
    for (int i : front) ranks[i] = rank;
    ranked += static_cast<int>(front.size());
    ++rank;
    remaining = std::move(rest);
  }
  if (!remaining.empty()) return ranks;
  // Infeasible rows dominate one another by violation alone.
  std::stable_sort(infeasible.begin(), infeasible.end(),
                   [&](int a, int b) { return violations[a] < violations[b]; });
  for (size_t k = 0; k < infeasible.size() && ranked < enough; ++k) {
    if (k > 0 && violations[infeasible[k]] > violations[infeasible[k - 1]]) ++rank;
    ranks[infeasible[k]] = rank;
    ++ranked;
  }
  return ranks;
}

std::vector<double> CrowdingDistances(const std::vector<std::vector<double>>& losses) {
  const int n = static_cast<int>(losses.size());
  std::vector<double> distances(static_cast<size_t>(n), 0.0);
  if (n == 0) return distances;
  std::vector<int> order(static_cast<size_t>(n));
  for (size_t m = 0; m < losses[0].size(); ++m) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return losses[a][m] < losses[b][m]; });
    auto value = [&](int k) { return losses[order[k]][m]; };
    if (value(0) == value(n - 1)) continue;
    // The spread of the finite values; 1 when there is none.
    double low = kInf, high = -kInf;
    for (int k = 0; k < n; ++k) {
      if (std::isfinite(value(k))) {
        low = std::min(low, value(k));
        high = std::max(high, value(k));
      }
    }
    const double width = high > low ? high - low : 1.0;
    for (int k = 0; k < n; ++k) {
      const double below = k == 0 ? -kInf : value(k - 1);
      const double above = k == n - 1 ? kInf : value(k + 1);
      distances[order[k]] += (below == above ? 0.0 : above - below) / width;
    }
  }
  return distances;
}

double Hypervolume(const std::vector<std::vector<double>>& losses,
                   std::span<const double> reference) {
  return Volume(Inside(losses, reference), reference, static_cast<int>(reference.size()));
}

std::vector<double> HypervolumeContributions(const std::vector<std::vector<double>>& losses,
                                             std::span<const double> reference) {
  const double all = Hypervolume(losses, reference);
  std::vector<double> contributions;
  std::vector<std::vector<double>> others;
  for (size_t i = 0; i < losses.size(); ++i) {
    others.assign(losses.begin(), losses.end());
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    contributions.push_back(std::max(0.0, all - Hypervolume(others, reference)));
  }
  return contributions;
}

std::vector<int> GreedyHypervolumeSubset(const std::vector<std::vector<double>>& losses, int count,
                                         std::span<const double> reference) {
  const int n = static_cast<int>(losses.size());
  // contribution[j]: what row j adds to the rows chosen so far.
  std::vector<double> contribution;
  for (const std::vector<double>& row : losses)
    contribution.push_back(Hypervolume({row}, reference));
  std::vector<bool> chosen(static_cast<size_t>(n), false);
  std::vector<std::vector<double>> selected;
  std::vector<int> indices;
  double selected_volume = 0;
  while (static_cast<int>(indices.size()) < std::min(count, n)) {
    int best = -1;
    for (int j = 0; j < n; ++j) {
      if (!chosen[j] && (best < 0 || contribution[j] > contribution[best])) best = j;
    }
    chosen[best] = true;
    // Row j's contribution loses the part the new row now covers: the volume that the corner
    // max(new, j) adds to the rows chosen before.
    for (int j = 0; j < n; ++j) {
      if (chosen[j]) continue;
      std::vector<double> corner(losses[j].size());
      for (size_t k = 0; k < corner.size(); ++k)
        corner[k] = std::max(losses[best][k], losses[j][k]);
      selected.push_back(std::move(corner));
      contribution[j] -= Hypervolume(selected, reference) - selected_volume;
      selected.pop_back();
    }
    selected.push_back(losses[best]);
    indices.push_back(best);
    selected_volume = Hypervolume(selected, reference);
  }
  return indices;
}

std::vector<double> MotpeReferencePoint(const std::vector<std::vector<double>>& losses) {
  std::vector<double> reference(losses.empty() ? 0 : losses[0].size(), -kInf);
  for (const std::vector<double>& row : losses) {
    for (size_t k = 0; k < reference.size(); ++k) reference[k] = std::max(reference[k], row[k]);
  }
  for (double& r : reference) {
    r = std::max(1.1 * r, 0.9 * r);
    if (r == 0) r = kEps;
  }
  return reference;
}

}  // namespace dhpt::optimizer
