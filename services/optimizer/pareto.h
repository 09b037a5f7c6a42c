#pragma once

// Pareto utilities for multi-objective studies: dominance, non-dominated sorting (plain and
// constrained, as Optuna 3.1 defines it), crowding distance and exact hypervolume.
//
// Most functions take "losses": objective vectors in which every entry is to be minimised
// (ToLosses turns reported values into them). The scheduler's entry points are
// ParetoFrontIndices (reported values and directions) and Hypervolume (losses and a reference
// point).

#include <span>
#include <vector>

namespace dhpt::optimizer {

// The loss of each objective: the value, negated where it is maximised; NaN becomes +inf so
// that a trial that reported NaN is dominated rather than incomparable.
std::vector<double> ToLosses(std::span<const double> values, const std::vector<bool>& minimize);

// True when `a` is no worse than `b` in every objective and better in at least one (losses).
// Equal vectors do not dominate each other.
bool Dominates(std::span<const double> a, std::span<const double> b);

// Optuna 3.1's constrained dominance, with violation 0 meaning feasible: a feasible vector
// dominates an infeasible one; two infeasible ones compare by violation alone (the smaller
// dominates); two feasible ones by Dominates.
bool ConstrainedDominates(std::span<const double> a, double violation_a, std::span<const double> b,
                          double violation_b);

// The indices of the non-dominated rows of `values` (reported values, one row per trial,
// directions per objective), in increasing order. Duplicates of a non-dominated vector are all
// returned. The scheduler filters infeasible trials out first: GetParetoFront returns the
// non-dominated feasible trials.
std::vector<int> ParetoFrontIndices(const std::vector<std::vector<double>>& values,
                                    const std::vector<bool>& minimize);

// Non-dominated sorting of `losses`: the rank (front number, 0 first) of every row. With
// `violations` (one per row, 0 = feasible) the dominance is constrained: feasible rows are
// ranked among themselves first, then infeasible rows by increasing violation, equal
// violations sharing a rank. Sorting stops once `enough` rows are ranked; the rest get
// rank -1 (callers that need only the best few fronts save the rest of the work).
// Costs O(n log n + n * size of the fronts ranked) comparisons of vectors.
std::vector<int> NonDominatedRanks(const std::vector<std::vector<double>>& losses,
                                   std::span<const double> violations = {}, int enough = -1);

// The crowding distance of each row of `losses` (NSGA-II; Optuna 3.1's definition): per
// objective, the gap between the row's two neighbours in sorted order divided by the spread of
// that objective, summed over objectives; the extreme rows of an objective get +inf; an
// objective on which every row is equal adds nothing.
std::vector<double> CrowdingDistances(const std::vector<std::vector<double>>& losses);

// The hypervolume dominated by `losses` and bounded by `reference` (all minimised): the
// measure of { z : z <= reference and some point p <= z }. Points that do not strictly beat the
// reference in every objective add nothing. Exact: a sweep in 2-D (O(n log n)), a sweep over a
// balanced staircase in 3-D (O(n log n)), and for more objectives slicing along the last
// objective down to the 3-D case (O(n^(d-2) log n)); 1 objective is reference - min.
double Hypervolume(const std::vector<std::vector<double>>& losses,
                   std::span<const double> reference);

// How much each point adds to the hypervolume of all: Hypervolume(all) - Hypervolume(all but
// it). A dominated point or a duplicate adds 0.
std::vector<double> HypervolumeContributions(const std::vector<std::vector<double>>& losses,
                                             std::span<const double> reference);

// Greedy hypervolume subset selection (Optuna 3.1's _solve_hssp): `count` rows of `losses`
// chosen one at a time, each the row that adds the most hypervolume to those chosen before
// (lowest index on ties); returns their indices in the order chosen.
std::vector<int> GreedyHypervolumeSubset(const std::vector<std::vector<double>>& losses, int count,
                                         std::span<const double> reference);

// Optuna 3.1's reference point for MOTPE: per objective max(1.1 w, 0.9 w) of the worst loss w,
// 1e-12 where that is 0.
std::vector<double> MotpeReferencePoint(const std::vector<std::vector<double>>& losses);

}  // namespace dhpt::optimizer
