#pragma once

// Abseil 20220623 ships no status macros; these are the two every file needs.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define DHPT_STATUS_CONCAT_INNER(a, b) a##b
#define DHPT_STATUS_CONCAT(a, b) DHPT_STATUS_CONCAT_INNER(a, b)

// Returns from the current function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    if (absl::Status _dhpt_status = (expr);     \
        !_dhpt_status.ok()) {                   \
      return _dhpt_status;                      \
    }                                           \
  } while (false)

// `ASSIGN_OR_RETURN(auto x, F())` declares x from an OK StatusOr, or returns its status.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  DHPT_ASSIGN_OR_RETURN_IMPL(DHPT_STATUS_CONCAT(_dhpt_statusor_, __LINE__), lhs, rexpr)

#define DHPT_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  if (!statusor.ok()) {                                  \
    return std::move(statusor).status();                 \
  }                                                      \
  lhs = std::move(statusor).value()
