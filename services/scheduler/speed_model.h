#pragma once

// How fast each node class runs each model kind, learnt from the trials it completed (issue 32):
// placement gives the longest predicted trials to the fastest free workers and duplicates a slow
// worker's last trial on an idle fast one (dispatch.cc). A node class is a board, not a worker:
// four Raspberry Pis learn one speed between them. Nothing is stored: after a restart the
// scheduler learns again from the trials that complete, and places as first-come until then.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"
#include "services/scheduler/median_set.h"

namespace dhpt::scheduler {

// Completed trials remembered per (node class, kind): the estimate follows a board whose speed
// changes (thermal throttling, another tenant) within this many trials.
inline constexpr int kSpeedWindow = 16;
// Node classes learnt at most; more (worker ids of short-lived workers without labels) are not
// learnt, so a churn of workers cannot grow the scheduler's memory.
inline constexpr size_t kMaxSpeedClasses = 1024;
// The CPU a trial may use that a prior is taken from (WorkerCapabilities.trial_cpu_cores): a
// cgroup quota cannot be below a millicore, and no board has 65,536 cores. A value outside is
// taken as unknown, so a worker that announces 1e308 or 5e-324 cannot make every board's prior
// infinite or zero.
inline constexpr double kMinTrialCpuCores = 0.001;
inline constexpr double kMaxTrialCpuCores = 65'536;

// The class a worker's trials are learnt under: its `board` label (bench/edge_cluster.sh and the
// chart's cpuWorker.labels set it), else `dhpt.io/board`, else `node`, else the worker id.
std::string NodeClass(const v1::WorkerCapabilities& worker, absl::string_view worker_id);

// A trial's size in work units, which its time is taken to be proportional to: boosting rounds
// (XGBoost), trees (Random Forest) or epochs (AutoEncoder) times training rows, from the trial's
// parameters, else the model's fixed ones, else the trainer's default. Rows are unknown for CSV
// files (1: a study's trials share its data, so their sizes still compare). COMMAND and function
// trials are one unit each: the study's budget is the same for every trial.
// The steps a trial reports progress in up to its end (rounds, trees, epochs), as above;
// nullopt for kinds whose steps DHPT does not know (COMMAND, functions).
std::optional<double> TrialSteps(const v1::Model& model,
                                 const google::protobuf::Map<std::string, v1::ParameterValue>& params);
double TrialWorkUnits(const v1::Model& model,
                      const google::protobuf::Map<std::string, v1::ParameterValue>& params,
                      const v1::Dataset& dataset);

class SpeedModel {
 public:
  // A completed trial of `units` on `node_class` took `took` (the core's clock, assignment to
  // result). Ignored when either is not positive, or their ratio is not a finite, positive number.
  void Record(const std::string& node_class, v1::Model::Kind kind, double units,
              absl::Duration took);
  // The class's prior, what it is taken to run at before it completed a trial of a kind: in
  // proportion to the CPU one of its trials may use (WorkerCapabilities.trial_cpu_cores, its
  // cgroup's CPU quota: a pod's CPU limit, a board's in bench/edge_cluster.sh). So a Pi 4 that
  // has not finished a trial yet is not handed TPE's largest random-start trial as if it were
  // an Orin. The latest worker of the class to say hello sets it; ignored outside
  // [kMinTrialCpuCores, kMaxTrialCpuCores].
  void SetPrior(const std::string& node_class, double trial_cpu_cores);
  // The class's last worker left: its prior no longer counts in other classes' predictions
  // (what it learnt stays, for when it comes back).
  void ForgetPrior(const std::string& node_class);
  // Whether a class not seen yet would be learnt (under kMaxSpeedClasses).
  bool HasRoomFor(const std::string& node_class) const { return AdmitClass(node_class); }
  // Forgets everything learnt of the classes for which `keep` is false, to make room.
  void ForgetClassesExcept(const std::function<bool(const std::string&)>& keep);

  // The median seconds per unit of the class's last kSpeedWindow trials of this kind: a median
  // of log ratios, so one trial that waited behind a frozen link does not move it. Before the
  // class has completed such a trial, its prior: the classes that have, per CPU core (their
  // median), over its cores; nullopt without a prior or before any class with one completed.
  std::optional<double> SecondsPerUnit(const std::string& node_class, v1::Model::Kind kind) const;
  std::optional<absl::Duration> Predict(const std::string& node_class, v1::Model::Kind kind,
                                        double units) const;
  // The cluster's median class's seconds per unit of this kind; nullopt before any completed.
  std::optional<double> MedianSecondsPerUnit(v1::Model::Kind kind) const;
  // How many times faster than the cluster's median class the class runs this kind (2: twice as
  // fast), from SecondsPerUnit (learnt, else the prior); nullopt until a class completed one
  // such trial.
  std::optional<double> RelativeSpeed(const std::string& node_class, v1::Model::Kind kind) const;
  // RelativeSpeed's geometric mean over the kinds the class has run: how dispatch orders free
  // workers. Before it completed a trial, by its prior: over the kinds others completed, else
  // (no class completed any) its cores over the median class's; nullopt without either.
  std::optional<double> OverallSpeed(const std::string& node_class) const;
  // OverallSpeed while it rests on the prior alone (the class completed no trial yet).
  std::optional<double> PriorSpeed(const std::string& node_class) const;

  struct Estimate {
    std::string node_class;
    v1::Model::Kind kind;
    double relative_speed;
    double seconds_per_unit;
  };
  // Every learnt (class, kind), in class then kind order; priors are not estimates.
  std::vector<Estimate> Estimates() const;
  std::vector<Estimate> EstimatesOf(const std::string& node_class) const;
  // Whether the class completed a trial of this kind itself (its estimate is not its prior).
  bool Learnt(const std::string& node_class, v1::Model::Kind kind) const {
    return series_.contains(std::make_pair(node_class, static_cast<int>(kind)));
  }
  // SecondsPerUnit where Learnt, else nullopt: one lookup for both.
  std::optional<double> LearntSecondsPerUnit(const std::string& node_class,
                                             v1::Model::Kind kind) const;

 private:
  struct Series {
    std::deque<double> log_seconds_per_unit;  // The last kSpeedWindow, oldest first.
    double median = 0;                        // Of log_seconds_per_unit.
    // median plus the log of its class's prior, as its kind's per_core holds it; none without
    // a prior.
    std::optional<double> per_core;
  };
  // Per kind, over the classes that learnt it, kept up to date as they change (Record,
  // SetPrior), not computed when read: dispatch asks for them for every free worker of every
  // trial it places, and each completed trial changes one class's median.
  struct KindSummary {
    MedianSet class_medians;  // Each class's Series::median.
    MedianSet per_core;       // Each class's Series::per_core, for those with a prior.
  };
  // Enters the series' median (and per-core value) in its kind's summary, or takes it out.
  void Enter(int kind, const std::string& node_class, Series& series);
  void Withdraw(int kind, Series& series);
  bool AdmitClass(const std::string& node_class) const;
  std::optional<double> LogSecondsPerUnit(const std::string& node_class, int kind) const;

  std::map<std::pair<std::string, int>, Series> series_;
  std::map<int, KindSummary> kinds_;
  std::map<std::string, int> classes_;     // Class -> series count, to bound kMaxSpeedClasses.
  std::map<std::string, double> priors_;   // Class -> trial CPU cores.
  MedianSet prior_cores_;                  // priors_' values.
};

}  // namespace dhpt::scheduler
