#pragma once

// Study specs from files: YAML or JSON (JSON is YAML), in the proto JSON mapping, so the same
// file works with `dhpt submit` and with grpcurl. Unknown fields are errors.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dhpt/v1/common.pb.h"
#include "google/protobuf/message.h"

namespace dhpt::cli {

absl::StatusOr<v1::StudySpec> ParseStudySpec(const std::string& text);
// Any message from YAML or JSON text, in the proto JSON mapping; unknown fields are errors
// ("not a WHAT: ...").
absl::Status ParseYamlMessage(const std::string& text, absl::string_view what,
                              google::protobuf::Message& message);
// Files the CLI reads are regular files up to a limit, checked before they are read
// (services/common/input_file.h): a study spec or a compare matrix must fit in one message at
// the scheduler's default --max_message_bytes; an export (dhpt import) or a file the CLI wrote
// itself (a report, a plot) may be larger, up to kMaxExportFileBytes.
inline constexpr int64_t kMaxStudyFileBytes = 4 << 20;
inline constexpr int64_t kMaxExportFileBytes = int64_t{256} << 20;
// The file's text; InvalidArgument when it is not a regular file or is over `max_bytes`
// (kMaxStudyFileBytes or kMaxExportFileBytes, named in the message).
absl::StatusOr<std::string> ReadTextFile(const std::string& path, int64_t max_bytes);
// Writes `text` aside and renames it into place, so that an interrupted write never leaves a
// half file that a later run (a resumed matrix) would trust.
absl::Status WriteTextFile(const std::string& path, const std::string& text);
// The message as indented JSON with the .proto field names, as the files above are read; an
// error (a timestamp past year 9999 has no JSON) rather than empty text.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
absl::StatusOr<v1::StudySpec> ReadStudyFile(const std::string& path);
// Replaces the study's early_stopping with `rule`: "off" (none), "median", "asha" or
// "hyperband" (each with its defaults); "" keeps the study's own. INVALID_ARGUMENT for anything else.
absl::Status OverrideEarlyStopping(absl::string_view rule, v1::StudySpec& spec);
// The YAML document as JSON text: quoted scalars stay strings; plain ones become numbers,
// booleans or null where they read as such.
absl::StatusOr<std::string> YamlToJson(const std::string& yaml);

// `text` as a quoted JSON string, escaped: the one escaper of the CLI's JSON writers (study
// files read as YAML, and --json).
std::string JsonString(absl::string_view text);

}  // namespace dhpt::cli
