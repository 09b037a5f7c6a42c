#pragma once

// A TPE setting written into a quality bench's optimiser label as KEY=VALUE ("TPE prior=2
// startup=5"), so that a variant of the default TPE is measured without a study file or a new
// contender in the source.

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "services/optimizer/optimizer.h"

namespace dhpt::bench {

// Applies one: startup (n_startup_trials), candidates (n_ei_candidates), prior (prior_weight),
// multivariate (0 or 1). False: not one of those.
inline bool ApplyTpeSetting(absl::string_view word, optimizer::TpeOptions* tpe) {
  const std::vector<absl::string_view> kv = absl::StrSplit(word, absl::MaxSplits('=', 1));
  double value = 0;
  if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &value)) return false;
  if (kv[0] == "startup") {
    tpe->n_startup_trials = static_cast<int>(value);
  } else if (kv[0] == "candidates") {
    tpe->n_ei_candidates = static_cast<int>(value);
  } else if (kv[0] == "prior") {
    tpe->prior_weight = value;
  } else if (kv[0] == "multivariate") {
    tpe->multivariate = value != 0;
  } else {
    return false;
  }
  return true;
}

}  // namespace dhpt::bench
