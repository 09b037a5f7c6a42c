#pragma once

// ListTrials' light views of a finished trial, taken from its stored bytes (a serialised
// v1::Trial, as the core keeps it in memory and the store on disk) without parsing the whole
// message: only the wanted fields' bytes are copied and parsed. The core answers a study in
// memory and an evicted one read page by page from the store with the same functions, so both
// answers are the same.

#include <string>

#include "dhpt/v1/common.pb.h"

namespace dhpt::scheduler {

// The trial's number, state and origin only.
v1::Trial HeadOf(const std::string& stored);

// What the optimiser's record of an ended trial reads (study::RecordEnded, and its point):
// number, state, origin, parameters, objective value(s), constraint violation, and a pruned
// trial's metrics.
v1::Trial RecordFieldsOf(const std::string& stored);

// values_only: number, state and the objective value(s). A single objective's trial carries its
// objective_value alone (objective_values only when it has none and completed): what the core
// keeps of it in memory.
v1::Trial ValuesOnlyOf(const std::string& stored);

// plot_view of a finished trial in state `state` (see ListTrialsRequest.plot_view).
v1::Trial PlotViewOf(const std::string& stored, v1::Trial::State state, const v1::StudySpec& spec);

// A pruned trial of one objective is drawn at its objective metric's value when stopped: of
// `view`'s metrics only that one stays (none for any other trial).
void KeepPlottedMetric(const v1::StudySpec& spec, v1::Trial& view);

}  // namespace dhpt::scheduler
