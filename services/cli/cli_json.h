#pragma once

// The JSON the CLI prints for --json: for scripts (jq, Python's json), not for protobuf parsers.
// It differs from the proto3 JSON mapping (ToJson, kept for dhpt export and grpcurl) in three
// ways users script against: every field is printed, zero values included (trial 0 has
// "number": 0); 64-bit integers are numbers, not strings; and a parameter value is the plain
// value ("max_depth": 6), not {"int_value": "6"}. Unset optional fields and messages are
// null; non-finite doubles are null; timestamps and durations keep their proto3 strings.

#include <string>

#include "google/protobuf/message.h"

namespace dhpt::cli {

// `message` as a pretty-printed JSON object (two-space indents), fields in declaration order,
// map keys sorted, with a final newline.
std::string CliJson(const google::protobuf::Message& message);

}  // namespace dhpt::cli
