#pragma once

// Abseil 20220623 has no absl/log: one line per event on stderr, with time and severity.

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/unsafe_text.h"

namespace dhpt {

// Unsafe characters (unsafe_text.h: controls, C1's CSI included, and the invisible formats) as
// \xNN per byte: a message carries what clients sent (worker ids, study names, error texts),
// and a newline or a terminal escape in it must not forge a line of its own.
inline std::string EscapeControlCharacters(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t unsafe = UnsafeCharacterBytes(text, i);
    if (unsafe == 0) {
      out.push_back(text[i++]);
      continue;
    }
    for (const size_t end = i + unsafe; i < end; ++i) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[i]));
    }
  }
  return out;
}

template <typename... Args>
void LogLine(char severity, const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone()),
      std::string(1, severity), " ", EscapeControlCharacters(absl::StrFormat(format, args...)),
      "\n");
  std::fputs(line.c_str(), stderr);
}

#define DHPT_LOG_INFO(...) ::dhpt::LogLine('I', __VA_ARGS__)
#define DHPT_LOG_WARNING(...) ::dhpt::LogLine('W', __VA_ARGS__)
#define DHPT_LOG_ERROR(...) ::dhpt::LogLine('E', __VA_ARGS__)

}  // namespace dhpt
