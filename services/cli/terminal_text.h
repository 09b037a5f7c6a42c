#pragma once

// Text that users and workers wrote (categorical values, errors, names) reaches other users'
// terminals through the CLI: every character services/common/unsafe_text.h names is shown
// escaped (\x1b, \u0085, \u202e), everything else as it is.

#include <ostream>
#include <string>

#include "absl/status/status.h"
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

// A refusal as every dhpt command prints it: "dhpt: MESSAGE [CODE]", the message escaped (it
// may quote what a scheduler, a worker or the user wrote), then the command's `usage` when
// given, as it is (its line breaks are ours).
inline void PrintRefusal(std::ostream& err, const absl::Status& status,
                         absl::string_view usage = "") {
  err << "dhpt: " << TerminalText(status.message()) << " ["
      << absl::StatusCodeToString(status.code()) << "]\n";
  if (!usage.empty()) err << "usage: " << usage << "\n";
}

}  // namespace dhpt::cli
