#pragma once

// A synthetic conditional problem whose optimum is known, for the optimiser tests and
// bench/conditional_quality_bench (bench/optuna_conditional_peer.py computes the same loss).
//
//   model in {linear, tree, net}                                    (the "model choice")
//   linear: alpha (log double [1e-4, 10])                 loss 0.4 + (log10 alpha + 1)^2 / 25
//   tree:   depth (int [1, 12]), subsample (double [0.1, 1]), booster in {gbtree, dart},
//           rate_drop (double [0, 1], only for dart)
//           loss (depth - 8)^2 / 60 + (subsample - 0.8)^2 + gbtree: 0.15, dart: (rate_drop - 0.3)^2
//   net:    layers (int [1, 3]), width_1 (int [8, 256], log), width_2 (only for layers >= 2),
//           width_3 (only for layers = 3)
//           loss 0.05 + 0.05 (3 - layers) + sum over active widths (log2 width_k - 4 - layers)^2 / 40
// The global minimum 0 is at model=tree, depth=8, subsample=0.8, booster=dart, rate_drop=0.3;
// net with 3 layers of width 128 is a local minimum of 0.05.
// Forbidden: booster=dart with depth 12.

#include "services/optimizer/search_space.h"

namespace dhpt::optimizer {

// The conditional space above; `flat`: the same parameters without conditions or forbidden
// clauses (every parameter always drawn), the baseline a user without conditions would write.
SearchSpace ConditionalBenchmarkSpace(bool flat = false);
// The loss of a point of either space (inactive parameters are ignored: a flat point's values
// for them have no effect); a forbidden point of the flat space costs 1.
double ConditionalBenchmarkLoss(const Point& point);

}  // namespace dhpt::optimizer
