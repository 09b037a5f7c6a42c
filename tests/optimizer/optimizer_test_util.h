#pragma once

// A study's history for driving optimisers by hand in tests.

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "services/optimizer/function_runs.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::optimizer {

struct TestStudy {
  std::vector<TrialRecord> trials;
  absl::flat_hash_set<std::string> keys;
  History history() const { return {trials, keys}; }
};

}  // namespace dhpt::optimizer
