#include "services/analysis/random_forest.h"

#include <algorithm>
#include <cmath>

#include "services/common/random.h"

namespace dhpt::analysis {
namespace {

// Grows one CART tree by variance reduction. Each feature keeps the node's samples sorted by
// that feature in its own array; a split partitions every array stably, so no node sorts.
class TreeBuilder {
 public:
  TreeBuilder(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
              const std::vector<int>& choices, std::vector<int> sample, int max_depth)
      : x_(x), y_(y), choices_(choices), max_depth_(max_depth),
        features_(static_cast<int>(choices.size())) {
    sorted_.resize(features_);
    for (int f = 0; f < features_; ++f) {
      sorted_[f] = sample;
      std::stable_sort(sorted_[f].begin(), sorted_[f].end(),
                       [&](int a, int b) { return x_[a][f] < x_[b][f]; });
    }
    goes_left_.assign(x.size(), 0);
    scratch_.resize(sample.size());
  }

  template <typename Node>
  void Build(std::vector<Node>& nodes) {
    nodes.clear();
    Grow(nodes, 0, static_cast<int>(sorted_.empty() ? 0 : sorted_[0].size()), 0);
  }

 private:
  template <typename Node>
  int Grow(std::vector<Node>& nodes, int begin, int end, int depth) {
    const int index = static_cast<int>(nodes.size());
    nodes.emplace_back();
    const std::vector<int>& any = sorted_[0];
    double sum = 0;
    for (int i = begin; i < end; ++i) sum += y_[any[i]];
    const int count = end - begin;
    nodes[index].value = sum / count;
    if (count < 2 || depth >= max_depth_) return index;
    // The best split: the largest sum_L^2 / n_L + sum_R^2 / n_R.
    const double parent = sum * sum / count;
    double best_gain = 1e-12 * std::max(1.0, std::abs(parent));
    int best_feature = -1, best_at = 0;
    double best_threshold = 0;
    for (int f = 0; f < features_; ++f) {
      const std::vector<int>& order = sorted_[f];
      double left = 0;
      for (int i = begin; i + 1 < end; ++i) {
        left += y_[order[i]];
        const double here = x_[order[i]][f], next = x_[order[i + 1]][f];
        if (here == next) continue;
        const int n_left = i + 1 - begin, n_right = end - i - 1;
        const double right = sum - left;
        const double gain = left * left / n_left + right * right / n_right - parent;
        if (gain > best_gain) {
          best_gain = gain;
          best_feature = f;
          best_at = i + 1;
          best_threshold = Threshold(f, here, next);
        }
      }
    }
    if (best_feature < 0) return index;  // Every sample has the same value, or no split helps.
    for (int i = begin; i < end; ++i) {
      goes_left_[sorted_[best_feature][i]] = i < best_at ? 1 : 0;
    }
    for (int f = 0; f < features_; ++f) {
      if (f != best_feature) StablePartition(sorted_[f], begin, end);
    }
    const int left_child = Grow(nodes, begin, best_at, depth + 1);
    const int right_child = Grow(nodes, best_at, end, depth + 1);
    nodes[index].feature = best_feature;
    nodes[index].threshold = best_threshold;
    nodes[index].left = left_child;
    nodes[index].right = right_child;
    return index;
  }

  // Numbers split halfway between neighbours (as sklearn does); choices on the boundary above
  // the lower one, so that every choice keeps an equal width of the cube.
  double Threshold(int f, double here, double next) const {
    if (choices_[f] == 0) return 0.5 * (here + next);
    const int lower = std::min(choices_[f] - 1, static_cast<int>(here * choices_[f]));
    return static_cast<double>(lower + 1) / choices_[f];
  }

  void StablePartition(std::vector<int>& order, int begin, int end) {
    int left = begin, right = 0;
    for (int i = begin; i < end; ++i) {
      if (goes_left_[order[i]]) {
        order[left++] = order[i];
      } else {
        scratch_[right++] = order[i];
      }
    }
    std::copy(scratch_.begin(), scratch_.begin() + right, order.begin() + left);
  }

