#include "services/common/param_values.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dhpt {

std::optional<double> AsNumber(const v1::ParameterValue& value) {
  switch (value.kind_case()) {
    case v1::ParameterValue::kDoubleValue:
      return value.double_value();
    case v1::ParameterValue::kIntValue:
      return static_cast<double>(value.int_value());
    default:
      return std::nullopt;
  }
}

namespace {
std::string FormatDouble(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrFormat("%.6g", v);
}
}  // namespace

std::string FormatParameterValue(const v1::ParameterValue& value) {
  switch (value.kind_case()) {
    case v1::ParameterValue::kDoubleValue:
      return absl::StrFormat("%.6g", value.double_value());
    case v1::ParameterValue::kIntValue:
      return absl::StrCat(value.int_value());
    case v1::ParameterValue::kStringValue:
      return value.string_value();
    default:
      return "";
  }
}

std::string FormatFixedValue(const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      return value.number_value() == std::floor(value.number_value())
                 ? FormatDouble(value.number_value())
                 : absl::StrFormat("%.17g", value.number_value());
    case google::protobuf::Value::kStringValue:
      return value.string_value();
    case google::protobuf::Value::kBoolValue:
      return value.bool_value() ? "true" : "false";
    default:
      return "";
  }
}

}  // namespace dhpt
