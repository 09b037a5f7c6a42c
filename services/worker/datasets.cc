#include "services/worker/datasets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numbers>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "services/common/random.h"
#include "services/common/status_macros.h"

namespace dhpt::worker {
namespace {

constexpr uint64_t kFriedmanStream = 0x46524945;  // "FRIE"
constexpr uint64_t kSplitStream = 0x53504c54;     // "SPLT"
constexpr uint64_t kSensorStream = 0x53454e53;    // "SENS"

bool IsCancelled(const std::atomic<bool>* cancelled) {
  return cancelled != nullptr && cancelled->load(std::memory_order_relaxed);
}

absl::Status CancelledWhileLoading() {
  return absl::CancelledError("cancelled while loading the dataset");
}

std::string FormatBytes(int64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1 << 30);
  if (gib >= 1) return absl::StrFormat("%.1f GiB", gib);
  if (bytes < (1 << 20)) return absl::StrCat(bytes, " bytes");
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// RESOURCE_EXHAUSTED when a dataset of rows x cols would not fit the worker's limit.
absl::Status CheckDatasetSize(absl::string_view what, int64_t rows, int64_t cols,
                              int64_t max_bytes) {
  const int64_t bytes = EstimateDatasetBytes(rows, cols);
  if (bytes <= max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " of ", rows, " rows x ", cols, " columns needs about ", FormatBytes(bytes),
      " in the worker (the data and its train/validation split), over this worker's limit of ",
      FormatBytes(max_bytes),
      " (--max_dataset_bytes): use fewer rows or columns, or run it on workers started with a "
      "larger --max_dataset_bytes"));
}

// Splits one CSV line into `cells` (reused across lines); double quotes may enclose a cell
// ("" is a literal quote). Errors say what is wrong, never what the line holds.
absl::Status SplitCsvLine(absl::string_view line, int max_columns, std::vector<std::string>& cells) {
  size_t used = 0;
  auto next_cell = [&]() -> std::string* {
    if (used == cells.size()) cells.emplace_back();
    std::string* cell = &cells[used++];
    cell->clear();
    return cell;
  };
  std::string* cell = next_cell();
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell->push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell->push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      if (static_cast<int>(used) >= max_columns) {
        return absl::InvalidArgumentError(
            absl::StrCat("more than ", max_columns, " columns (the limit)"));
      }
      cell = next_cell();
    } else {
      cell->push_back(c);
    }
  }
  if (quoted) return absl::InvalidArgumentError("unterminated quote");
  cells.resize(used);
  for (std::string& each : cells) {
    absl::string_view stripped = absl::StripAsciiWhitespace(each);
    if (stripped.size() != each.size()) each = std::string(stripped);
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DefaultMaxDatasetBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  // Without an answer, 2 GiB: enough for the demos, little enough for a Raspberry Pi.
  if (pages <= 0 || page_size <= 0) return int64_t{2} << 30;
  return static_cast<int64_t>(pages) * page_size / 2;
}

int64_t EstimateDatasetBytes(int64_t rows, int64_t cols) {
  const double bytes = 2.0 * (static_cast<double>(rows) * static_cast<double>(cols) * sizeof(float) +
                              static_cast<double>(rows) * sizeof(float));
  if (rows < 0 || cols < 0) return 0;
  if (bytes >= static_cast<double>(std::numeric_limits<int64_t>::max())) {
    return std::numeric_limits<int64_t>::max();
  }
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<std::vector<std::string>> ResolveDataRoots(const std::vector<std::string>& roots) {
  std::vector<std::string> resolved;
  for (const std::string& root : roots) {
    if (root.empty()) continue;  // "--data_root=" or a trailing comma.
    char buffer[PATH_MAX];
    struct stat info {};
    errno = 0;
    if (realpath(root.c_str(), buffer) == nullptr || stat(buffer, &info) != 0 ||
        !S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_root=", root, " is not a directory on this machine",
          errno != 0 ? absl::StrCat(" (", std::strerror(errno), ")") : ""));
    }
    resolved.emplace_back(buffer);
  }
  return resolved;
}

