#include "services/worker/datasets.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <numbers>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "services/common/random.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

constexpr uint64_t kFriedmanStream = 0x46524945;  // "FRIE"
constexpr uint64_t kSplitStream = 0x53504c54;     // "SPLT"
constexpr uint64_t kSensorStream = 0x53454e53;    // "SENS"

// Splits one CSV line into cells; double quotes may enclose a cell ("" is a literal quote).
absl::StatusOr<std::vector<std::string>> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(std::string(absl::StripAsciiWhitespace(cell)));
      cell.clear();
    } else {
      cell.push_back(c);
    }
  }
  if (quoted) return absl::InvalidArgumentError("unterminated quote");
  cells.push_back(std::string(absl::StripAsciiWhitespace(cell)));
  return cells;
}

}  // namespace

absl::StatusOr<Dataset> GenerateFriedman1(const v1::Friedman1& spec) {
  if (spec.samples() < 1 || spec.features() < 5) {
    return absl::InvalidArgumentError("friedman1 needs samples >= 1 and features >= 5");
  }
  Dataset data;
  data.rows = spec.samples();
  data.cols = spec.features();
  for (int j = 0; j < spec.features(); ++j) data.feature_names.push_back(absl::StrCat("x", j + 1));
  data.features.resize(static_cast<size_t>(data.rows * data.cols));
  data.target.resize(static_cast<size_t>(data.rows));
  std::mt19937_64 generator = SeededGenerator(spec.seed(), kFriedmanStream, 0);
  for (int64_t i = 0; i < data.rows; ++i) {
    float* x = &data.features[static_cast<size_t>(i * data.cols)];
    for (int64_t j = 0; j < data.cols; ++j) x[j] = static_cast<float>(UniformUnit(generator));
    const double y = 10 * std::sin(std::numbers::pi * x[0] * x[1]) + 20 * std::pow(x[2] - 0.5, 2) +
                     10 * x[3] + 5 * x[4] + spec.noise() * StandardNormal(generator);
    data.target[static_cast<size_t>(i)] = static_cast<float>(y);
  }
  return data;
}

absl::StatusOr<Dataset> GenerateSensorChannels(const v1::SensorChannels& spec) {
  const int channels = spec.channels() > 0 ? spec.channels() : kDefaultSensorChannels;
  const int latent = spec.latent() > 0 ? spec.latent() : kDefaultSensorLatent;
  const double noise = spec.noise() > 0 ? spec.noise() : kDefaultSensorNoise;
  if (spec.samples() < 1 || latent >= channels) {
    return absl::InvalidArgumentError("sensors needs samples >= 1 and latent < channels");
  }
  // The mixing is drawn first, from its own sequence, so the channels of a spec do not depend
  // on its number of samples.
  std::mt19937_64 mixing = SeededGenerator(spec.seed(), kSensorStream, 0);
  std::vector<double> frequency(latent), phase(latent);
  for (int k = 0; k < latent; ++k) {
    frequency[k] = 0.002 + 0.048 * UniformUnit(mixing);
    phase[k] = 2 * std::numbers::pi * UniformUnit(mixing);
  }
  const double mixing_scale = 1 / std::sqrt(static_cast<double>(latent));
  std::vector<double> weight(static_cast<size_t>(channels) * latent), offset(channels), gain(channels);
  for (double& w : weight) w = mixing_scale * StandardNormal(mixing);
  for (int j = 0; j < channels; ++j) {
    offset[j] = 2 * UniformUnit(mixing) - 1;
    gain[j] = 0.5 + 1.5 * UniformUnit(mixing);
  }

  Dataset data;
  data.rows = spec.samples();
  data.cols = channels;
  for (int j = 0; j < channels; ++j) data.feature_names.push_back(absl::StrCat("s", j + 1));
  data.features.resize(static_cast<size_t>(data.rows * data.cols));
  data.target.resize(static_cast<size_t>(data.rows));
  std::mt19937_64 noise_generator = SeededGenerator(spec.seed(), kSensorStream, 1);
  std::vector<double> z(latent);
  for (int64_t i = 0; i < data.rows; ++i) {
    for (int k = 0; k < latent; ++k) {
      z[k] = std::sin(2 * std::numbers::pi * frequency[k] * static_cast<double>(i) + phase[k]);
    }
    float* x = &data.features[static_cast<size_t>(i * data.cols)];
    for (int j = 0; j < channels; ++j) {
      double mixed = 0;
      for (int k = 0; k < latent; ++k) mixed += weight[static_cast<size_t>(j) * latent + k] * z[k];
      x[j] = static_cast<float>(offset[j] +
                                gain[j] * (std::tanh(mixed) + noise * StandardNormal(noise_generator)));
    }
    data.target[static_cast<size_t>(i)] = static_cast<float>(z[0]);
  }
  return data;
}

