#pragma once

// `dhpt compare`: runs one study twice, sequentially (one worker process running the study's
// optimiser itself, no scheduler) and through the framework (a local scheduler and workers,
// or a remote scheduler), measures both, and writes the report (compare_report) and plots
// (compare_plots). --matrix runs every study of a file with every algorithm, one comparison
// per cell, resuming where an interrupted matrix stopped.

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dhpt/v1/compare.pb.h"
#include "services/cli/local_cluster.h"
#include "services/common/transport_security.h"

namespace dhpt::cli {

class StudyClient;
class ChildProcess;

struct CompareOptions {
  std::string binary_dir;  // Where dhpt-scheduler and the worker binaries live.
  // The framework run: a remote scheduler at this address, or (empty) a local one with these
  // workers (-1: the `dhpt local` defaults).
  std::string scheduler;
  ChannelSecurity security;  // For the remote scheduler.
  // The local cluster; its threads per trial are the sequential run's too (with a remote
  // scheduler: threads_per_trial, or this machine's cores).
  LocalClusterRequest local;
  std::string log_file;  // The services' logs.
  // One line of progress at a time; `final` ends a run's line.
  std::function<void(const std::string& line, bool final)> progress;
};

class Comparison {
 public:
  explicit Comparison(CompareOptions options);
  ~Comparison();

  // Compares `spec`, writing the report, the spec both runs ran and the plots into `dir`.
  absl::StatusOr<v1::CompareReport> Run(const v1::StudySpec& spec, const std::string& dir);
  // Every study of `matrix` (a file in `matrix_dir`) with every algorithm, cells under
  // DIR/cells/NAME, the summary in DIR. Cells with a finished report of the same spec are kept.
  absl::StatusOr<v1::MatrixReport> RunMatrix(const v1::CompareMatrix& matrix,
                                             const std::string& matrix_dir, const std::string& dir);

  // Stops the comparison in progress from another thread (Ctrl-C): Run returns CANCELLED.
  void Cancel();

 private:
  absl::Status RunSequential(const v1::StudySpec& spec, const std::string& dir,
                             v1::RunReport& run);
  absl::Status RunFramework(const v1::StudySpec& spec, v1::RunReport& run);
  absl::Status WatchFramework(StudyClient& client, const std::string& name, v1::RunReport& run);
  bool cancelled() const { return cancelled_.load(); }
  void Progress(const std::string& line, bool final) const;

  const CompareOptions options_;
  std::atomic<bool> cancelled_ = false;
  absl::Mutex mutex_;
  ChildProcess* sequential_ ABSL_GUARDED_BY(mutex_) = nullptr;
  StudyClient* client_ ABSL_GUARDED_BY(mutex_) = nullptr;
};

// Reads a --matrix file: YAML or JSON in the proto JSON mapping of dhpt.v1.CompareMatrix.
absl::StatusOr<v1::CompareMatrix> ReadMatrixFile(const std::string& path);

}  // namespace dhpt::cli