DataFile::~DataFile() {
  if (fd_ >= 0) close(fd_);
}

namespace {

// A relative CSV path is relative to the data roots, not to wherever the worker was started:
// the first root that holds it, or the first root when none does (its error then says
// which roots were looked in).
std::string UnderDataRoot(const std::string& path, const std::vector<std::string>& resolved_roots) {
  if (path.empty() || path[0] == '/' || resolved_roots.empty()) return path;
  for (const std::string& root : resolved_roots) {
    const std::string candidate = (std::filesystem::path(root) / path).string();
    struct stat info {};
    if (lstat(candidate.c_str(), &info) == 0) return candidate;
  }
  return (std::filesystem::path(resolved_roots.front()) / path).string();
}

}  // namespace

absl::StatusOr<DataFile> OpenDataFile(const std::string& path,
                                      const std::vector<std::string>& resolved_roots,
                                      int64_t max_file_bytes) {
  // Errors name `path` as the study gave it.
  const std::string located = UnderDataRoot(path, resolved_roots);
  if (resolved_roots.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read ", path,
        ": this worker reads CSV files only under its --data_root directories; none is set: "
        "start it with --data_root=DIR holding the file"));
  }
  const std::string roots = absl::StrJoin(resolved_roots, ", ");
  auto inside_roots = [&resolved_roots](const std::string& real) {
    for (const std::string& root : resolved_roots) {
      // With the trailing '/', /data2/x is not inside /data; "/" holds everything.
      const std::string prefix = root == "/" ? root : root + "/";
      if (real.compare(0, prefix.size(), prefix) == 0) return true;
    }
    return false;
  };
  const absl::Status outside = absl::FailedPreconditionError(absl::StrCat(
      path, " is outside this worker's data roots (", roots,
      "): put the file under one of them, or ask the worker's operator to add its directory "
      "with --data_root"));
  // realpath() resolves "..", "." and every symlink, so what is compared is where the file
  // really is.
  char buffer[PATH_MAX];
  if (realpath(located.c_str(), buffer) == nullptr) {
    const int error = errno;
    // Said only of paths under a root, so a study cannot probe which files exist elsewhere.
    std::error_code ignored;
    const std::string lexical =
        std::filesystem::absolute(located, ignored).lexically_normal().string();
    if (!inside_roots(lexical)) return outside;
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(error),
                                            " (this worker's data roots: ", roots, ")"));
  }
  const std::string real = buffer;
  if (!inside_roots(real)) return outside;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever. The checks below
  // look at what was opened, so swapping the path afterwards changes nothing.
  const int fd = open(real.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(error)));
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file: a dataset must be a CSV file"));
  }
  if (info.st_size > max_file_bytes) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has ", info.st_size, " bytes, over this worker's limit of ", max_file_bytes,
        " (--max_dataset_file_bytes): use a smaller file, or ask the operator to raise it"));
  }
  // Reads block as usual from here on.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return DataFile(fd, static_cast<int64_t>(info.st_size));
}

absl::StatusOr<Dataset> GenerateFriedman1(const v1::Friedman1& spec,
                                          const std::atomic<bool>* cancelled) {
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
    if (i % kCancelCheckRows == 0 && IsCancelled(cancelled)) return CancelledWhileLoading();
    float* x = &data.features[static_cast<size_t>(i * data.cols)];
    for (int64_t j = 0; j < data.cols; ++j) x[j] = static_cast<float>(UniformUnit(generator));
    const double y = 10 * std::sin(std::numbers::pi * x[0] * x[1]) + 20 * std::pow(x[2] - 0.5, 2) +
                     10 * x[3] + 5 * x[4] + spec.noise() * StandardNormal(generator);
    data.target[static_cast<size_t>(i)] = static_cast<float>(y);
  }
  return data;
}

