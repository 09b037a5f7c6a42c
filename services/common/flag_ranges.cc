#include "services/common/flag_ranges.h"

#include <algorithm>
#include <optional>

#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dhpt {
namespace {

// Whole numbers as users write them; the largest int64_t is no limit a user gives.
std::string Number(int64_t value) { return absl::StrCat(value); }

// As a user writes a duration: absl writes zero as "0", which reads as no unit.
std::string Written(absl::Duration value) {
  return value == absl::ZeroDuration() ? "0s" : absl::FormatDuration(value);
}

// The value of an int or int64_t flag (the tables do not care which), or nullopt.
std::optional<int64_t> IntegerValue(const absl::CommandLineFlag& flag) {
  if (auto value = flag.TryGet<int>()) return *value;
  if (auto value = flag.TryGet<int64_t>()) return *value;
  return std::nullopt;
}

// HOST:PORT with a HOST and a PORT of digits from `min_port` to 65535.
bool IsAddress(absl::string_view address, int min_port) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view digits = address.substr(colon + 1);
  if (host.size() > FlagRange::kMaxAddressHostBytes) return false;
  // An IPv6 host is written in brackets; its own colons are inside them.
  if (host.find(':') != absl::string_view::npos && (host.front() != '[' || host.back() != ']')) {
    return false;
  }
  if (!std::all_of(host.begin(), host.end(), absl::ascii_isgraph)) return false;
  int port = 0;
  return !digits.empty() && digits.size() <= 5 &&
         std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) &&
         absl::SimpleAtoi(digits, &port) && port >= min_port && port <= 65535;
}

}  // namespace

FlagRange FlagRange::Integer(absl::string_view flag, int64_t min, int64_t max,
                             absl::string_view meaning) {
  return FlagRange(flag, IntegerBounds{min, max}, meaning);
}

FlagRange FlagRange::Real(absl::string_view flag, double min, bool min_included, double max,
                          absl::string_view meaning) {
  return FlagRange(flag, RealBounds{min, min_included, max}, meaning);
}

FlagRange FlagRange::Duration(absl::string_view flag, absl::Duration min, absl::Duration max,
                              absl::string_view meaning) {
  return FlagRange(flag, DurationBounds{min, max}, meaning);
}

FlagRange FlagRange::Address(absl::string_view flag, int min_port, absl::string_view meaning) {
  return FlagRange(flag, AddressBounds{min_port}, meaning);
}

FlagRange FlagRange::OptionalAddress(absl::string_view flag, int min_port,
                                     absl::string_view meaning) {
  return FlagRange(flag, AddressBounds{min_port, /*empty_allowed=*/true}, meaning);
}

std::string FlagRange::Accepted() const {
  std::string accepted;
  if (const auto* integer = std::get_if<IntegerBounds>(&bounds_)) {
    accepted = integer->max == kNoMax
                   ? absl::StrCat("at least ", Number(integer->min))
                   : absl::StrCat("between ", Number(integer->min), " and ", Number(integer->max));
  } else if (const auto* real = std::get_if<RealBounds>(&bounds_)) {
    accepted = real->min_included ? absl::StrCat("between ", real->min, " and ", real->max)
                                  : absl::StrCat("above ", real->min, " and at most ", real->max);
  } else if (const auto* duration = std::get_if<DurationBounds>(&bounds_)) {
    accepted = absl::StrCat("between ", Written(duration->min), " and ", Written(duration->max));
  } else {
    accepted = absl::StrCat("HOST:PORT with PORT between ",
                            std::get<AddressBounds>(bounds_).min_port,
                            " and 65535 and HOST at most ", kMaxAddressHostBytes, " characters");
  }
  if (!meaning_.empty()) absl::StrAppend(&accepted, " (", meaning_, ")");
  return accepted;
}

absl::Status FlagRange::Check() const {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(flag_);
  if (flag == nullptr) return absl::InternalError(absl::StrCat("no flag --", flag_, " to check"));
  bool in_range = false;
  std::string got;
  if (const auto* integer = std::get_if<IntegerBounds>(&bounds_)) {
    const std::optional<int64_t> value = IntegerValue(*flag);
    if (!value) return absl::InternalError(absl::StrCat("--", flag_, " is not an integer flag"));
    in_range = *value >= integer->min && *value <= integer->max;
    got = Number(*value);
  } else if (const auto* real = std::get_if<RealBounds>(&bounds_)) {
    const auto value = flag->TryGet<double>();  // absl::optional
    if (!value) return absl::InternalError(absl::StrCat("--", flag_, " is not a double flag"));
    // Written so that NaN is out of every range.
    in_range = (real->min_included ? *value >= real->min : *value > real->min) && *value <= real->max;
    got = absl::StrCat(*value);
  } else if (const auto* duration = std::get_if<DurationBounds>(&bounds_)) {
    const auto value = flag->TryGet<absl::Duration>();
    if (!value) return absl::InternalError(absl::StrCat("--", flag_, " is not a duration flag"));
    in_range = *value >= duration->min && *value <= duration->max;
    got = Written(*value);
  } else {
    const auto value = flag->TryGet<std::string>();
    if (!value) return absl::InternalError(absl::StrCat("--", flag_, " is not a string flag"));
    const AddressBounds& address = std::get<AddressBounds>(bounds_);
    in_range = (address.empty_allowed && value->empty()) || IsAddress(*value, address.min_port);
    got = absl::StrCat("'", absl::CHexEscape(value->substr(0, 256)), "'");
  }
  if (in_range) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag_, " must be ", Accepted(), "; got ", got));
}

const FlagRange* FindFlagRange(absl::Span<const FlagRange> ranges, absl::string_view flag) {
  for (const FlagRange& range : ranges) {
    if (range.flag() == flag) return &range;
  }
  return nullptr;
}

}  // namespace dhpt
