#pragma once

// How spec validation words its errors: INVALID_ARGUMENT naming the field, and user text quoted
// back cut short, so that an error never grows with the input.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dhpt::study {

inline absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

inline std::string Quote(absl::string_view text) {
  constexpr size_t kQuoted = 64;
  if (text.size() <= kQuoted) return absl::StrCat("\"", text, "\"");
  // Cut before a character, not inside one: a message that is not UTF-8 reaches a Python
  // client decoded as Latin-1, every accented letter in it garbled.
  size_t cut = kQuoted;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return absl::StrCat("\"", text.substr(0, cut), "...\" (", text.size(), " bytes)");
}

}  // namespace dhpt::study
