#pragma once

// The Pareto front of a multi-objective study: its feasible completed trials that no other such
// trial dominates, kept as trials complete, and the front's hypervolume. Logic only.

#include <cstdint>
#include <optional>
#include <vector>

#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

// The exact hypervolume costs O(n^(m-2) log n) for m >= 4 objectives: past this many steps the
// front gets a seeded Monte Carlo estimate instead, whose cost is bounded too, so that
// GetStudy never stalls the scheduler on a large front of many objectives.
inline constexpr double kExactHypervolumeBudget = 2e6;
inline constexpr double kEstimateBudget = 2e7;  // Samples x front size x objectives.
inline constexpr int kMinEstimateSamples = 1000;
inline constexpr int kMaxEstimateSamples = 100000;

class ParetoFront {
 public:
  // The study's objectives' directions and hypervolume references; a single-objective spec
  // gives a front that stays empty.
  explicit ParetoFront(const v1::StudySpec& spec);

  // Takes a COMPLETED trial (objective_values set): infeasible ones never join the front but a
  // feasible one may push members out. O(size of the front).
  void Add(const v1::Trial& trial);

  // Trial ids on the front, in the order they completed.
  const std::vector<uint64_t>& trial_ids() const { return ids_; }
  // The hypervolume the front dominates up to reference_point(); 0 while the front is empty.
  double hypervolume() const;
  // Whether hypervolume() is a Monte Carlo estimate (see kExactHypervolumeBudget).
  bool hypervolume_estimated() const;
  // Per objective, in the spec's units: the objective's `reference`, or the worst value among
  // the feasible completed trials.
  std::vector<double> reference_point() const;

 private:
  // Values turned so that every objective is minimised.
  std::vector<double> Minimised(const v1::Trial& trial) const;

  std::vector<bool> maximize_;
  std::vector<std::optional<double>> fixed_reference_;
  // Per objective (minimised): the worst feasible value seen, the default reference.
  std::vector<double> worst_;
  std::vector<uint64_t> ids_;
  std::vector<std::vector<double>> points_;  // Minimised values of the front, as ids_.
  // Computed on demand; unset when the front or the reference changed.
  mutable std::optional<double> hypervolume_;
  mutable bool estimated_ = false;
};

}  // namespace dhpt::scheduler
