#pragma once

// How spec validation words its errors: INVALID_ARGUMENT naming the field, and user text quoted
// back cut short, so that an error never grows with the input.

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace dhpt::study {

inline absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

// Control bytes are written out (\x1b): a message goes to terminals whole, through grpcurl
// and the Python client, where an escape sequence in a name would act (hostile review).
inline std::string Quote(absl::string_view text) {
  constexpr size_t kQuoted = 64;
  // Cut before a character, not inside one: a message that is not UTF-8 reaches a Python
  // client decoded as Latin-1, every accented letter in it garbled.
  size_t cut = std::min(text.size(), kQuoted);
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
    --cut;
  }
  std::string quoted = "\"";
  for (const char c : text.substr(0, cut)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppendFormat(&quoted, "\\x%02x", byte);
    } else {
      quoted += c;
    }
  }
  if (cut == text.size()) return quoted + "\"";
  return absl::StrCat(quoted, "...\" (", text.size(), " bytes)");
}

}  // namespace dhpt::study
