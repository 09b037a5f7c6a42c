// dhpt-cpu-worker: runs XGBoost, Random Forest and benchmark-function trials on the CPU.

#include "services/worker/worker_main.h"

int main(int argc, char** argv) {
  return dhpt::worker::WorkerMain(
      argc, argv,
      {.binary = "dhpt-cpu-worker",
       .device_kind = dhpt::v1::WorkerCapabilities::CPU,
       .device_name = "cpu",
       .models = {dhpt::v1::Model::XGBOOST, dhpt::v1::Model::RANDOM_FOREST,
                  dhpt::v1::Model::FUNCTION}});
}