  const std::vector<std::vector<double>>& x_;
  const std::vector<double>& y_;
  const std::vector<int>& choices_;
  const int max_depth_;
  const int features_;
  std::vector<std::vector<int>> sorted_;
  std::vector<char> goes_left_;
  std::vector<int> scratch_;
};

struct Leaf {
  std::vector<double> low, high;
  double value = 0;
  double volume = 0;
};

template <typename Node>
void CollectLeaves(const std::vector<Node>& tree, int index, std::vector<double>& low,
                   std::vector<double>& high, std::vector<Leaf>& leaves) {
  const Node& node = tree[index];
  if (node.feature < 0) {
    double volume = 1;
    for (size_t f = 0; f < low.size(); ++f) volume *= high[f] - low[f];
    leaves.push_back({low, high, node.value, volume});
    return;
  }
  const double saved_high = high[node.feature];
  high[node.feature] = std::min(saved_high, node.threshold);
  CollectLeaves(tree, node.left, low, high, leaves);
  high[node.feature] = saved_high;
  const double saved_low = low[node.feature];
  low[node.feature] = std::max(saved_low, node.threshold);
  CollectLeaves(tree, node.right, low, high, leaves);
  low[node.feature] = saved_low;
}

}  // namespace

RandomForest RandomForest::Fit(const std::vector<std::vector<double>>& x,
                               const std::vector<double>& y, const std::vector<int>& choices,
                               const ForestOptions& options) {
  RandomForest forest;
  forest.features_ = static_cast<int>(choices.size());
  const int n = static_cast<int>(y.size());
  for (int t = 0; t < options.trees; ++t) {
    std::mt19937_64 generator = SeededGenerator(options.seed, 0xf04e57, t);
    std::vector<int> sample(n);
    for (int& s : sample) s = static_cast<int>(generator() % static_cast<uint64_t>(n));
    TreeBuilder builder(x, y, choices, std::move(sample), options.max_depth);
    builder.Build(forest.trees_.emplace_back());
  }
  return forest;
}

double RandomForest::Predict(const std::vector<double>& x) const {
  double sum = 0;
  for (const Tree& tree : trees_) {
    int index = 0;
    while (tree[index].feature >= 0) {
      const Node& node = tree[index];
      index = x[node.feature] < node.threshold ? node.left : node.right;
    }
    sum += tree[index].value;
  }
  return trees_.empty() ? 0 : sum / trees_.size();
}

std::vector<double> RandomForest::MainEffectShares() const {
  std::vector<double> shares(features_, 0.0);
  int counted = 0;
  for (const Tree& tree : trees_) {
    std::vector<double> low(features_, 0.0), high(features_, 1.0);
    std::vector<Leaf> leaves;
    CollectLeaves(tree, 0, low, high, leaves);
    double mean = 0;
    for (const Leaf& leaf : leaves) mean += leaf.volume * leaf.value;
    double variance = 0;
    for (const Leaf& leaf : leaves) variance += leaf.volume * (leaf.value - mean) * (leaf.value - mean);
    if (!(variance > 0)) continue;
    ++counted;
    for (int f = 0; f < features_; ++f) {
      // The tree's marginal along f is a step function between the leaves' edges on f; each
      // leaf adds value * (its volume in the other features) on the steps it spans. A
      // difference array makes that O(leaves log leaves).
      std::vector<double> edges = {0.0, 1.0};
      for (const Leaf& leaf : leaves) {
        edges.push_back(leaf.low[f]);
        edges.push_back(leaf.high[f]);
      }
      std::sort(edges.begin(), edges.end());
      edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
      std::vector<double> step(edges.size(), 0.0);
      auto position = [&](double at) {
        return std::lower_bound(edges.begin(), edges.end(), at) - edges.begin();
      };
      for (const Leaf& leaf : leaves) {
        const double width = leaf.high[f] - leaf.low[f];
        if (width <= 0) continue;
        const double add = leaf.value * leaf.volume / width;
        step[position(leaf.low[f])] += add;
        step[position(leaf.high[f])] -= add;
      }
      double marginal = 0, explained = 0;
      for (size_t j = 0; j + 1 < edges.size(); ++j) {
        marginal += step[j];
        const double deviation = marginal - mean;
        explained += (edges[j + 1] - edges[j]) * deviation * deviation;
      }
      shares[f] += explained / variance;
    }
  }
  if (counted > 0) {
    for (double& share : shares) share /= counted;
  }
  return shares;
}

}  // namespace dhpt::analysis
