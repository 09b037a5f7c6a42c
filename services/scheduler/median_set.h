#pragma once

// A multiset of numbers that knows its median: the lower and the upper half are kept apart, so
// a change costs O(log n) and the median is read in constant time. SpeedModel keeps the cluster's
// median speed per model kind in one: recomputing it from every board's speed at each completed
// trial cost a fifth of the scheduler's CPU with 1,000 workers (docs/benchmarks.md, "Scale").

#include <cstddef>
#include <iterator>
#include <optional>
#include <set>

namespace dhpt::scheduler {

class MedianSet {
 public:
  void Insert(double value) {
    if (upper_.empty() || !(value < *upper_.begin())) {
      upper_.insert(value);
    } else {
      lower_.insert(value);
    }
    Rebalance();
  }

  // Removes one copy of `value`; false (and nothing changes) when it holds none.
  bool Erase(double value) {
    std::multiset<double>& half = !upper_.empty() && !(value < *upper_.begin()) ? upper_ : lower_;
    auto it = half.find(value);
    if (it == half.end()) return false;
    half.erase(it);
    Rebalance();
    return true;
  }

  size_t size() const { return lower_.size() + upper_.size(); }
  bool empty() const { return upper_.empty(); }

  // The middle value, or the mean of the two middle ones (the lower first, as in
  // (lower + upper) / 2); nullopt when empty.
  std::optional<double> Median() const {
    if (upper_.empty()) return std::nullopt;
    if (upper_.size() > lower_.size()) return *upper_.begin();
    return (*lower_.rbegin() + *upper_.begin()) / 2;
  }

 private:
  // The upper half holds as many values as the lower one, or one more (the middle one).
  void Rebalance() {
    if (lower_.size() > upper_.size()) {
      auto largest = std::prev(lower_.end());
      upper_.insert(*largest);
      lower_.erase(largest);
    } else if (upper_.size() > lower_.size() + 1) {
      lower_.insert(*upper_.begin());
      upper_.erase(upper_.begin());
    }
  }

  std::multiset<double> lower_;  // Every value here is at most every value in upper_.
  std::multiset<double> upper_;
};

}  // namespace dhpt::scheduler
