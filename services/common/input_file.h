#pragma once

// Reading a file a user named (a study spec, an export): only a regular file, and only up to a
// stated size. /dev/zero or /dev/urandom would otherwise be read until memory ran out, and a
// FIFO would block open() and read() for ever.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dhpt {

// What a file of this st_mode is, in words ("a FIFO", "a directory", ...); "a regular file".
const char* FileKind(mode_t mode);

// The whole of `path` if it is a regular file of at most `max_bytes`; checked before anything
// is read (the open does not wait on a FIFO). NotFound when it cannot be opened;
// InvalidArgument, naming the file, its kind or size and `limit_name`, when it is not a
// regular file or is larger.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes,
                                            absl::string_view limit_name);

// Whether `status` is ReadRegularFile's refusal of a file that is not regular or too large: a
// usage error (the command was given the wrong file), which the CLI exits 2 for, not a
// content error.
bool IsUnusableInputFile(const absl::Status& status);

}  // namespace dhpt
