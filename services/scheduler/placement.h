#pragma once

// Which worker may run which study's trials. A worker announces its device kind and the models
// it runs; AUTOENCODER trials need a CUDA worker unless the study allows a CPU fallback, and
// every other model runs on any worker that announces it (GPU workers announce XGBoost and
// Random Forest only when their operator allows it with --run-cpu-models). A study with a
// worker_selector runs only on workers announcing those labels.

#include <string>
#include <vector>

#include "dhpt/v1/common.pb.h"
#include "dhpt/v1/worker_service.pb.h"

namespace dhpt::scheduler {

bool NeedsGpu(const v1::StudySpec& spec);

// Whether the worker announces every label of the study's worker_selector.
bool MatchesSelector(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker);
// COMMAND studies: whether the worker announces the study's command (true for other kinds).
bool HasCommand(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker);
// EXTERNAL studies run on no worker: clients ask for their trials. A model-choice study runs
// on a worker that announces any of its kinds: each trial only where its own kind runs
// (RunsKind; dispatch holds a trial for a worker that runs it).
bool CanRun(const v1::StudySpec& spec, const v1::WorkerCapabilities& worker);
// Whether the worker announces the model kind.
bool RunsKind(const v1::WorkerCapabilities& worker, v1::Model::Kind kind);

// Everything of a worker's capabilities that CanRun reads, as a key: workers with equal keys
// can run the same studies. Dispatch sets idle workers aside by it.
std::string PlacementClass(const v1::WorkerCapabilities& worker);

// What a study that no connected worker can run waits for, for GetStudy and watch:
// "waiting for a CUDA worker that runs AUTOENCODER (connected: 2 CPU workers; ...)".
std::string WaitingForWorker(const v1::StudySpec& spec,
                             const std::vector<const v1::WorkerCapabilities*>& connected);

}  // namespace dhpt::scheduler
