#pragma once

// Abseil 20220623 has no absl/log: one line per event on stderr, with time and severity.

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dhpt {

template <typename... Args>
void LogLine(char severity, const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", absl::Now(), absl::UTCTimeZone()),
      std::string(1, severity), " ", absl::StrFormat(format, args...), "\n");
  std::fputs(line.c_str(), stderr);
}

#define DHPT_LOG_INFO(...) ::dhpt::LogLine('I', __VA_ARGS__)
#define DHPT_LOG_WARNING(...) ::dhpt::LogLine('W', __VA_ARGS__)
#define DHPT_LOG_ERROR(...) ::dhpt::LogLine('E', __VA_ARGS__)

}  // namespace dhpt
