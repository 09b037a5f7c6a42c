#include "services/common/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dhpt {
namespace {

constexpr char kUnusablePayload[] = "type.dhpt/unusable_input_file";

absl::Status Unusable(std::string message) {
  absl::Status status = absl::InvalidArgumentError(std::move(message));
  status.SetPayload(kUnusablePayload, absl::Cord());
  return status;
}

}  // namespace

bool IsUnusableInputFile(const absl::Status& status) {
  return status.GetPayload(kUnusablePayload).has_value();
}

const char* FileKind(mode_t mode) {
  return S_ISREG(mode)    ? "a regular file"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
                          : "not a regular file";
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, int64_t max_bytes,
                                            absl::string_view limit_name) {
  // O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct stat info {};
  absl::Status refused;
  if (fstat(fd, &info) != 0) {
    refused = absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  } else if (!S_ISREG(info.st_mode)) {
    refused = Unusable(
        absl::StrCat(path, " is ", FileKind(info.st_mode), ", not a regular file: save it to a file first"));
  } else if (info.st_size > max_bytes) {
    refused = Unusable(absl::StrCat(
        path, " has ", info.st_size, " bytes, more than the ", max_bytes, " a file here may hold (",
        limit_name, ")"));
  }
  if (!refused.ok()) {
    close(fd);
    return refused;
  }
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fd);
      return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    // A file that grows while it is read stops at the limit too.
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      close(fd);
      return Unusable(absl::StrCat(path, " grew past the ", max_bytes,
                                                     " bytes a file here may hold (", limit_name, ")"));
    }
  }
  close(fd);
  return text;
}

}  // namespace dhpt
