#include "services/scheduler/trial_views.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace dhpt::scheduler {
namespace {

// The fields of serialised message `bytes` whose numbers are in `fields` (or are `also`, when
// not 0), as bytes of the same message: the others are skipped over, neither parsed nor copied,
// and the kept ones copied as they are.
template <size_t N>
std::string KeepFields(const std::string& bytes, const int (&fields)[N], int also = 0) {
  using google::protobuf::internal::WireFormatLite;
  std::string kept;
  kept.reserve(bytes.size());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (true) {
    const int start = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    if (!WireFormatLite::SkipField(&in, tag)) break;  // Bytes this process wrote: not expected.
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    if (field == also || std::find(std::begin(fields), std::end(fields), field) != std::end(fields)) {
      kept.append(bytes, static_cast<size_t>(start), static_cast<size_t>(in.CurrentPosition() - start));
    }
  }
  return kept;
}

bool DrawnAtItsMetric(v1::Trial::State state, const v1::StudySpec& spec) {
  return state == v1::Trial::PRUNED && spec.objectives_size() == 0;
}

}  // namespace

v1::Trial HeadOf(const std::string& stored) {
  static constexpr int kFields[] = {v1::Trial::kNumberFieldNumber, v1::Trial::kStateFieldNumber,
                                    v1::Trial::kOriginFieldNumber};
  v1::Trial trial;
  trial.ParseFromString(KeepFields(stored, kFields));
  return trial;
}

v1::Trial RecordFieldsOf(const std::string& stored) {
  static constexpr int kFields[] = {
      v1::Trial::kNumberFieldNumber,         v1::Trial::kStateFieldNumber,
      v1::Trial::kOriginFieldNumber,         v1::Trial::kParamsFieldNumber,
      v1::Trial::kObjectiveValueFieldNumber, v1::Trial::kObjectiveValuesFieldNumber,
      v1::Trial::kConstraintViolationFieldNumber};
  const v1::Trial head = HeadOf(stored);
  v1::Trial trial;
  trial.ParseFromString(KeepFields(
      stored, kFields, head.state() == v1::Trial::PRUNED ? v1::Trial::kMetricsFieldNumber : 0));
  return trial;
}

v1::Trial ValuesOnlyOf(const std::string& stored) {
  static constexpr int kFields[] = {v1::Trial::kNumberFieldNumber, v1::Trial::kStateFieldNumber,
                                    v1::Trial::kObjectiveValueFieldNumber,
                                    v1::Trial::kObjectiveValuesFieldNumber};
  v1::Trial values;
  values.ParseFromString(KeepFields(stored, kFields));
  if (values.has_objective_value() || values.state() != v1::Trial::COMPLETED) {
    values.clear_objective_values();
  }
  return values;
}

v1::Trial PlotViewOf(const std::string& stored, v1::Trial::State state, const v1::StudySpec& spec) {
  // Parsing the whole message (every metric, the error, the attempts) is most of a full
  // page's cost.
  static constexpr int kPlotFields[] = {
      v1::Trial::kIdFieldNumber,          v1::Trial::kNumberFieldNumber,
      v1::Trial::kStateFieldNumber,       v1::Trial::kParamsFieldNumber,
      v1::Trial::kWorkerIdFieldNumber,    v1::Trial::kCreateTimeFieldNumber,
      v1::Trial::kStartTimeFieldNumber,   v1::Trial::kEndTimeFieldNumber,
      v1::Trial::kObjectiveValueFieldNumber, v1::Trial::kObjectiveValuesFieldNumber,
      v1::Trial::kInfeasibleFieldNumber,  v1::Trial::kClientIdFieldNumber};
  v1::Trial view;
  view.ParseFromString(KeepFields(stored, kPlotFields,
                                  DrawnAtItsMetric(state, spec) ? v1::Trial::kMetricsFieldNumber : 0));
  KeepPlottedMetric(spec, view);
  return view;
}

void KeepPlottedMetric(const v1::StudySpec& spec, v1::Trial& view) {
  if (!DrawnAtItsMetric(view.state(), spec)) {
    view.clear_metrics();
    return;
  }
  const std::string& metric = spec.objective().metric();
  const auto it = view.metrics().find(metric);
  const std::optional<double> value =
      it == view.metrics().end() ? std::nullopt : std::optional<double>(it->second);
  view.clear_metrics();
  if (value) (*view.mutable_metrics())[metric] = *value;
}

}  // namespace dhpt::scheduler
