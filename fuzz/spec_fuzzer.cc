// Study specs as users send them: the same bytes read as proto JSON (grpcurl), as YAML (the
// CLI) and as the binary proto (any gRPC client). Whatever parses goes the way CreateStudy
// takes it: validation and normalisation, then, when valid, translation to the optimiser's
// types, the optimiser and one suggestion on an empty history. Nothing may crash, hang or
// allocate without bound, and a suggestion must translate back to the spec's parameters.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "services/cli/study_file.h"
#include "services/common/param_values.h"
#include "services/optimizer/optimizer.h"
#include "services/study/spec_translation.h"
#include "services/study/spec_validation.h"

namespace dhpt {
namespace {

void Exercise(const v1::StudySpec& spec) {
  absl::StatusOr<v1::StudySpec> normalized = study::NormalizeStudySpec(spec);
  if (!normalized.ok()) return;
  const optimizer::SearchSpace space = study::ToSearchSpace(*normalized);
  const optimizer::OptimizerConfig config = study::ToOptimizerConfig(*normalized);
  absl::StatusOr<std::unique_ptr<optimizer::Optimizer>> made = optimizer::MakeOptimizer(space, config);
  if (!made.ok()) return;
  const std::vector<optimizer::TrialRecord> trials;
  const absl::flat_hash_set<std::string> keys;
  absl::StatusOr<std::optional<optimizer::Point>> point = (*made)->Suggest({trials, keys});
  if (!point.ok() || !point->has_value()) return;
  // What the scheduler stores for the trial must read back as the same point.
  const study::ParamMap params = study::ToParamMap(space, **point);
  absl::StatusOr<optimizer::Point> back = study::ToPoint(space, params);
  if (!back.ok() || space.Key(*back) != space.Key(**point)) std::abort();
  // And the same point sent back as JSON values (EnqueueTrial, AddTrials) is accepted as itself.
  google::protobuf::Map<std::string, google::protobuf::Value> values;
  for (const auto& [name, value] : params) values[name] = ParameterValueAsJson(value);
  absl::StatusOr<optimizer::Point> sent = study::PointFromValues(space, values, "params");
  if (!sent.ok() || space.Key(*sent) != space.Key(**point)) std::abort();
}

}  // namespace
}  // namespace dhpt

// protobuf logs every rejected binary input (invalid UTF-8 and the like); a fuzzer sees
// millions of them.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    dhpt::v1::StudySpec spec;
    if (google::protobuf::util::JsonStringToMessage(text, &spec).ok()) dhpt::Exercise(spec);
  }
  {
    absl::StatusOr<dhpt::v1::StudySpec> spec = dhpt::cli::ParseStudySpec(text);
    if (spec.ok()) dhpt::Exercise(*spec);
  }
  {
    dhpt::v1::StudySpec spec;
    if (spec.ParseFromArray(data, static_cast<int>(size))) dhpt::Exercise(spec);
  }
  return 0;
}
