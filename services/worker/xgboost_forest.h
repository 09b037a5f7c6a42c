#pragma once

// One XGBoost model of a whole random forest, made from the chunk boosters TrainForest grows
// (xgboost_trainer.h), so that the forest's deployment costs are those of the single model a
// user would deploy, not of several boosters called one after another.
//
// XGBoost scales the leaves of a round of num_parallel_tree = n trees by 1/n when it grows them,
// and a model predicts base_score plus the sum of all its trees. So a chunk of n_k trees out of
// N, whose trees carry 1/n_k, gets its leaves multiplied by n_k/N: the merged model of N trees
// then predicts base_score + (1/N) * sum of all trees, the chunks' tree-count-weighted mean.
//
// The chunks are edited as the JSON text XGBoost 1.7 writes (XGBoosterSaveModelToBuffer,
// "json"): no JSON library is needed, and a layout this code does not recognise is an INTERNAL
// error, never a silently different model. Scaled values are written with an exponent, which
// XGBoost's reader requires for its float arrays ("0" would be read as an integer).

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dhpt::worker {

struct ForestChunk {
  std::string json;  // The chunk booster's model, as XGBoost saved it.
  int trees = 0;     // Its num_parallel_tree.
};

absl::StatusOr<std::string> MergeForestChunks(const std::vector<ForestChunk>& chunks);

}  // namespace dhpt::worker
