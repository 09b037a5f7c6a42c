#include "services/worker/openmp_spin.h"

#include <unistd.h>

#include <cstdlib>

namespace dhpt::worker {

void ReexecWithBoundedOpenMpSpin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // Set before the exec and so inherited by it: the new image finds it set and goes on.
  if (setenv("GOMP_SPINCOUNT", kDefaultGompSpinCount, /*overwrite=*/1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace dhpt::worker
