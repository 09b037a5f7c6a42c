#include "services/common/labels.h"

#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dhpt {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", message));
}

bool IsName(absl::string_view text) {
  static const std::regex kName("[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?");
  return std::regex_match(text.begin(), text.end(), kName);
}

bool IsDnsSubdomain(absl::string_view text) {
  static const std::regex kSubdomain("[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*");
  return std::regex_match(text.begin(), text.end(), kSubdomain);
}

// The label as typed, cut short so that an error cannot grow with the input.
std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 80;
  return text.size() <= kShown ? std::string(text) : absl::StrCat(text.substr(0, kShown), "...");
}

}  // namespace

absl::Status ValidateLabel(absl::string_view field, absl::string_view key, absl::string_view value) {
  const std::string label = Shown(absl::StrCat(key, "=", value));
  if (key.size() > kMaxLabelKeyBytes) return Invalid(field, absl::StrCat(label, ": key too long"));
  absl::string_view name = key;
  if (const size_t slash = key.find('/'); slash != absl::string_view::npos) {
    const absl::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (prefix.empty() || prefix.size() > 253 || !IsDnsSubdomain(prefix)) {
      return Invalid(field, absl::StrCat(label, ": the key's prefix must be a DNS subdomain "
                                                "(lower-case, e.g. kubernetes.io)"));
    }
  }
  if (name.empty() || name.size() > 63 || !IsName(name)) {
    return Invalid(field, absl::StrCat(label, ": a key is 1-63 letters, digits, '-', '_' or '.', "
                                              "starting and ending with a letter or digit"));
  }
  if (value.size() > kMaxLabelValueBytes || (!value.empty() && !IsName(value))) {
    return Invalid(field, absl::StrCat(label, ": a value is at most 63 letters, digits, '-', '_' "
                                              "or '.', starting and ending with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(absl::string_view text) {
  std::map<std::string, std::string> labels;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (item.find('=') == absl::string_view::npos) {
      return Invalid("labels", absl::StrCat(Shown(item), ": write KEY=VALUE, e.g. board=pi4"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (absl::Status status = ValidateLabel("labels", key, value); !status.ok()) return status;
    if (!labels.emplace(std::string(key), std::string(value)).second) {
      return Invalid("labels", absl::StrCat("\"", Shown(key), "\" is given twice"));
    }
    if (static_cast<int>(labels.size()) > kMaxLabels) {
      return Invalid("labels", absl::StrCat("more than ", kMaxLabels, " labels"));
    }
  }
  return labels;
}

}  // namespace dhpt
