#pragma once

// Protobuf enums are open: a message may carry a number its enum does not define (goal: 99),
// which every switch over the enum then reads as something no one meant. Messages from users
// and workers are checked for such numbers once, where they come in.

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace dhpt {

// INVALID_ARGUMENT naming the field (`root`.path.to.field) and the values it takes, for the first
// enum field anywhere in `message` (nested messages, repeated fields and map values included)
// whose number its enum does not define; OK otherwise.
absl::Status CheckEnumValues(const google::protobuf::Message& message, const std::string& root);

}  // namespace dhpt
