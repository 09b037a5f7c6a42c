#pragma once

// Small conversions of the API's value types, shared by the scheduler, workers and the CLI.

#include <optional>
#include <string>

#include "dhpt/v1/common.pb.h"
#include "google/protobuf/struct.pb.h"

namespace dhpt {

// The value as a number: double and int values as they are; nullopt for strings.
std::optional<double> AsNumber(const v1::ParameterValue& value);
// "0.0123", "7", "gbtree": short and exact enough for tables and for XGBoost's string params.
std::string FormatParameterValue(const v1::ParameterValue& value);
// Exact: doubles with 17 significant digits, so that a program given the text reads back the
// very value the optimiser chose (command arguments, XGBoost's parameters, `dhpt ask`).
std::string FormatParameterValueExact(const v1::ParameterValue& value);
// The value as JSON sees it: numbers as numbers, strings as strings (EnqueueTrial, AddTrials).
google::protobuf::Value ParameterValueAsJson(const v1::ParameterValue& value);
// A google.protobuf.Value (from model.fixed) as a parameter value: numbers as doubles, strings
// as they are, booleans as 0 or 1.
v1::ParameterValue FixedAsParameterValue(const google::protobuf::Value& value);
// A google.protobuf.Value (from model.fixed) as the string XGBoost's SetParam takes.
std::string FormatFixedValue(const google::protobuf::Value& value);

}  // namespace dhpt
