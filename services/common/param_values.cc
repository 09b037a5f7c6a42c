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

v1::ParameterValue FixedAsParameterValue(const google::protobuf::Value& value) {
  v1::ParameterValue out;
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue:
      out.set_double_value(value.number_value());
      break;
    case google::protobuf::Value::kStringValue:
      out.set_string_value(value.string_value());
      break;
    case google::protobuf::Value::kBoolValue:
      out.set_int_value(value.bool_value() ? 1 : 0);
      break;
    default:
      break;
  }
  return out;
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

std::string FormatParameterValueExact(const v1::ParameterValue& value) {
  if (value.kind_case() == v1::ParameterValue::kDoubleValue) {
    return absl::StrFormat("%.17g", value.double_value());
  }
  return FormatParameterValue(value);
}

google::protobuf::Value ParameterValueAsJson(const v1::ParameterValue& value) {
  google::protobuf::Value json;
  if (value.kind_case() == v1::ParameterValue::kStringValue) {
    json.set_string_value(value.string_value());
  } else {
    json.set_number_value(AsNumber(value).value_or(0));
  }
  return json;
}

}  // namespace dhpt
