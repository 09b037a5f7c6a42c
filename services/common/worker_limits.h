#pragma once

// Limits on what a worker announces, shared by the scheduler (which refuses a Hello past them
// at every connect) and the workers (which check their own at start, rather than retry a
// connect that can never succeed).

#include <cstddef>

namespace dhpt {

inline constexpr size_t kMaxWorkerIdBytes = 128;  // hello.worker_id
// hello.capabilities' node, device and version names.
inline constexpr size_t kMaxWorkerTextBytes = 256;

}  // namespace dhpt
