#pragma once

// Datasets for trainers: Friedman #1 generated from a seed, CSV files, the seeded
// train/validation split, and the cache that keeps a loaded dataset across trials.
//
// A study is written by any API client, and every worker runs it: so a worker reads files only
// under the data roots its operator named, no error quotes a file's contents (only line and
// column numbers), and every dataset has a size limit, checked before anything is allocated.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// A CSV file's size limit: its text is held in memory while it is parsed.
inline constexpr int64_t kDefaultMaxDatasetFileBytes = int64_t{1} << 30;  // 1 GiB
// Garbage (a binary file, one endless line) fails on these long before memory runs out.
inline constexpr int kDefaultMaxCsvColumns = 10'000;
inline constexpr int64_t kDefaultMaxCsvLineBytes = int64_t{1} << 20;  // 1 MiB
// Generation and parsing look at the cancel flag this often, so that a cancelled trial stops
// within milliseconds even on a dataset of millions of rows.
inline constexpr int64_t kCancelCheckRows = 4096;

// Half of this machine's physical memory: one dataset (with its train/validation copies) may
// not take more, so a study cannot make a worker die of std::bad_alloc or the OOM killer.
int64_t DefaultMaxDatasetBytes();

struct CsvLimits {
  int max_columns = kDefaultMaxCsvColumns;
  int64_t max_line_bytes = kDefaultMaxCsvLineBytes;
};

// What a worker lets a study load. The worker's --data_root, --max_dataset_file_bytes and
// --max_dataset_bytes flags set these.
struct DatasetOptions {
  // CSV files are read only under these directories; none: no CSV dataset at all. Resolved
  // with realpath() when a DatasetCache is made (ResolveDataRoots checks them at start-up).
  std::vector<std::string> data_roots;
  int64_t max_dataset_file_bytes = kDefaultMaxDatasetFileBytes;
  // The memory a dataset may take in the worker: see EstimateDatasetBytes.
  int64_t max_dataset_bytes = DefaultMaxDatasetBytes();
  CsvLimits csv;
};

// The bytes a dataset of rows x cols takes in the worker: float features and target, twice:
// the loaded rows and the train/validation copies SplitTrainValidation makes of them (both are
// alive while the split is made). Saturates rather than overflows.
int64_t EstimateDatasetBytes(int64_t rows, int64_t cols);

// realpath() of each root. INVALID_ARGUMENT naming the root when one does not exist or is not
// a directory, so a typo in --data_root stops the worker at start-up, not every CSV trial.
absl::StatusOr<std::vector<std::string>> ResolveDataRoots(const std::vector<std::string>& roots);

// A file opened for reading under a data root (see OpenDataFile); closes it when destroyed.
class DataFile {
 public:
  DataFile(int fd, int64_t size) : fd_(fd), size_(size) {}
  DataFile(DataFile&& other) noexcept : fd_(other.fd_), size_(other.size_) { other.fd_ = -1; }
  DataFile& operator=(DataFile&&) = delete;
  ~DataFile();
  int fd() const { return fd_; }
  int64_t size() const { return size_; }

 private:
  int fd_;
  int64_t size_;
};

// Opens `path` when realpath(path) lies inside one of `resolved_roots` (already realpath-ed; a
// relative `path` is relative to the roots, the first that holds it, never to the worker's
// working directory), is a regular file (FIFOs, devices and directories are refused without
// blocking on them) and has at most `max_file_bytes`. The file is read through the returned descriptor, so it cannot
// be swapped for another between the checks and the read. Errors name the path and the roots
// and say how to fix the request, never what the file holds.
absl::StatusOr<DataFile> OpenDataFile(const std::string& path,
                                      const std::vector<std::string>& resolved_roots,
                                      int64_t max_file_bytes);

// y = 10 sin(pi x1 x2) + 20 (x3 - 0.5)^2 + 10 x4 + 5 x5 + noise N(0, 1), x ~ U[0, 1]^features;
// the same rows for the same spec on every machine. CANCELLED when `cancelled` is set.
absl::StatusOr<Dataset> GenerateFriedman1(const v1::Friedman1& spec,
                                          const std::atomic<bool>* cancelled = nullptr);

// Correlated sensor-like channels (the formula is in common.proto's SensorChannels); the same
// rows for the same spec on every machine. Zero fields take their documented defaults.
absl::StatusOr<Dataset> GenerateSensorChannels(const v1::SensorChannels& spec,
                                               const std::atomic<bool>* cancelled = nullptr);

// CSV text with a header row; `target` names the label column, every other column is a
// feature. An empty `target` makes every column a feature and leaves `target` empty. Every
// cell must be a finite number. Errors give line and column numbers and the target's name,
// never the text itself. A pure function (no I/O), so it can be fuzzed.
absl::StatusOr<Dataset> ParseCsv(absl::string_view text, absl::string_view target,
                                 const CsvLimits& limits = {},
                                 const std::atomic<bool>* cancelled = nullptr);

// ParseCsv of the file at `path`, opened with OpenDataFile under options.data_roots (already
// realpath-ed) and within options' size limits. Errors start with the path.
absl::StatusOr<Dataset> LoadCsv(const std::string& path, const std::string& target,
                                const DatasetOptions& options,
                                const std::atomic<bool>* cancelled = nullptr);

// Shuffles rows with `seed` and holds out round(fraction * rows) of them (at least one, and at
// least one left to train on).
absl::StatusOr<SplitDataset> SplitTrainValidation(const Dataset& data, double fraction,
                                                  uint64_t seed);

// Loads or generates a dataset once per worker and hands the same split to every trial.
// Failures and cancelled loads are not cached, so a fixed CSV file is read again by the next
// trial. Datasets over options.max_dataset_bytes are refused with RESOURCE_EXHAUSTED before
// they are generated or parsed.
class DatasetCache {
 public:
  // Resolves options.data_roots with realpath(); a root that does not resolve is dropped (and
  // then no file can be under it).
  explicit DatasetCache(DatasetOptions options = {});

  // `cancelled` (may be null) stops a load in progress: CANCELLED, and nothing is cached.
  absl::StatusOr<std::shared_ptr<const SplitDataset>> Get(
      const v1::Dataset& spec, const std::atomic<bool>* cancelled = nullptr);

 private:
  absl::StatusOr<Dataset> Load(const v1::Dataset& spec, const std::atomic<bool>* cancelled);

  DatasetOptions options_;
  absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const SplitDataset>> loaded_
      ABSL_GUARDED_BY(mutex_);
};

}  // namespace dhpt::worker
