#pragma once

// What the benches on real training and their quality tables share: the rows they trained on,
// written for their Optuna peers (--export_dir: DIR/train.csv and DIR/validation.csv, features
// then the target as "y", which bench/optuna_peer_common.py's load() reads), the --budgets
// flag's trial counts, and the medians of their tables.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/worker/datasets.h"

namespace dhpt::bench {

inline void WriteCsv(const std::filesystem::path& path, const worker::Dataset& data) {
  std::ofstream out(path);
  for (int64_t j = 0; j < data.cols; ++j) out << data.feature_names[j] << ",";
  out << "y\n";
  out.precision(9);
  for (int64_t i = 0; i < data.rows; ++i) {
    for (int64_t j = 0; j < data.cols; ++j) out << data.features[i * data.cols + j] << ",";
    out << data.target[i] << "\n";
  }
}

inline void WriteSplitCsv(const std::filesystem::path& dir, const worker::SplitDataset& split) {
  std::filesystem::create_directories(dir);
  WriteCsv(dir / "train.csv", split.train);
  WriteCsv(dir / "validation.csv", split.validation);
}

// "50,100": the trial counts at which a quality bench records each run's best.
inline std::vector<int> ParseBudgets(absl::string_view text) {
  std::vector<int> budgets;
  for (absl::string_view b : absl::StrSplit(text, ',')) budgets.push_back(std::stoi(std::string(b)));
  return budgets;
}

// The middle of v, or the mean of its two middle values (v not empty).
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace dhpt::bench
