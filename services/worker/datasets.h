#pragma once

// Datasets for trainers: Friedman #1 generated from a seed, CSV files, the seeded
// train/validation split, and the cache that keeps a loaded dataset across trials.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dhpt/v1/common.pb.h"
#include "services/common/dataset_defaults.h"

namespace dhpt::worker {

// Row-major features and one target per row.
struct Dataset {
  std::vector<std::string> feature_names;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> features;  // rows * cols
  std::vector<float> target;    // rows, or empty when the data set has no target
};


struct SplitDataset {
  Dataset train;
  Dataset validation;
};

// y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + noise N(0, 1), x ~ U[0, 1]^features;
// the same rows for the same spec on every machine.
absl::StatusOr<Dataset> GenerateFriedman1(const v1::Friedman1& spec);

// Correlated sensor-like channels (the formula is in common.proto's SensorChannels); the same
// rows for the same spec on every machine. Zero fields take their documented defaults.
absl::StatusOr<Dataset> GenerateSensorChannels(const v1::SensorChannels& spec);

// A CSV file with a header row; `target` names the label column, every other column is a
// feature. An empty `target` makes every column a feature and leaves `target` empty. Every
// cell must be a finite number: errors name the line and column.
absl::StatusOr<Dataset> LoadCsv(const std::string& path, const std::string& target);

// Shuffles rows with `seed` and holds out round(fraction * rows) of them (at least one, and at
// least one left to train on).
absl::StatusOr<SplitDataset> SplitTrainValidation(const Dataset& data, double fraction,
                                                  uint64_t seed);

// Loads or generates a dataset once per worker and hands the same split to every trial.
// Failures are not cached, so a fixed CSV file is read again by the next trial.
class DatasetCache {
 public:
  absl::StatusOr<std::shared_ptr<const SplitDataset>> Get(const v1::Dataset& spec);

 private:
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const SplitDataset>> loaded_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::worker
