#pragma once

// Worker labels (--labels=board=pi4,gpu=orin) and the study selectors that match them. The
// syntax is Kubernetes' own, so a node's labels can be passed through unchanged.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dhpt {

inline constexpr int kMaxLabels = 32;
// Kubernetes: a name of at most 63 characters, with an optional DNS prefix of at most 253.
inline constexpr int kMaxLabelKeyBytes = 253 + 1 + 63;
inline constexpr int kMaxLabelValueBytes = 63;

// INVALID_ARGUMENT, naming `field` and the label, unless `key`=`value` is a valid Kubernetes
// label (key: [prefix/]name; name and value: alphanumerics, '-', '_', '.', starting and ending
// alphanumeric; the value may be empty).
absl::Status ValidateLabel(absl::string_view field, absl::string_view key, absl::string_view value);

// "board=pi4,gpu=orin" -> {board: pi4, gpu: orin}; "" -> {}. Each label valid, keys unique,
// at most kMaxLabels.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(absl::string_view text);

}  // namespace dhpt
