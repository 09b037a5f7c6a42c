#pragma once

// A small random forest of regression trees on the unit cube, for fANOVA (importance.h): CART
// trees grown on bootstrap samples to pure leaves (Optuna's fANOVA forest: sklearn's
// RandomForestRegressor with every feature tried at each split), and the functional ANOVA of
// each tree's prediction over the whole cube. Nothing in services/ grows trees of its own (the
// workers' forests are XGBoost's), hence this one.

#include <cstdint>
#include <vector>

namespace dhpt::analysis {

struct ForestOptions {
  int trees = 64;
  int max_depth = 64;
  uint64_t seed = 0;
};

class RandomForest {
 public:
  // `x[row][feature]` in [0, 1]; `choices[feature]` > 0 for a feature whose values are that
  // many choices at (index + 0.5) / choices: its splits fall on the choices' boundaries, so
  // each choice weighs the same in the marginals. Deterministic given options.seed.
  static RandomForest Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
                          const std::vector<int>& choices, const ForestOptions& options);

  // Each feature's main effect: the variance of a tree's marginal prediction along the feature
  // (the other features integrated out over the cube) as a share of the variance of the tree's
  // prediction, averaged over the trees whose prediction varies at all.
  std::vector<double> MainEffectShares() const;

  double Predict(const std::vector<double>& x) const;  // The trees' mean.

 private:
  struct Node {
    int feature = -1;  // -1: a leaf.
    double threshold = 0;  // Left when x[feature] < threshold.
    int left = 0, right = 0;
    double value = 0;  // The mean of the leaf's samples.
  };
  using Tree = std::vector<Node>;
  int features_ = 0;
  std::vector<Tree> trees_;
};

}  // namespace dhpt::analysis
