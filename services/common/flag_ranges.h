#pragma once

// The values each numeric flag of a binary accepts, in one table per binary, checked once the
// command line and the DHPT_<FLAG> variables are parsed (ParseFlagsOnly, env_flags.h): a value
// outside its range stops the process at start with exit status 2 and a message that gives the
// range and what its special values mean, rather than a worker running with -1 threads or a
// scheduler whose keepalive overflows. docs/deployment.md and docs/cli.md list the ranges.

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace dhpt {

class FlagRange {
 public:
  static constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

  // An int or int64_t flag: from `min` to `max`, both included. `meaning` says what special
  // values mean ("0: one per core"), or is empty.
  static FlagRange Integer(absl::string_view flag, int64_t min, int64_t max,
                           absl::string_view meaning = "");
  // A double flag: above `min` (or from it, when `min_included`) and at most `max`.
  static FlagRange Real(absl::string_view flag, double min, bool min_included, double max,
                        absl::string_view meaning = "");
  // An absl::Duration flag: from `min` to `max`, both included.
  static FlagRange Duration(absl::string_view flag, absl::Duration min, absl::Duration max,
                            absl::string_view meaning = "");
  // A string flag naming an address, HOST:PORT (HOST may be [IPv6]), with PORT a number from
  // `min_port` to 65535: gRPC took 99999 as 34463 (16 bits) and "" or "garbage" failed later
  // with its own log lines, or a worker retried it for ever.
  // HOST is at most kMaxAddressHostBytes (a DNS name is at most 253): a longer one came back
  // whole in gRPC's "DNS resolution failed" or the scheduler's "cannot listen on" message.
  static FlagRange Address(absl::string_view flag, int min_port, absl::string_view meaning = "");
  // The same, or empty for the command's default (the CLI's --scheduler: localhost:50051, or a
  // local scheduler of its own).
  static FlagRange OptionalAddress(absl::string_view flag, int min_port,
                                   absl::string_view meaning);
  static constexpr size_t kMaxAddressHostBytes = 255;

  absl::string_view flag() const { return flag_; }
  // "between 1 and 1024", "at least 1", "above 0 and at most 1", "between 1s and 24h", then
  // the meaning in parentheses.
  std::string Accepted() const;
  // OK when the flag's value is in range; else INVALID_ARGUMENT "--NAME must be ACCEPTED; got
  // VALUE". INTERNAL when no flag of that name and type is registered (a table's mistake).
  absl::Status Check() const;

 private:
  struct IntegerBounds {
    int64_t min, max;
  };
  struct RealBounds {
    double min;
    bool min_included;
    double max;
  };
  struct DurationBounds {
    absl::Duration min, max;
  };
  struct AddressBounds {
    int min_port;
    bool empty_allowed = false;
  };
  using Bounds = std::variant<IntegerBounds, RealBounds, DurationBounds, AddressBounds>;
  FlagRange(absl::string_view flag, Bounds bounds, absl::string_view meaning)
      : flag_(flag), bounds_(bounds), meaning_(meaning) {}

  std::string flag_;
  Bounds bounds_;
  std::string meaning_;
};

// The range of `flag` in `ranges`, or nullptr.
const FlagRange* FindFlagRange(absl::Span<const FlagRange> ranges, absl::string_view flag);

}  // namespace dhpt
