// dhpt-cpu-worker: runs XGBoost, Random Forest and benchmark-function trials on the CPU. It
// never links libtorch, so it stays small enough for a Raspberry Pi.

#include "services/worker/worker_main.h"

namespace dhpt::worker {
namespace {

absl::StatusOr<WorkerSetup> SetUpCpuWorker() {
  // Its XGBoost library is checked by WorkerMain, once the kinds it announces are known.
  WorkerSetup setup;
  setup.models = {v1::Model::XGBOOST, v1::Model::RANDOM_FOREST, v1::Model::FUNCTION};
  return setup;
}

}  // namespace
}  // namespace dhpt::worker

int main(int argc, char** argv) {
  dhpt::worker::WorkerKind kind;
  kind.binary = "dhpt-cpu-worker";
  kind.purpose = "Runs XGBoost, Random Forest and benchmark-function trials on the CPU.";
  kind.setup = dhpt::worker::SetUpCpuWorker;
  return dhpt::worker::WorkerMain(argc, argv, kind);
}