absl::StatusOr<Dataset> GenerateSensorChannels(const v1::SensorChannels& spec,
                                               const std::atomic<bool>* cancelled) {
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
    if (i % kCancelCheckRows == 0 && IsCancelled(cancelled)) return CancelledWhileLoading();
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

absl::StatusOr<Dataset> ParseCsv(absl::string_view text, absl::string_view target,
                                 const CsvLimits& limits, const std::atomic<bool>* cancelled) {
  // One line at a time; a quoted cell cannot span lines.
  size_t position = 0;
  int64_t line_number = 0;
  auto next_line = [&](absl::string_view& line) -> absl::Status {
    const size_t end = std::min(text.find('\n', position), text.size());
    line = text.substr(position, end - position);
    position = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (static_cast<int64_t>(line.size()) > limits.max_line_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, " is longer than ",
                                                     limits.max_line_bytes, " bytes (the limit)"));
    }
    return absl::OkStatus();
  };
  auto at = [&line_number](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", message));
  };
  auto at_cell = [&line_number](int64_t column, absl::string_view message) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_number, ", column ", column + 1, ": ", message));
  };

  absl::string_view line;
  if (text.empty()) return absl::InvalidArgumentError("the file is empty");
  RETURN_IF_ERROR(next_line(line));
  std::vector<std::string> header;
  if (absl::Status split = SplitCsvLine(line, limits.max_columns, header); !split.ok()) {
    return at(split.message());
  }
  const int64_t columns = static_cast<int64_t>(header.size());
  int64_t target_column = -1;
  Dataset data;
  for (int64_t j = 0; j < columns; ++j) {
    const std::string& name = header[static_cast<size_t>(j)];
    if (!target.empty() && name == target) {
      if (target_column >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("columns ", target_column + 1, " and ",
                                                       j + 1, " of the header are both named \"",
                                                       target, "\" (the target)"));
      }
      target_column = j;
    } else {
      data.feature_names.push_back(name);
    }
  }
  if (target_column < 0 && !target.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("target column \"", target,
                                                   "\" is not in the header (line 1, ", columns,
                                                   " columns)"));
  }
  if (data.feature_names.empty()) {
    return absl::InvalidArgumentError("the header has no feature column besides the target");
  }
  data.cols = static_cast<int64_t>(data.feature_names.size());
  std::vector<std::string> cells;
  while (position < text.size()) {
    RETURN_IF_ERROR(next_line(line));
    if (line_number % kCancelCheckRows == 0 && IsCancelled(cancelled)) {
      return CancelledWhileLoading();
    }
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (absl::Status split = SplitCsvLine(line, limits.max_columns, cells); !split.ok()) {
      return at(split.message());
    }
    if (static_cast<int64_t>(cells.size()) != columns) {
      return at(absl::StrCat("expected ", columns, " cells, found ", cells.size()));
    }
    for (int64_t j = 0; j < columns; ++j) {
      const std::string& cell = cells[static_cast<size_t>(j)];
      double value = 0;
      auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      if (cell.empty() || error != std::errc() || end != cell.data() + cell.size()) {
        return at_cell(j, "not a number");
      }
      if (!std::isfinite(value)) return at_cell(j, "not a finite number");
      if (j == target_column) {
        data.target.push_back(static_cast<float>(value));
      } else {
        data.features.push_back(static_cast<float>(value));
      }
    }
    ++data.rows;
  }
  if (data.rows < 2) {
    return absl::InvalidArgumentError(absl::StrCat("needs at least 2 data rows, has ", data.rows));
  }
  return data;
}

