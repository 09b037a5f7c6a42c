#pragma once

// Text that users and workers wrote (categorical values, errors, names) reaches other users'
// terminals through the CLI. A control character in it could move the cursor, rewrite a line
// or recolour the screen, and a newline would break a one-line protocol such as `dhpt ask`'s:
// every such character is shown escaped (\x1b, \u0085), everything else as it is.

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace dhpt::cli {

inline std::string TerminalText(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    } else if (byte == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      // U+0080..U+009F, the C1 controls (CSI among them), in UTF-8.
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(text[++i]));
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace dhpt::cli
