#pragma once

// The one place where absl::Status meets grpc::Status.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace dhpt {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace dhpt