absl::StatusOr<Dataset> LoadCsv(const std::string& path, const std::string& target,
                                const DatasetOptions& options,
                                const std::atomic<bool>* cancelled) {
  ASSIGN_OR_RETURN(DataFile file,
                   OpenDataFile(path, options.data_roots, options.max_dataset_file_bytes));
  // While it is parsed, the text is held and a cell takes at least two of its bytes ("1,"), so
  // at most text + 4 bytes per two bytes of text before a byte is read; the exact size is
  // checked once parsed.
  if (const int64_t bytes = file.size() + 4 * (file.size() / 2 + 1);
      bytes > options.max_dataset_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": a CSV file of ", FormatBytes(file.size()), " may need up to ", FormatBytes(bytes),
        " in the worker while it is parsed, over this worker's limit of ",
        FormatBytes(options.max_dataset_bytes),
        " (--max_dataset_bytes): use a smaller file, or workers started with a larger limit"));
  }
  std::string text;
  text.resize(static_cast<size_t>(file.size()));
  size_t filled = 0;
  while (filled < text.size()) {
    if (IsCancelled(cancelled)) return CancelledWhileLoading();
    const size_t chunk = std::min<size_t>(text.size() - filled, size_t{1} << 24);
    const ssize_t n = read(file.fd(), text.data() + filled, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;  // Shorter than it was at fstat: parse what is there.
    filled += static_cast<size_t>(n);
  }
  text.resize(filled);
  absl::StatusOr<Dataset> data = ParseCsv(text, target, options.csv, cancelled);
  if (!data.ok()) {
    return absl::Status(data.status().code(), absl::StrCat(path, ": ", data.status().message()));
  }
  RETURN_IF_ERROR(CheckDatasetSize(absl::StrCat(path, ": the CSV dataset"), data->rows,
                                   data->cols, options.max_dataset_bytes));
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

DatasetCache::DatasetCache(DatasetOptions options) : options_(std::move(options)) {
  std::vector<std::string> resolved;
  for (const std::string& root : options_.data_roots) {
    absl::StatusOr<std::vector<std::string>> one = ResolveDataRoots({root});
    if (one.ok()) resolved.insert(resolved.end(), one->begin(), one->end());
  }
  options_.data_roots = std::move(resolved);
}

absl::StatusOr<Dataset> DatasetCache::Load(const v1::Dataset& spec,
                                           const std::atomic<bool>* cancelled) {
  // Sizes are checked before generating: a generated dataset is exactly rows x cols.
  if (spec.has_friedman1()) {
    RETURN_IF_ERROR(CheckDatasetSize("dataset friedman1", spec.friedman1().samples(),
                                     spec.friedman1().features(), options_.max_dataset_bytes));
    return GenerateFriedman1(spec.friedman1(), cancelled);
  }
  if (spec.has_sensors()) {
    const int channels =
        spec.sensors().channels() > 0 ? spec.sensors().channels() : kDefaultSensorChannels;
    RETURN_IF_ERROR(CheckDatasetSize("dataset sensors", spec.sensors().samples(), channels,
                                     options_.max_dataset_bytes));
    return GenerateSensorChannels(spec.sensors(), cancelled);
  }
  if (spec.has_csv()) return LoadCsv(spec.csv().path(), spec.csv().target(), options_, cancelled);
  return absl::InvalidArgumentError("dataset: set friedman1, sensors or csv");
}

absl::StatusOr<std::shared_ptr<const SplitDataset>> DatasetCache::Get(
    const v1::Dataset& spec, const std::atomic<bool>* cancelled) {
  std::string key;
  spec.SerializeToString(&key);
  // Loading holds the lock: concurrent trials of one study wait for one load rather than
  // each loading the same file. A load stops when its own trial is cancelled, so a cancelled
  // trial waits here at most for one load of another, live trial.
  absl::MutexLock lock(&mutex_);
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  if (IsCancelled(cancelled)) return CancelledWhileLoading();
  ASSIGN_OR_RETURN(Dataset data, Load(spec, cancelled));
  ASSIGN_OR_RETURN(SplitDataset split,
                   SplitTrainValidation(data, spec.validation_fraction(), spec.split_seed()));
  auto shared = std::make_shared<const SplitDataset>(std::move(split));
  loaded_[key] = shared;
  return shared;
}

}  // namespace dhpt::worker
