#pragma once

// Text that users and workers wrote (categorical values, errors, names) reaches other users'
// terminals through the CLI: every character services/common/unsafe_text.h names is shown
// escaped (\x1b, \u0085, \u202e), everything else as it is.

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "services/common/unsafe_text.h"

namespace dhpt::cli {

inline std::string TerminalText(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t unsafe = UnsafeCharacterBytes(text, i);
    if (unsafe == 0) {
      out += text[i++];
    } else if (unsafe == 1) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[i++]));
    } else {
      // The code point, from its two or three UTF-8 bytes.
      const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]) & 0x3f; };
      const unsigned code = unsafe == 2 ? ((text[i] & 0x1f) << 6) | byte(1)
                                        : ((text[i] & 0x0f) << 12) | (byte(1) << 6) | byte(2);
      absl::StrAppendFormat(&out, "\\u%04x", code);
      i += unsafe;
    }
  }
  return out;
}

}  // namespace dhpt::cli
