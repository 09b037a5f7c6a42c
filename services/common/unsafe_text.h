#pragma once

// Characters that text from users and workers must not carry to another user's terminal:
// controls (C0, DEL, C1: cursor moves, colours, a carriage return rewriting a line, a newline
// breaking a one-line protocol) and the invisible or direction-changing formats (zero-width
// spaces, line and paragraph separators, bidirectional embeddings, overrides and isolates, the
// byte-order mark) that make shown text read other than it is. Validation refuses them in
// specs; the CLI shows them escaped.

#include <cstddef>

#include "absl/strings/string_view.h"

namespace dhpt {

// The length in bytes of the unsafe character at text[i] (UTF-8), or 0 when it is safe.
inline size_t UnsafeCharacterBytes(absl::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const size_t left = text.size() - i;
  if (at(0) < 0x20 || at(0) == 0x7f) return 1;
  if (at(0) == 0xc2 && left >= 2 && at(1) >= 0x80 && at(1) <= 0x9f) return 2;  // U+0080..009F
  if (left >= 3 && at(0) == 0xe2 && at(1) == 0x80 &&
      ((at(2) >= 0x8b && at(2) <= 0x8f) || (at(2) >= 0xa8 && at(2) <= 0xae))) {
    return 3;  // U+200B..200F, U+2028..202E
  }
  if (left >= 3 && at(0) == 0xe2 && at(1) == 0x81 && at(2) >= 0xa6 && at(2) <= 0xa9) {
    return 3;  // U+2066..2069
  }
  if (left >= 3 && at(0) == 0xef && at(1) == 0xbb && at(2) == 0xbf) return 3;  // U+FEFF
  return 0;
}

inline bool HasUnsafeCharacters(absl::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (UnsafeCharacterBytes(text, i) > 0) return true;
  }
  return false;
}

}  // namespace dhpt