absl::StatusOr<Dataset> LoadCsv(const std::string& path, const std::string& target) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open CSV file ", path));
  std::string line;
  if (!std::getline(in, line)) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  absl::StatusOr<std::vector<std::string>> header = SplitCsvLine(line);
  if (!header.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ":1: ", header.status().message()));
  int target_column = -1;
  Dataset data;
  for (size_t j = 0; j < header->size(); ++j) {
    if ((*header)[j] == target) {
      target_column = static_cast<int>(j);
    } else {
      data.feature_names.push_back((*header)[j]);
    }
  }
  if (target_column < 0 && !target.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("target column \"", target, "\" is not in the header of ",
                                                   path, " (columns: ", absl::StrJoin(*header, ", "), ")"));
  }
  if (data.feature_names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no feature column besides the target"));
  }
  data.cols = static_cast<int64_t>(data.feature_names.size());
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string where = absl::StrCat(path, ":", line_number, ": ");
    absl::StatusOr<std::vector<std::string>> cells = SplitCsvLine(line);
    if (!cells.ok()) return absl::InvalidArgumentError(where + std::string(cells.status().message()));
    if (cells->size() != header->size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected ", header->size(),
                                                     " cells, found ", cells->size()));
    }
    for (size_t j = 0; j < cells->size(); ++j) {
      const std::string& cell = (*cells)[j];
      double value = 0;
      auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      if (cell.empty() || error != std::errc() || end != cell.data() + cell.size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, "column \"", (*header)[j], "\": \"",
                                                       cell, "\" is not a number"));
      }
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat(where, "column \"", (*header)[j], "\": ",
                                                       cell, " is not a finite number"));
      }
      if (static_cast<int>(j) == target_column) {
        data.target.push_back(static_cast<float>(value));
      } else {
        data.features.push_back(static_cast<float>(value));
      }
    }
    ++data.rows;
  }
  if (data.rows < 2) {
    return absl::InvalidArgumentError(absl::StrCat(path, " needs at least 2 data rows, has ", data.rows));
  }
  return data;
}

absl::StatusOr<SplitDataset> SplitTrainValidation(const Dataset& data, double fraction,
                                                  uint64_t seed) {
  if (data.rows < 2) return absl::InvalidArgumentError("a split needs at least 2 rows");
  if (!(fraction > 0 && fraction < 1)) {
    return absl::InvalidArgumentError("validation_fraction must be between 0 and 1");
  }
  const int64_t validation_rows = std::clamp<int64_t>(
      std::llround(fraction * static_cast<double>(data.rows)), 1, data.rows - 1);
  std::vector<int64_t> order(static_cast<size_t>(data.rows));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator = SeededGenerator(seed, kSplitStream, 0);
  DeterministicShuffle(order.begin(), order.end(), generator);

  SplitDataset split;
  auto take = [&data](Dataset& out, const int64_t* rows, int64_t count) {
    out.feature_names = data.feature_names;
    out.rows = count;
    out.cols = data.cols;
    out.features.reserve(static_cast<size_t>(count * data.cols));
    out.target.reserve(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      const float* row = &data.features[static_cast<size_t>(rows[k] * data.cols)];
      out.features.insert(out.features.end(), row, row + data.cols);
      if (!data.target.empty()) out.target.push_back(data.target[static_cast<size_t>(rows[k])]);
    }
  };
  take(split.validation, order.data(), validation_rows);
  take(split.train, order.data() + validation_rows, data.rows - validation_rows);
  return split;
}

absl::StatusOr<std::shared_ptr<const SplitDataset>> DatasetCache::Get(const v1::Dataset& spec) {
  std::string key;
  spec.SerializeToString(&key);
  // Loading holds the lock: concurrent trials of one study wait for one load rather than
  // each loading the same file.
  absl::MutexLock lock(&mutex_);
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  absl::StatusOr<Dataset> data = absl::InvalidArgumentError("dataset: set friedman1, sensors or csv");
  if (spec.has_friedman1()) {
    data = GenerateFriedman1(spec.friedman1());
  } else if (spec.has_sensors()) {
    data = GenerateSensorChannels(spec.sensors());
  } else if (spec.has_csv()) {
    data = LoadCsv(spec.csv().path(), spec.csv().target());
  }
  if (!data.ok()) return data.status();
  ASSIGN_OR_RETURN(SplitDataset split,
                   SplitTrainValidation(*data, spec.validation_fraction(), spec.split_seed()));
  auto shared = std::make_shared<const SplitDataset>(std::move(split));
  loaded_[key] = shared;
  return shared;
}

}  // namespace dhpt::worker
